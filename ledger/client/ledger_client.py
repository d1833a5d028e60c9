"""LedgerClient: create, open (with recovery), delete ledgers, and their metadata.

Ledger metadata lives in the ``MetadataStore`` under ``/ledgers``; every change
to it is a compare-and-set on the node's version, which is how a writer learns
that a recovery took its ledger (its CAS fails) and how two recoveries agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ledger import metrics
from ledger.api import BookieClient, LedgerState, LedgerTail, MetadataStore
from ledger.client.directory import BookieDirectory
from ledger.client.handle import LedgerHandle
from ledger.client.ledger_ids import LedgerIdAllocator
from ledger.client.recovery import recover
from ledger.config import LedgerConfig, check_quorums
from ledger.errors import (
    BadVersionError,
    InvalidArgumentError,
    LedgerError,
    MetadataUnavailableError,
    NoNodeError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
)
from ledger.metadata.ledger_metadata import LedgerMetadata, ledger_path

__all__ = ["LedgerClient"]

if TYPE_CHECKING:
    from ledger.api import ReadHandle, WriteHandle

    # mypy checks here that LedgerHandle keeps the contracts of ledger.api.
    _WRITE_HANDLE: type[WriteHandle] = LedgerHandle
    _READ_HANDLE: type[ReadHandle] = LedgerHandle

log = logging.getLogger(__name__)


class LedgerClient:
    """Entry point to the ledger service for its users (the broker, tools, tests).

    Args:
        metadata: where ledger metadata lives.
        directory: the bookies to place ledgers on and reach.
        config: quorums of new ledgers, limits and timeouts.
    """

    def __init__(
        self, metadata: MetadataStore, directory: BookieDirectory,
        config: LedgerConfig | None = None,
    ) -> None:
        self._store = metadata
        self._directory = directory
        self._config = config or LedgerConfig()
        self._ids = LedgerIdAllocator(metadata)
        # Writers learn of a bookie that left the cluster (``_bookie_left``).
        self._writers: weakref.WeakSet[LedgerHandle] = weakref.WeakSet()
        directory.add_departure_listener(self._bookie_left)

    def _bookie_left(self, bookie_id: str) -> None:
        # An idle writer would keep a gone bookie in its open ensemble until its
        # next add; replaced now, the entries before become a closed fragment
        # that auto-recovery re-replicates (docs/cluster.md, "Auto-recovery").
        for handle in list(self._writers):
            handle.replace_departed(bookie_id)

    @property
    def config(self) -> LedgerConfig:
        """The client's configuration."""
        return self._config

    @property
    def directory(self) -> BookieDirectory:
        """The bookies this client knows."""
        return self._directory

    @property
    def max_entry_bytes(self) -> int:
        """The largest entry a handle of this client accepts."""
        return self._config.max_entry_bytes

    def bookie(self, bookie_id: str) -> BookieClient:
        """The client of one bookie (the same object for the same id)."""
        return self._directory.bookie(bookie_id)

    async def create(
        self, *, ensemble_size: int | None = None, write_quorum: int | None = None,
        ack_quorum: int | None = None, properties: Mapping[str, str] | None = None,
    ) -> LedgerHandle:
        """Create a ledger on a fresh ensemble and return its writable handle.

        Quorums default to the client's configuration. Raises ``ValueError`` for
        quorums that break E >= Qw >= Qa >= 1 and ``NotEnoughBookiesError``
        when fewer than E bookies are available.
        """
        size = ensemble_size or self._config.ensemble_size
        write = write_quorum or self._config.write_quorum
        ack = ack_quorum or self._config.ack_quorum
        try:
            check_quorums(size, write, ack)
        except ValueError as error:
            raise InvalidArgumentError(str(error)) from None
        bookie_ids = self._directory.choose(size)
        if len(bookie_ids) < size:
            raise NotEnoughBookiesError(
                f"a ledger of ensemble size {size} needs {size} bookies, "
                f"{len(bookie_ids)} available"
            )
        ledger_id = await self._ids.allocate()
        metadata = LedgerMetadata(
            ledger_id=ledger_id, ensemble_size=size, write_quorum=write, ack_quorum=ack,
            state=LedgerState.OPEN, last_entry_id=-1, length=0,
            ensembles=((0, tuple(bookie_ids)),), created_ms=int(time.time() * 1000),
            properties=dict(properties or {}),
        )
        data = metadata.to_bytes()
        try:
            await self._store.create(ledger_path(ledger_id), data, make_parents=True)
        except MetadataUnavailableError:
            # Maybe created: read back (the same session answers in order, so
            # the read sees the create if it was ever applied). Ours: go on.
            # Not there, or unreadable: fail; at worst an empty orphan ledger
            # is left, which no record names.
            if not await self._holds(ledger_id, data):
                raise
            log.info("ledger %d: create answer lost, but it was applied", ledger_id)
        log.debug("created ledger %d on %s", ledger_id, bookie_ids)
        handle = LedgerHandle(self, metadata, 0, writable=True)
        metrics.watch_writer(handle)
        self._writers.add(handle)
        return handle

    async def open(self, ledger_id: int, *, recovery: bool = True) -> LedgerHandle:
        """Open a ledger for reading.

        With ``recovery`` (the default) an open ledger is fenced, its end agreed
        and the ledger closed: the handle reads up to the closed end, and the old
        writer's next add fails with ``LedgerFencedError``. Without it the
        ledger is left alone and the handle reads up to the LAC the bookies
        report (``read_last_add_confirmed`` refreshes it).
        """
        if recovery:
            metadata, version = await recover(self, ledger_id)
            return LedgerHandle(self, metadata, version, writable=False,
                                last_add_confirmed=metadata.last_entry_id)
        metadata, version = await self.read_metadata(ledger_id)
        handle = LedgerHandle(self, metadata, version, writable=False,
                              last_add_confirmed=metadata.last_entry_id)
        if metadata.state is not LedgerState.CLOSED:
            await handle.read_last_add_confirmed()
        return handle

    async def peek_last_entry(self, ledger_id: int) -> bytes | None:
        """The last entry a writer handed to any bookie, without fencing; None if none.

        Closed: its last entry. Open: the entry with the greatest id any bookie
        of the last ensemble reports (bookies that cannot be reached are
        skipped), possibly ahead of the writer's LAC. Raises
        ``NoSuchLedgerError`` or ``BookieUnavailableError``.
        """
        metadata, _ = await self.read_metadata(ledger_id)
        if metadata.state is LedgerState.CLOSED:
            if metadata.last_entry_id < 0:
                return None
            handle = await self.open(ledger_id, recovery=False)
            return (await handle.read(metadata.last_entry_id, metadata.last_entry_id))[0]
        bookie_ids = metadata.ensembles[-1][1]
        tails = await asyncio.gather(
            *(self.bookie(b).read_last_add_confirmed(ledger_id) for b in bookie_ids),
            return_exceptions=True)
        entry_id, bookie_id = max(
            ((tail.last_entry_id, b) for tail, b in zip(tails, bookie_ids, strict=True)
             if isinstance(tail, LedgerTail)), default=(-1, ""))
        if entry_id < 0:
            return None
        result = await self.bookie(bookie_id).read_entries(ledger_id, entry_id, entry_id)
        return result.datas[0] if result.datas else None

    async def delete(self, ledger_id: int) -> None:
        """Delete a ledger's entries from every bookie that held any, then its metadata.

        Idempotent. A bookie that cannot be reached keeps its copy (logged);
        the metadata goes, so the ledger no longer exists for readers.
        """
        try:
            metadata, version = await self.read_metadata(ledger_id)
        except NoSuchLedgerError:
            return
        bookie_ids = {bookie_id for _, ids in metadata.ensembles for bookie_id in ids}
        results = await asyncio.gather(
            *(self.bookie(bookie_id).delete_ledger(ledger_id) for bookie_id in bookie_ids),
            return_exceptions=True,
        )
        for bookie_id, result in zip(bookie_ids, results, strict=True):
            if isinstance(result, LedgerError):
                log.warning("ledger %d left on bookie %s: %s", ledger_id, bookie_id, result)
            elif isinstance(result, BaseException):
                raise result
        with contextlib.suppress(NoNodeError):
            await self._store.delete(ledger_path(ledger_id), version)

    async def read_metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """The ledger's metadata and its version. ``NoSuchLedgerError`` if it does not exist."""
        if ledger_id < 0:
            raise InvalidArgumentError(f"ledger_id must be >= 0, got {ledger_id}")
        try:
            node = await self._store.get(ledger_path(ledger_id))
        except NoNodeError:
            raise NoSuchLedgerError(f"no ledger {ledger_id}", ledger_id=ledger_id) from None
        return LedgerMetadata.from_bytes(node.data), node.version

    async def write_metadata(self, metadata: LedgerMetadata, expected_version: int) -> int:
        """Compare-and-set the ledger's metadata; returns the new version (``BadVersionError``).

        After a lost answer (``MetadataUnavailableError``) the metadata is read
        back: our bytes, the write was applied (its version is returned); the
        version written on, it was not (the error is raised); another version,
        someone else wrote (``BadVersionError``, as if refused: callers already
        read and reconcile then). An unreadable node raises the first error.
        """
        path = ledger_path(metadata.ledger_id)
        data = metadata.to_bytes()
        try:
            return await self._store.set(path, data, expected_version)
        except MetadataUnavailableError as error:
            try:
                node = await self._store.get(path)
            except NoNodeError:
                raise NoSuchLedgerError(f"no ledger {metadata.ledger_id}",
                                        ledger_id=metadata.ledger_id) from None
            except LedgerError:
                raise error from None
            if node.data == data and node.version > expected_version:
                log.info("ledger %d: metadata write answer lost, but it was applied",
                         metadata.ledger_id)
                return node.version
            if node.version == expected_version:
                raise
            raise BadVersionError(path, expected_version, node.version) from None

    async def _holds(self, ledger_id: int, data: bytes) -> bool:
        """Whether the ledger's node exists with ``data`` (False if it cannot be read)."""
        try:
            node = await self._store.get(ledger_path(ledger_id))
        except LedgerError:
            return False
        return node.data == data

    async def close(self) -> None:
        """Close the bookie clients (not the bookies or the metadata store)."""
        await self._directory.close()
