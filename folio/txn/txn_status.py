"""A transaction's state as the broker's coordinator knows it (``GetTxnStatus``)."""

from __future__ import annotations

from enum import StrEnum

from folio.api.v1 import transactions_pb2

__all__ = ["TxnStatus"]


class TxnStatus(StrEnum):
    """The coordinator's state of a transaction.

    A ``str`` enum: ``TxnStatus.COMMITTED == "COMMITTED"``. ``UNKNOWN`` is a
    state this SDK does not know (a newer broker's). COMMITTING means the
    commit was taken and will complete, after a broker crash too.
    """

    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    #: Aborted by the coordinator because its timeout passed while OPEN.
    TIMED_OUT = "TIMED_OUT"
    UNKNOWN = "UNKNOWN"

    @property
    def committed(self) -> bool:
        """Whether the commit was taken (COMMITTING or COMMITTED): it will be visible."""
        return self in (TxnStatus.COMMITTING, TxnStatus.COMMITTED)

    @property
    def aborted(self) -> bool:
        """Whether the transaction is or will be aborted (ABORTING, ABORTED, TIMED_OUT)."""
        return self in (TxnStatus.ABORTING, TxnStatus.ABORTED, TxnStatus.TIMED_OUT)

    @classmethod
    def from_wire(cls, state: int) -> TxnStatus:
        """The status of a ``folio.v1.TxnState`` number (UNKNOWN for one not listed here)."""
        try:
            return cls(transactions_pb2.TxnState.Name(state))  # type: ignore[arg-type]
        except ValueError:
            return cls.UNKNOWN
