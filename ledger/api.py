"""Contracts of the ledger service: what each piece promises, apart from how it is built.

``LedgerService`` is what the layers above hold of the ledger service
(implemented by ``ledger.client.ledger_client.LedgerClient``); ``WriteHandle``
and ``ReadHandle`` are what they get from its ``create`` and ``open`` (both
implemented by ``ledger.client.handle.LedgerHandle``). The broker is typed on
these contracts only (an import contract keeps it off ``ledger.client``).
``BookieClient`` is the seam between a ledger handle and one bookie, whether
the bookie runs in this process (``ledger.bookie.bookie.Bookie``) or behind gRPC
(``ledger.bookie.remote.GrpcBookieClient``). ``MetadataStore`` is the
ZooKeeper-shaped store of ledger metadata and bookie registrations: embedded
on RocksDB for standalone (``ledger.metadata.rocksdb_store``), ZooKeeper for
clusters.

This module imports nothing else of ``ledger`` except ``ledger.errors`` (in
docstrings only): every other part of the package may depend on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

#: LAC / last entry id of a ledger that holds nothing yet.
NO_ENTRY = -1


@dataclass(frozen=True, slots=True)
class AddRequest:
    """A run of entries of one ledger for one bookie.

    The three sequences are parallel and in increasing entry id order;
    ``entry_ids`` is a ``range`` when the entries are contiguous. ``lengths[i]``
    is the ledger's length in bytes up to and including entry ``entry_ids[i]``.
    """

    ledger_id: int
    entry_ids: Sequence[int]
    lengths: Sequence[int]
    datas: Sequence[bytes]
    last_add_confirmed: int
    recovery: bool = False


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Entries a bookie holds in a requested range, parallel lists in entry order."""

    entry_ids: list[int]
    lengths: list[int]
    datas: list[bytes]
    last_add_confirmed: int
    last_entry_id: int


@dataclass(frozen=True, slots=True)
class LedgerTail:
    """What a bookie knows of a ledger's end."""

    last_add_confirmed: int
    last_entry_id: int
    fenced: bool


class BookieClient(Protocol):
    """One bookie, as a ledger handle uses it.

    Every method raises ``ledger.errors`` types: ``BookieUnavailableError`` when
    the bookie cannot be reached, ``StorageError`` when its storage failed.
    """

    @property
    def bookie_id(self) -> str:
        """Stable identity of the bookie (``host:port``, or ``local``)."""
        ...

    async def add_entries(self, request: AddRequest) -> None:
        """Store the entries; return once all are durable (per the bookie's durability).

        Adds are applied in the order the bookie receives them. Raises
        ``LedgerFencedError`` if the ledger is fenced and the request is not a
        recovery add, ``EntryTooLargeError`` for an entry above the limit,
        ``InvalidArgumentError`` for negative or unordered ids. If the storage
        fails a write, this and every later add fail with ``StorageError``.
        """
        ...

    async def read_entries(
        self, ledger_id: int, first_entry_id: int, last_entry_id: int,
        *, fence: bool = False, max_bytes: int = 0,
    ) -> ReadResult:
        """Entries held in ``[first_entry_id, last_entry_id]``, ids not held skipped.

        Stops after about ``max_bytes`` (0: the bookie's default), always
        returning at least one held entry. With ``fence`` the ledger is fenced
        first, after every add accepted before this call. Raises
        ``NoSuchLedgerError`` if the bookie holds no state of the ledger.
        """
        ...

    async def read_last_add_confirmed(self, ledger_id: int) -> LedgerTail:
        """The ledger's LAC and last held entry id. ``NoSuchLedgerError`` if unknown."""
        ...

    async def fence(self, ledger_id: int) -> LedgerTail:
        """Fence the ledger durably; afterwards non-recovery adds fail.

        Every add accepted before the fence is durable before this returns, and
        is counted in the returned tail.
        """
        ...

    async def delete_ledger(self, ledger_id: int) -> None:
        """Remove the ledger's entries and state. Idempotent."""
        ...

    async def close(self) -> None:
        """Release connections; the bookie itself keeps running."""
        ...


class ReadHandle(Protocol):
    """A ledger open for reading: entries by id, never past what is confirmed.

    Every method raises ``ledger.errors`` types. Reads are idempotent and may
    be retried; a reader never changes the ledger.
    """

    @property
    def ledger_id(self) -> int:
        """The ledger's id."""
        ...

    @property
    def last_add_confirmed(self) -> int:
        """The greatest entry id known to be confirmed, ``NO_ENTRY`` (-1) if none.

        On a writer it is the writer's own LAC; on a reader of an open ledger
        it only moves when ``read_last_add_confirmed`` is called.
        """
        ...

    @property
    def is_closed(self) -> bool:
        """Whether the ledger is closed in the metadata this handle holds (its end is final)."""
        ...

    @property
    def length(self) -> int:
        """Bytes of the entries up to ``last_add_confirmed`` (the closed length once closed)."""
        ...

    async def read_last_add_confirmed(self) -> int:
        """Ask the bookies for the LAC of an open ledger; returns and keeps it.

        Only moves forward. A bookie that cannot be reached is skipped (the
        answer may then lag, never lead, the writer's LAC).
        """
        ...

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        """Entries ``first_entry_id .. last_entry_id`` inclusive, in entry order.

        Raises ``InvalidArgumentError`` for a bad range, ``NoSuchEntryError``
        past ``last_add_confirmed``, ``DataLossError`` when no bookie of an
        entry's write set holds it, ``BookieUnavailableError`` when none answer.
        """
        ...


class WriteHandle(ReadHandle, Protocol):
    """The one writer of a ledger.

    Ordering: entries get ids 0, 1, 2, ... in the order ``add_async`` is called,
    and their futures resolve in that order. Durability: an entry is
    confirmed once Qa bookies of its write set hold it durably (per the
    bookies' durability setting). Failure: if an add fails for good, it and
    every later add fail with the same error (a ledger has no holes); after
    another client recovered the ledger, adds and ``close`` raise
    ``LedgerFencedError``.
    """

    def add_async(self, data: bytes) -> asyncio.Future[int]:
        """Queue an entry; the future resolves with its entry id once it is confirmed.

        Raises at once ``EntryTooLargeError`` above the entry size limit,
        ``LedgerClosedError`` after ``close``, ``InvalidArgumentError`` on a
        read-only handle, or the handle's failure once an add has failed.
        """
        ...

    async def add(self, data: bytes) -> int:
        """``add_async`` and wait: the entry's id once it is confirmed."""
        ...

    async def close(self) -> None:
        """Wait for every queued add, then close the ledger at its LAC. Idempotent.

        Afterwards ``is_closed`` is true and the length and last entry id are
        final in the metadata store. Raises ``LedgerFencedError`` if the ledger
        was recovered by someone else, or the failure that stopped the writer.
        """
        ...


class LedgerService(Protocol):
    """What the layers above use of the ledger service: make, open, peek at and delete ledgers.

    Implemented by ``ledger.client.ledger_client.LedgerClient`` (BookKeeper's
    ``BookKeeper`` client object). Every method raises ``ledger.errors`` types.
    """

    @property
    def max_entry_bytes(self) -> int:
        """The largest entry a handle of this service accepts."""
        ...

    async def create(self, *, properties: Mapping[str, str] | None = None) -> WriteHandle:
        """A new ledger on a fresh ensemble (the configured quorums), open for writing.

        After a lost answer the ledger's node is read back; at worst an empty
        orphan ledger is left, which no record names.
        """
        ...

    async def open(self, ledger_id: int, *, recovery: bool = True) -> WriteHandle:
        """A read-only handle of an existing ledger (its adds raise ``InvalidArgumentError``).

        With ``recovery`` an open ledger is fenced and closed at its agreed end
        (the old writer's next add fails with ``LedgerFencedError``); without
        it the ledger is left alone and the handle reads up to the LAC the
        bookies report. ``NoSuchLedgerError`` if it does not exist.
        """
        ...

    async def peek_last_entry(self, ledger_id: int) -> bytes | None:
        """The last entry a writer handed to any bookie, without fencing; None if none.

        A closed ledger answers its last entry; an open one the entry with the
        greatest id any bookie of its last ensemble holds (possibly ahead of
        the writer's LAC). Raises ``NoSuchLedgerError``, or
        ``BookieUnavailableError`` when the entry cannot be read.
        """
        ...

    async def delete(self, ledger_id: int) -> None:
        """Delete the ledger's entries and then its metadata. Idempotent."""
        ...

    async def close(self) -> None:
        """Release the service's connections (not the bookies or the metadata store)."""
        ...


class LedgerState(Enum):
    """Life of a ledger; moves only along ``LEDGER_TRANSITIONS``."""

    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


LEDGER_TRANSITIONS: dict[LedgerState, frozenset[LedgerState]] = {
    LedgerState.OPEN: frozenset({LedgerState.IN_RECOVERY, LedgerState.CLOSED}),
    # Recovery may be taken over by another recoverer (IN_RECOVERY again).
    LedgerState.IN_RECOVERY: frozenset({LedgerState.IN_RECOVERY, LedgerState.CLOSED}),
    LedgerState.CLOSED: frozenset(),
}


@dataclass(frozen=True, slots=True)
class Versioned:
    """A metadata node's data and its version (0 on create, +1 per successful set)."""

    data: bytes
    version: int


class EventType(Enum):
    """What a one-shot metadata watch saw."""

    CREATED = "CREATED"
    CHANGED = "CHANGED"
    DELETED = "DELETED"
    CHILDREN = "CHILDREN"


WatchCallback = Callable[[EventType, str], None]


class SessionState(Enum):
    """The state of a metadata store's session, as its session listeners see it.

    ``CONNECTED``: connected, the session and its ephemeral nodes alive.
    ``SUSPENDED``: the connection was lost; the session may still be alive
    (ZooKeeper keeps it for the session timeout) and calls wait or fail with
    ``MetadataUnavailableError``. Another process cannot yet have taken over
    what this session's ephemeral nodes hold, but may do so at any moment.
    ``LOST``: the session expired: its ephemeral nodes and watches are gone
    (pending watches never fire). The store goes on with a new session
    (``CONNECTED`` follows once it reconnects); ephemeral nodes must be
    created again.
    """

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


SessionListener = Callable[[SessionState], None]


class MetadataStore(Protocol):
    """A ZooKeeper-shaped store: slash-separated paths, versioned nodes, one-shot watches.

    Parents must exist before children are created (``create(..., make_parents=True)``
    creates them). Every change is durable before the call returns. Watches are
    one-shot, as in ZooKeeper: a callback fires at most once, after the change
    it reports is visible, and must not block.
    """

    async def create(
        self, path: str, data: bytes = b"", *, make_parents: bool = False,
        sequential: bool = False, ephemeral: bool = False,
    ) -> str:
        """Create a node and return its path.

        With ``sequential`` a zero-padded, increasing 10-digit counter is
        appended to ``path`` (as ZooKeeper does). ``ephemeral`` nodes vanish
        with the session that created them (the embedded store: when it closes).
        Raises ``NodeExistsError``, or ``NoNodeError`` for a missing parent.
        """
        ...

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> Versioned:
        """The node's data and version. Raises ``NoNodeError``.

        A watch fires on the node's next change or deletion; it is set even
        when the node is missing, then it fires on creation.
        """
        ...

    async def exists(self, path: str) -> bool:
        """Whether the node exists."""
        ...

    async def set(self, path: str, data: bytes, expected_version: int) -> int:
        """Compare-and-set: replace the data if the version matches; return the new version.

        ``expected_version=-1`` matches any version. Raises ``BadVersionError``
        or ``NoNodeError``.
        """
        ...

    async def delete(self, path: str, expected_version: int = -1) -> None:
        """Delete a childless node.

        Raises ``NoNodeError``, ``BadVersionError``, ``NotEmptyError``.
        """
        ...

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        """Names (not paths) of the node's children, sorted. Raises ``NoNodeError``.

        A watch fires when a child is created or deleted, or the node deleted.
        """
        ...

    async def close(self) -> None:
        """Close the session; its ephemeral nodes are deleted."""
        ...

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` on every change of the session's state.

        Called on the event loop the store runs on, in order; it must not block.
        A deliberate ``close`` reports nothing. The embedded store's session
        lives as long as the store: its listeners are never called.
        """
        ...

    def remove_session_listener(self, listener: SessionListener) -> None:
        """Stop calling ``listener``; nothing if it was not added."""
        ...
