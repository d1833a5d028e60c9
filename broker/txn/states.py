"""A transaction's states and transition table, its in-memory record and log format.

States and transitions (anything else raises ``TxnStateError`` naming the
expected and the actual state)::

    OPEN -> COMMITTING -> COMMITTED
    OPEN -> ABORTING   -> ABORTED | TIMED_OUT

A transaction's log record (``_txnlog``, keyed by the txn id in hex) is
versioned JSON: state, timeout deadline, touched segments, label and when it
finished. A commit group's record is keyed ``commit-<first txn id>``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from broker.errors import InvalidArgumentError, TxnStateError
from ledger.records import dump_record
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex

__all__ = [
    "DEFAULT_FINISHED_RETENTION_MS",
    "DEFAULT_TXN_TIMEOUT_MS",
    "FINAL_STATES",
    "GROUP_PREFIX",
    "LOG_FORMAT_VERSION",
    "MAX_TXN_LABEL_BYTES",
    "MAX_TXN_TIMEOUT_MS",
    "TXN_LOG_TOPIC",
    "Finishing",
    "Txn",
    "TxnState",
    "TxnStatus",
    "check_label",
    "check_transition",
]

TXN_LOG_TOPIC = "_txnlog"
LOG_FORMAT_VERSION = 1
#: ``BeginTxn`` with timeout_ms 0.
DEFAULT_TXN_TIMEOUT_MS = 60_000
#: Longest timeout honoured.
MAX_TXN_TIMEOUT_MS = 24 * 3600 * 1000
#: Longest transaction label accepted, in UTF-8 bytes.
MAX_TXN_LABEL_BYTES = 256
#: Key prefix of a commit group's record (``commit-<first txn id>``).
GROUP_PREFIX = "commit-"


#: How long a finished transaction's status is kept (GetTxnStatus), in ms.
DEFAULT_FINISHED_RETENTION_MS = 3_600_000


class TxnState(Enum):
    """A transaction's state (values as ``folio.v1.TxnState``)."""

    OPEN = 1
    COMMITTING = 2
    COMMITTED = 3
    ABORTING = 4
    ABORTED = 5
    TIMED_OUT = 6


_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.OPEN: frozenset({TxnState.COMMITTING, TxnState.ABORTING}),
    TxnState.COMMITTING: frozenset({TxnState.COMMITTED}),
    TxnState.ABORTING: frozenset({TxnState.ABORTED, TxnState.TIMED_OUT}),
    TxnState.COMMITTED: frozenset(),
    TxnState.ABORTED: frozenset(),
    TxnState.TIMED_OUT: frozenset(),
}

#: States a transaction never leaves.
FINAL_STATES = frozenset(state for state, to in _TRANSITIONS.items() if not to)


def check_transition(txn_id: str, actual: TxnState, target: TxnState) -> None:
    """Raise ``TxnStateError`` unless ``actual -> target`` is in the transition table."""
    if target not in _TRANSITIONS[actual]:
        expected = " or ".join(sorted(s.name for s, to in _TRANSITIONS.items() if target in to))
        raise TxnStateError(txn_id, expected, actual.name)


@dataclass(slots=True)
class Txn:
    """A transaction as the coordinator holds it in memory; ``record`` is its log value."""

    txn_id: TxnId
    state: TxnState
    deadline_ms: int
    segments: list[str] = field(default_factory=list)
    #: ``BeginTxnRequest.label``; "" for none.
    label: str = ""
    #: When it reached COMMITTED, ABORTED or TIMED_OUT (ms since the epoch); -1 before.
    finished_ms: int = -1
    in_flight: int = 0
    #: Fires at the deadline (OPEN only).
    timer: asyncio.TimerHandle | None = None
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    #: Per touched segment: its registration and appends pass in call order.
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.idle.set()  # no append in flight

    @property
    def name(self) -> str:
        """The txn id in hex: its key in the log."""
        return txn_id_hex(self.txn_id)

    def cancel_timer(self) -> None:
        """Stop the deadline's timer, if one is set (finishing, or standing down)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def record(self) -> bytes:
        """The versioned JSON record of the log."""
        return dump_record(LOG_FORMAT_VERSION, {
            "state": self.state.name, "deadline_ms": self.deadline_ms,
            "segments": self.segments, "finished_ms": self.finished_ms, "label": self.label,
        }, legacy_key="v")  # "v": for brokers of earlier builds (ledger.records)


@dataclass(frozen=True, slots=True)
class TxnStatus:
    """What ``GetTxnStatus`` answers."""

    state: TxnState
    segments: tuple[str, ...]
    deadline_ms: int
    label: str = ""


def check_label(label: str) -> None:
    """``InvalidArgumentError`` unless ``label`` fits ``MAX_TXN_LABEL_BYTES``."""
    if len(label.encode()) > MAX_TXN_LABEL_BYTES:
        raise InvalidArgumentError(
            f"a transaction label is at most {MAX_TXN_LABEL_BYTES} bytes (UTF-8), got "
            f"{len(label.encode())}")


@dataclass(slots=True)
class Finishing:
    """A decided transaction, or commit group, on its way to its final records."""

    txn_ids: tuple[TxnId, ...]
    #: COMMITTED, ABORTED or TIMED_OUT.
    final: TxnState
    #: A commit: its group record's key (None: a single transaction's record decides).
    group_key: str | None
    #: The COMMITTING or ABORTING record is known durable.
    logged: bool
    #: Every marker is known durable (the transactions are in their final state).
    marked: bool = False
    failures: int = 0
    retry_at_ms: int = 0
    running: bool = False
    #: The next try, scheduled after a failure.
    timer: asyncio.TimerHandle | None = None

    @property
    def key(self) -> str:
        """The key of its decision record: the group's, or the transaction's."""
        return self.group_key if self.group_key is not None else txn_id_hex(self.txn_ids[0])
