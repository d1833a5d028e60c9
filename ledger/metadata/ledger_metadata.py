"""The ledger metadata record: what the metadata store holds for each ledger.

``LedgerMetadata`` is immutable; changes make new instances (``transition``,
``with_state``, ``with_ensemble_change``) which the caller writes back with a
compare-and-set on the node's version. The persisted form is the protobuf
``folio.ledger.v1.LedgerMetadata`` with ``format_version`` 1; readers refuse
versions they do not know. A ledger's node is ``ledger_path(ledger_id)``:
``/ledgers/L`` and the id zero-padded to 20 digits, so that ZooKeeper's
children of ``/ledgers`` sort by id (``/ledgers`` also holds the ``idgen``
counter of ``ledger.client.ledger_ids``; ``ledger_id_from_name`` tells them apart).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from google.protobuf.message import DecodeError

from ledger._proto.v1 import metadata_pb2
from ledger.api import LEDGER_TRANSITIONS, NO_ENTRY, LedgerState
from ledger.errors import InvalidArgumentError
from ledger.metadata.paths import LEDGERS_PATH

__all__ = [
    "FORMAT_VERSION",
    "LEDGERS_PATH",
    "EnsembleSegment",
    "LedgerMetadata",
    "check_transition",
    "ledger_id_from_name",
    "ledger_path",
]

logger = logging.getLogger(__name__)

#: The persisted format this code writes and the only one it reads.
FORMAT_VERSION = 1

_LEDGER_NAME_PREFIX = "L"
_LEDGER_ID_DIGITS = 20
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

#: ``(first_entry_id, bookies)``: the bookies holding entries from
#: ``first_entry_id`` until the next segment's first entry id.
EnsembleSegment = tuple[int, tuple[str, ...]]

_STATE_TO_PROTO: dict[LedgerState, metadata_pb2.LedgerState.ValueType] = {
    LedgerState.OPEN: metadata_pb2.LEDGER_STATE_OPEN,
    LedgerState.IN_RECOVERY: metadata_pb2.LEDGER_STATE_IN_RECOVERY,
    LedgerState.CLOSED: metadata_pb2.LEDGER_STATE_CLOSED,
}
_STATE_FROM_PROTO = {value: state for state, value in _STATE_TO_PROTO.items()}


def ledger_path(ledger_id: int) -> str:
    """The metadata path of a ledger: ``/ledgers/L`` + the id padded to 20 digits.

    Raises:
        InvalidArgumentError: a negative id, or one beyond int64.
    """
    _check_int("ledger_id", ledger_id, 0, _INT64_MAX, ledger_id=None)
    return f"{LEDGERS_PATH}/{_LEDGER_NAME_PREFIX}{ledger_id:0{_LEDGER_ID_DIGITS}d}"


def ledger_id_from_name(name: str) -> int:
    """The ledger id of a child name of ``/ledgers`` made by ``ledger_path``.

    Raises:
        InvalidArgumentError: ``name`` is not a ledger's node name (``idgen``, say).
    """
    digits = name[len(_LEDGER_NAME_PREFIX) :]
    if (
        not name.startswith(_LEDGER_NAME_PREFIX)
        or len(digits) != _LEDGER_ID_DIGITS
        or not (digits.isascii() and digits.isdigit())
    ):
        raise InvalidArgumentError(f"{name!r} is not a ledger node name")
    return int(digits)


def check_transition(
    current: LedgerState, new_state: LedgerState, *, ledger_id: int | None = None
) -> None:
    """Check that a ledger may move from ``current`` to ``new_state``.

    Raises:
        InvalidArgumentError: the move is not in ``ledger.api.LEDGER_TRANSITIONS``;
            the message names both states and the allowed ones.
    """
    allowed = LEDGER_TRANSITIONS[current]
    if new_state not in allowed:
        allowed_names = ", ".join(sorted(state.value for state in allowed)) or "none"
        raise InvalidArgumentError(
            f"ledger {ledger_id}: illegal state transition {current.value} -> "
            f"{new_state.value} (allowed from {current.value}: {allowed_names})",
            ledger_id=ledger_id,
        )


def _check_int(name: str, value: object, low: int, high: int, *, ledger_id: int | None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(
            f"{name} must be an int, got {type(value).__name__}", ledger_id=ledger_id
        )
    if not low <= value <= high:
        raise InvalidArgumentError(
            f"{name} must be in [{low}, {high}], got {value}", ledger_id=ledger_id
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerMetadata:
    """One ledger's metadata; immutable, checked on construction.

    Attributes:
        ledger_id: the ledger's id (>= 0).
        ensemble_size: E, bookies per ensemble.
        write_quorum: Qw, bookies each entry is written to (E >= Qw).
        ack_quorum: Qa, acknowledgements an add waits for (Qw >= Qa >= 1).
        state: OPEN, IN_RECOVERY or CLOSED; changes along ``LEDGER_TRANSITIONS``.
        last_entry_id: the last entry's id, ``NO_ENTRY`` (-1) if none; final once CLOSED.
        length: the ledger's length in bytes; final once CLOSED.
        ensembles: ``(first_entry_id, bookies)`` segments in increasing
            ``first_entry_id`` order, the first at entry 0, each of
            ``ensemble_size`` distinct bookie ids.
        created_ms: creation time, milliseconds since the epoch.
        properties: free-form strings set by the creator (read-only mapping).

    Raises:
        InvalidArgumentError: any field out of range or inconsistent.
    """

    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = NO_ENTRY
    length: int = 0
    ensembles: tuple[EnsembleSegment, ...]
    created_ms: int
    # Not hashed: a mapping is not hashable; equality still compares it.
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        ledger_id = self.ledger_id
        _check_int("ledger_id", ledger_id, 0, _INT64_MAX, ledger_id=None)
        for name in ("ensemble_size", "write_quorum", "ack_quorum"):
            _check_int(name, getattr(self, name), 1, _INT32_MAX, ledger_id=ledger_id)
        if not self.ensemble_size >= self.write_quorum >= self.ack_quorum:
            raise InvalidArgumentError(
                f"quorums must satisfy ensemble_size >= write_quorum >= ack_quorum, got "
                f"{self.ensemble_size} >= {self.write_quorum} >= {self.ack_quorum}",
                ledger_id=ledger_id,
            )
        if not isinstance(self.state, LedgerState):
            raise InvalidArgumentError(
                f"state must be a LedgerState, got {self.state!r}", ledger_id=ledger_id
            )
        _check_int("last_entry_id", self.last_entry_id, NO_ENTRY, _INT64_MAX, ledger_id=ledger_id)
        _check_int("length", self.length, 0, _INT64_MAX, ledger_id=ledger_id)
        _check_int("created_ms", self.created_ms, 0, _INT64_MAX, ledger_id=ledger_id)
        object.__setattr__(self, "ensembles", self._checked_ensembles(self.ensembles))
        properties = dict(self.properties)
        for key, value in properties.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise InvalidArgumentError(
                    f"properties must map str to str, got {key!r}: {value!r}",
                    ledger_id=ledger_id,
                )
        object.__setattr__(self, "properties", MappingProxyType(properties))

    def _checked_ensembles(
        self, ensembles: Iterable[tuple[int, Iterable[str]]]
    ) -> tuple[EnsembleSegment, ...]:
        segments: list[EnsembleSegment] = []
        for first_entry_id, bookies in ensembles:
            _check_int(
                "first_entry_id", first_entry_id, 0, _INT64_MAX, ledger_id=self.ledger_id
            )
            if isinstance(bookies, str):  # a str is an iterable of str, and wrong
                raise InvalidArgumentError(
                    f"bookies must be a sequence of bookie ids, got {bookies!r}",
                    ledger_id=self.ledger_id,
                )
            bookie_ids = tuple(bookies)
            if (
                len(bookie_ids) != self.ensemble_size
                or len(set(bookie_ids)) != len(bookie_ids)
                or not all(isinstance(bookie, str) and bookie for bookie in bookie_ids)
            ):
                raise InvalidArgumentError(
                    f"ensemble from entry {first_entry_id} must be {self.ensemble_size} "
                    f"distinct, non-empty bookie ids, got {bookie_ids!r}",
                    ledger_id=self.ledger_id,
                )
            if segments and first_entry_id <= segments[-1][0]:
                raise InvalidArgumentError(
                    f"ensemble first entry ids must increase, got {first_entry_id} after "
                    f"{segments[-1][0]}",
                    ledger_id=self.ledger_id,
                )
            if not segments and first_entry_id != 0:
                raise InvalidArgumentError(
                    f"the first ensemble must start at entry 0, got {first_entry_id}",
                    ledger_id=self.ledger_id,
                )
            segments.append((first_entry_id, bookie_ids))
        if not segments:
            raise InvalidArgumentError("a ledger needs an ensemble", ledger_id=self.ledger_id)
        return tuple(segments)

    # -- queries ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        """This ledger's metadata path, ``ledger_path(self.ledger_id)``."""
        return ledger_path(self.ledger_id)

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        """The bookies of the ensemble segment in force for ``entry_id``.

        Raises:
            InvalidArgumentError: a negative entry id.
        """
        _check_int("entry_id", entry_id, 0, _INT64_MAX, ledger_id=self.ledger_id)
        index = bisect.bisect_right(self.ensembles, entry_id, key=lambda segment: segment[0])
        # The first segment starts at entry 0, so index >= 1 here.
        return self.ensembles[index - 1][1]

    # -- changes (new instances) -----------------------------------------------------

    def transition(self, new_state: LedgerState) -> LedgerMetadata:
        """A copy in ``new_state``, if ``LEDGER_TRANSITIONS`` allows the move.

        Raises:
            InvalidArgumentError: an illegal move, naming both states.
        """
        return self.with_state(new_state)

    def with_state(
        self, new_state: LedgerState, *, last_entry_id: int | None = None,
        length: int | None = None,
    ) -> LedgerMetadata:
        """A copy in ``new_state`` (checked as ``transition``), with the ledger's end.

        Closing records the agreed end:
        ``metadata.with_state(LedgerState.CLOSED, last_entry_id=41, length=4096)``.

        Args:
            new_state: the state to move to.
            last_entry_id: the new last entry id; unchanged if ``None``.
            length: the new length in bytes; unchanged if ``None``.

        Raises:
            InvalidArgumentError: an illegal move, or an out-of-range end.
        """
        check_transition(self.state, new_state, ledger_id=self.ledger_id)
        return replace(
            self,
            state=new_state,
            last_entry_id=self.last_entry_id if last_entry_id is None else last_entry_id,
            length=self.length if length is None else length,
        )

    def with_ensemble_change(
        self, first_entry_id: int, new_bookies: Iterable[str]
    ) -> LedgerMetadata:
        """A copy where ``new_bookies`` hold the entries from ``first_entry_id`` on.

        A change at the same entry id as the last segment replaces that segment
        (a second bookie failed before any entry reached the new ensemble).

        Raises:
            InvalidArgumentError: the ledger is CLOSED, ``first_entry_id`` lies
                before the last segment's, or the bookies are not
                ``ensemble_size`` distinct ids.
        """
        if self.state is LedgerState.CLOSED:
            raise InvalidArgumentError(
                f"ledger {self.ledger_id} is CLOSED; its ensemble cannot change",
                ledger_id=self.ledger_id,
            )
        last_first_entry_id = self.ensembles[-1][0]
        _check_int("first_entry_id", first_entry_id, 0, _INT64_MAX, ledger_id=self.ledger_id)
        if first_entry_id < last_first_entry_id:
            raise InvalidArgumentError(
                f"ensemble change at entry {first_entry_id} is before the current "
                f"ensemble's first entry {last_first_entry_id}",
                ledger_id=self.ledger_id,
            )
        kept = self.ensembles if first_entry_id > last_first_entry_id else self.ensembles[:-1]
        if isinstance(new_bookies, str):
            raise InvalidArgumentError(
                f"new_bookies must be a sequence of bookie ids, got {new_bookies!r}",
                ledger_id=self.ledger_id,
            )
        return replace(self, ensembles=(*kept, (first_entry_id, tuple(new_bookies))))

    # -- persisted form --------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The persisted record (protobuf, ``format_version`` 1, deterministic)."""
        message = metadata_pb2.LedgerMetadata(
            format_version=FORMAT_VERSION,
            ledger_id=self.ledger_id,
            ensemble_size=self.ensemble_size,
            write_quorum=self.write_quorum,
            ack_quorum=self.ack_quorum,
            state=_STATE_TO_PROTO[self.state],
            last_entry_id=self.last_entry_id,
            length=self.length,
            ensembles=[
                metadata_pb2.EnsembleSegment(first_entry_id=first_entry_id, bookies=bookies)
                for first_entry_id, bookies in self.ensembles
            ],
            created_ms=self.created_ms,
            properties=dict(self.properties),
        )
        return message.SerializeToString(deterministic=True)

    @classmethod
    def from_bytes(cls, data: bytes) -> LedgerMetadata:
        """Decode a record made by ``to_bytes``.

        Raises:
            InvalidArgumentError: not a ledger metadata record (garbage, empty),
                a ``format_version`` other than 1, or inconsistent fields.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidArgumentError(
                f"ledger metadata must be bytes, got {type(data).__name__}"
            )
        message = metadata_pb2.LedgerMetadata()
        try:
            message.ParseFromString(bytes(data))
        except DecodeError as error:
            raise InvalidArgumentError(
                f"ledger metadata record of {len(data)} bytes cannot be decoded: {error}"
            ) from error
        ledger_id = message.ledger_id
        if message.format_version != FORMAT_VERSION:
            raise InvalidArgumentError(
                f"ledger metadata record has unknown format_version {message.format_version} "
                f"(this reader knows {FORMAT_VERSION})",
                ledger_id=ledger_id or None,
            )
        state = _STATE_FROM_PROTO.get(message.state)
        if state is None:
            raise InvalidArgumentError(
                f"ledger {ledger_id}: metadata record has no valid state ({message.state})",
                ledger_id=ledger_id,
            )
        return cls(
            ledger_id=ledger_id,
            ensemble_size=message.ensemble_size,
            write_quorum=message.write_quorum,
            ack_quorum=message.ack_quorum,
            state=state,
            last_entry_id=message.last_entry_id,
            length=message.length,
            ensembles=tuple(
                (segment.first_entry_id, tuple(segment.bookies)) for segment in message.ensembles
            ),
            created_ms=message.created_ms,
            properties=dict(message.properties),
        )
