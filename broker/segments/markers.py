"""Commit and abort markers: entries of no events that settle a transaction's fate."""

from __future__ import annotations

import asyncio
import contextlib

from broker.api import AppendResult
from broker.errors import InvalidArgumentError
from broker.segments.appends import SegmentAppends
from broker.segments.entry import EntryKind
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["SegmentMarkers"]


class SegmentMarkers(SegmentAppends):
    """Writing transaction markers, sealed or not (a part of ``LedgerSegment``)."""

    async def write_marker(self, kind: EntryKind, txn_id: TxnId) -> int:
        """Write a commit or abort marker of ``txn_id`` (an entry of no events), once durable.

        Returns the segment's offset at the marker (markers take no offset).

        Raises:
            InvalidArgumentError: ``kind`` is not a marker, or a
                segment without a transaction buffer (a system topic's).
            WrongHostError, LedgerError: as ``append``. A sealed segment takes
                markers (``_write_marker_after_seal``).
        """
        if kind not in (EntryKind.COMMIT_MARKER, EntryKind.ABORT_MARKER):
            raise InvalidArgumentError(f"{kind.name} is not a marker kind")
        self._life.check_readable()
        self._check_txn()
        if self._life.sealed:
            return await self._write_marker_after_seal(kind, txn_id)
        self._life.check_appendable(self.end_offset)
        result = await self._append_entry((), "", -1, 0, kind, txn_id)
        return result.offset

    async def _write_marker_after_seal(self, kind: EntryKind, txn_id: TxnId) -> int:
        """A marker for a sealed segment, in a ledger started for it and closed again.

        A seal stops data, not the fate of transactions written before it:
        their commit or abort must still be recorded here (read_committed
        readers wait for it at ``max_read_position``, and only then reach
        the end of the segment). The segment's end offset does not move.
        """
        if self._life.failure is not None:
            raise self._life.failure_error()
        async with self._chain.lock:
            self._life.check_readable()
            await self._start_ledger(replacing=[])
            span = self._chain.spans[-1]
            try:
                submitted = self._pipeline.submit(span, (), "", -1, 0, kind, txn_id)
                if not isinstance(submitted, AppendResult):
                    await asyncio.shield(submitted[1])
            finally:
                span.writing = False
                if span.handle is not None:
                    with contextlib.suppress(LedgerError):
                        await span.handle.close()
                    span.length_bytes = span.handle.length
                await self._chain.write_record(self._record_of(self._chain.spans, snapshot=True))
        self._wake()
        return self.end_offset
