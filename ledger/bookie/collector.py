"""Garbage collection of ledgers: a bookie drops its copies of ledgers gone from the metadata.

A delete (``LedgerClient.delete``) asks every bookie of the ledger to drop it and
then removes the metadata; a bookie that missed the request (down, cut off, its
answer lost) keeps its copy for good, and no tombstone refuses a late writer.
``LedgerCollector`` closes that gap the way BookKeeper's garbage collector thread
(its "scan and compare" collector) does, with its own safety rules:

1. **Scan.** Snapshot the ledgers this bookie holds (with each one's tail: LAC,
   last entry, fence bit), *then* list ``/ledgers``. Metadata is written before
   a ledger's first entry reaches any bookie (``LedgerClient.create``, an
   ensemble change's compare-and-set, auto-recovery's swap after its copy: the
   copy is under the ledger's lock, see 4), so a ledger held in the snapshot had
   its node created before the listing began.
2. **Suspect, then confirm on the next pass.** A held ledger missing from the
   listing is only *suspected*, with its tail. It is collected on a later pass
   only if it is still missing from that pass's listing, its tail has not
   moved meanwhile (a ledger being written now is never collected: every add
   moves the tail), and a fresh read of its own node says it does not exist
   (BookKeeper's "verify metadata on GC"). Two listings an interval apart and a
   read of the node itself leave no room for a listing served by a lagging
   ZooKeeper follower, or for a ledger whose node appeared after a listing.
3. **Unknown is no.** A listing or read that fails or times out
   (``MetadataUnavailableError``, a session expiry, anything but "no such
   node") ends the pass at once: nothing more is deleted until a later pass
   reads everything again. A missing ``/ledgers`` deletes nothing either (a
   store that was never a cluster's, or the wrong chroot, must not empty a
   bookie).
4. **Over-replicated ledgers** (optional, ``gc_over_replicated``): a *closed*
   ledger none of whose ensembles names this bookie (it was taken for lost,
   auto-recovery swapped replacements in, and it came back; or a worker copying
   the ledger here died and another chose a different bookie; a writer's
   ensemble change keeps the old ensemble in the history, so never this) is
   dropped too, under the same two-pass rule, and
   only while this collector holds the ledger's auto-recovery lock
   (``/autorecovery/locks/L<id>``, ephemeral) and no under-replication mark
   exists, with the metadata read again under the lock: auto-recovery copies a
   ledger to a replacement and swaps it in under that same lock, so the copy it
   may be making to this very bookie is never deleted behind its back.

The delete itself is the one a received delete does (``Bookie.delete_ledger``:
entries and state dropped, a tombstone kept ``TOMBSTONE_RETENTION_S``), so an
add from a writer still holding a handle is refused afterwards.

Crash windows: the collector changes metadata only by the lock of 4 (an
ephemeral node: a crash releases it with the session); a crash between the
local delete and the lock's release leaves nothing behind. A crash before the
delete's group commit is durable leaves the copy, and a later pass collects it.

Rate: metadata reads and deletes of one pass are paced at ``gc_rate_per_s``;
the listing is one ``children`` call per pass, however many ledgers there are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ledger import metrics
from ledger.api import LedgerState, LedgerTail, MetadataStore, ReadResult
from ledger.errors import (
    InvalidArgumentError,
    LedgerError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
    NoSuchLedgerError,
)
from ledger.metadata.ledger_metadata import LedgerMetadata, ledger_id_from_name, ledger_path
from ledger.metadata.paths import LEDGERS_PATH, LOCKS_PATH, UNDER_REPLICATED_PATH
from ledger.metadata.read_back import landed

__all__ = ["DEFAULT_GC_INTERVAL_MS", "DEFAULT_GC_RATE_PER_S", "CollectedLedger",
           "GarbageCollectionConfig", "LedgerCollector", "PassResult"]

log = logging.getLogger(__name__)

#: How often a bookie compares its ledgers with the metadata (BookKeeper: 15 minutes).
DEFAULT_GC_INTERVAL_MS = 15 * 60 * 1000
#: Metadata reads and deletes of one pass per second, at most.
DEFAULT_GC_RATE_PER_S = 50.0


@dataclass(frozen=True)
class GarbageCollectionConfig:
    """Whether and how a cluster bookie collects ledgers deleted from the metadata.

    Attributes:
        gc: run the collector (only in a cluster: with a metadata URL).
        gc_interval_ms: time between two passes; a ledger is collected two
            passes after its metadata went (the first pass only suspects it).
        gc_over_replicated: also drop closed ledgers whose ensembles no longer
            name this bookie (off by default, as in BookKeeper).
        gc_rate_per_s: metadata reads and deletes per second of one pass.
    """

    gc: bool = True
    gc_interval_ms: int = DEFAULT_GC_INTERVAL_MS
    gc_over_replicated: bool = False
    gc_rate_per_s: float = DEFAULT_GC_RATE_PER_S

    def __post_init__(self) -> None:
        if self.gc_interval_ms <= 0:
            raise ValueError(f"gc_interval_ms must be positive, got {self.gc_interval_ms}")
        if not self.gc_rate_per_s > 0:
            raise ValueError(f"gc_rate_per_s must be positive, got {self.gc_rate_per_s}")


class CollectedBookie(Protocol):
    """What the collector uses of a bookie (``ledger.bookie.bookie.Bookie``)."""

    def ledger_ids(self) -> list[int]: ...

    async def read_last_add_confirmed(self, ledger_id: int) -> LedgerTail: ...

    async def read_entries(self, ledger_id: int, first_entry_id: int, last_entry_id: int,
                           *, fence: bool = False, max_bytes: int = 0) -> ReadResult: ...

    async def delete_ledger(self, ledger_id: int) -> None: ...


@dataclass(frozen=True, slots=True)
class CollectedLedger:
    """One ledger a pass deleted: why (``deleted`` or ``over_replicated``) and its bytes."""

    ledger_id: int
    reason: str
    data_bytes: int


@dataclass(slots=True)
class PassResult:
    """What one pass did: ledgers deleted, suspected (for the next pass), and whether it ended
    early on an unknown metadata answer (``error``)."""

    collected: list[CollectedLedger] = field(default_factory=list)
    suspected: list[int] = field(default_factory=list)
    error: str = ""


class _Pacer:
    """At most ``rate`` calls of ``wait`` return per second (evenly spaced)."""

    def __init__(self, rate_per_s: float, sleep: Callable[[float], Awaitable[None]]) -> None:
        self._gap_s = 1.0 / rate_per_s
        self._sleep = sleep
        self._next = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        if self._next > now:
            await self._sleep(self._next - now)
        self._next = max(now, self._next) + self._gap_s


class LedgerCollector:
    """Compares a bookie's ledgers with the metadata store's, periodically; see the module doc.

    Args:
        bookie: the bookie whose copies are collected.
        bookie_id: its id in ledger ensembles (its registration).
        store: the cluster's metadata store.
        config: interval, rate, and whether over-replicated ledgers go too.
        sleep: waits (tests pass a faster one); default ``asyncio.sleep``.
    """

    def __init__(self, bookie: CollectedBookie, bookie_id: str, store: MetadataStore,
                 config: GarbageCollectionConfig, *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._bookie = bookie
        self._bookie_id = bookie_id
        self._store = store
        self._config = config
        self._sleep = sleep
        # Suspects of the last pass: ledger id -> its tail then (see rule 2).
        self._suspects: dict[int, LedgerTail] = {}

    async def run(self) -> None:
        """A pass every ``gc_interval_ms`` (the first after one interval), until cancelled."""
        while True:
            await self._sleep(self._config.gc_interval_ms / 1000)
            try:
                await self.collect_once()
            except Exception:  # a bug: logged, and the next pass starts from scratch
                log.exception("ledger gc: pass failed")
                self._suspects.clear()

    async def collect_once(self) -> PassResult:
        """One pass: collect confirmed suspects, suspect what is newly missing.

        Never raises a ledger error: an unknown metadata answer ends the pass
        (``PassResult.error``) with nothing more deleted.
        """
        result = PassResult()
        started = time.monotonic()
        try:
            await self._pass(result)
        except LedgerError as error:
            # An unknown metadata answer (MetadataUnavailableError, a session
            # expiry), an unreadable record, a storage failure: no more deletes.
            result.error = f"{type(error).__name__}: {error}"
        if result.error:
            log.warning("ledger gc: pass ended early, nothing more deleted until the next: %s",
                        result.error)
        if result.collected or result.error:
            log.info("ledger gc: %d ledgers collected (%d bytes) in %.1f s, %d suspected",
                     len(result.collected), sum(c.data_bytes for c in result.collected),
                     time.monotonic() - started, len(result.suspected))
        metrics.observe_gc_pass(failed=bool(result.error))
        return result

    async def _pass(self, result: PassResult) -> None:
        pacer = _Pacer(self._config.gc_rate_per_s, self._sleep)
        held = await self._tails(self._bookie.ledger_ids())  # before the listing: rule 1
        try:
            names = await self._store.children(LEDGERS_PATH)
        except NoNodeError:
            log.info("ledger gc: no %s in the metadata store: nothing collected", LEDGERS_PATH)
            self._suspects.clear()
            return
        listed = set()
        for name in names:
            with contextlib.suppress(InvalidArgumentError):  # idgen, not a ledger
                listed.add(ledger_id_from_name(name))
        previous, self._suspects = self._suspects, {}
        for ledger_id in sorted(held):
            tail = held[ledger_id]
            if ledger_id in listed:
                if not self._config.gc_over_replicated:
                    continue
                await pacer.wait()
                if not await self._over_replicated(ledger_id):
                    continue
                reason = "over_replicated"
            else:
                reason = "deleted"
            if previous.get(ledger_id) != tail:
                self._suspects[ledger_id] = tail  # first seen, or written meanwhile
                result.suspected.append(ledger_id)
                continue
            await pacer.wait()
            collected = await (self._collect_deleted(ledger_id, tail) if reason == "deleted"
                               else self._collect_over_replicated(ledger_id, tail))
            if collected is not None:
                result.collected.append(collected)
                metrics.observe_gc_collected(collected.reason, collected.data_bytes)

    async def _tails(self, ledger_ids: list[int]) -> dict[int, LedgerTail]:
        tails = {}
        for ledger_id in ledger_ids:
            with contextlib.suppress(NoSuchLedgerError):  # deleted since listed
                tails[ledger_id] = await self._bookie.read_last_add_confirmed(ledger_id)
        return tails

    async def _unchanged(self, ledger_id: int, tail: LedgerTail) -> bool:
        """Whether the bookie still holds the ledger with the tail it was suspected with."""
        try:
            return await self._bookie.read_last_add_confirmed(ledger_id) == tail
        except NoSuchLedgerError:
            return False

    async def _collect_deleted(self, ledger_id: int, tail: LedgerTail) -> CollectedLedger | None:
        # The node itself, read now: only "no such node" lets the delete go
        # ahead; an unknown answer raises and ends the pass (rule 3).
        if await self._store.exists(ledger_path(ledger_id)):
            log.info("ledger gc: ledger %d is in the metadata after all: kept", ledger_id)
            return None
        return await self._delete(ledger_id, tail, "deleted")

    async def _delete(self, ledger_id: int, tail: LedgerTail,
                      reason: str) -> CollectedLedger | None:
        if not await self._unchanged(ledger_id, tail):
            # Written since it was suspected (or deleted by a late request):
            # a later pass looks again.
            return None
        try:
            data_bytes = await self._data_bytes(ledger_id, tail)
        except NoSuchLedgerError:
            return None  # a late delete request got here first
        # A delete whose answer is lost in process cannot be: it is this
        # bookie's own queue. It fails only with the storage (StorageError),
        # and then the copy stays for a later pass.
        await self._bookie.delete_ledger(ledger_id)
        log.info("ledger gc: ledger %d collected (%s, %d bytes)", ledger_id, reason, data_bytes)
        return CollectedLedger(ledger_id, reason, data_bytes)

    async def _data_bytes(self, ledger_id: int, tail: LedgerTail) -> int:
        """Bytes of the ledger from the first to the last entry held (from the stored lengths).

        Exact when this bookie is in every write set (E = Qw); an upper bound
        when the ensemble stripes entries over more bookies than Qw.
        """
        if tail.last_entry_id < 0:
            return 0
        first = await self._bookie.read_entries(ledger_id, 0, tail.last_entry_id, max_bytes=1)
        last = await self._bookie.read_entries(ledger_id, tail.last_entry_id,
                                               tail.last_entry_id)
        if not first.entry_ids or not last.entry_ids:
            return 0
        return max(0, last.lengths[-1] - first.lengths[0] + len(first.datas[0]))

    # -------------------------------------------------------- over-replicated

    async def _read(self, ledger_id: int) -> LedgerMetadata | None:
        try:
            node = await self._store.get(ledger_path(ledger_id))
        except NoNodeError:
            return None
        return LedgerMetadata.from_bytes(node.data)

    def _not_ours(self, metadata: LedgerMetadata | None) -> bool:
        """A closed ledger none of whose ensembles names this bookie."""
        return (metadata is not None and metadata.state is LedgerState.CLOSED
                and all(self._bookie_id not in ids for _, ids in metadata.ensembles))

    async def _over_replicated(self, ledger_id: int) -> bool:
        return self._not_ours(await self._read(ledger_id))

    async def _collect_over_replicated(self, ledger_id: int,
                                       tail: LedgerTail) -> CollectedLedger | None:
        name = ledger_path(ledger_id).rsplit("/", 1)[1]
        lock = f"{LOCKS_PATH}/{name}"
        owner = f"gc:{self._bookie_id}".encode()
        try:
            await self._store.create(lock, owner, ephemeral=True, make_parents=True)
        except NodeExistsError:
            return None  # auto-recovery works on it: not now
        except MetadataUnavailableError:
            # Maybe taken: read back (unreadable raises, ending the pass; a lock
            # of ours then stays until this session ends, and only delays
            # auto-recovery of that one ledger).
            if await landed(self._store, lock, owner) is None:
                return None
        try:
            # Under the lock: no copy to this bookie is under way; read again.
            if await self._store.exists(f"{UNDER_REPLICATED_PATH}/{name}"):
                return None
            if not self._not_ours(await self._read(ledger_id)):
                return None
            return await self._delete(ledger_id, tail, "over_replicated")
        finally:
            # A lost answer leaves the lock until this session ends (ephemeral).
            with contextlib.suppress(NoNodeError, MetadataUnavailableError):
                await self._store.delete(lock)
