"""Commit and abort markers: entries of no events that settle a transaction's fate.

``SegmentMarkers`` is the part of a ``LedgerSegment`` that writes them: on an
open segment as an append of no events (in call order with the appends), on a
sealed one in a ledger started for the marker and closed again. It owns no
state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from broker.api import AppendResult
from broker.errors import InvalidArgumentError
from broker.segments.appends import SegmentAppends
from broker.segments.chain import LedgerChain
from broker.segments.entry import EntryKind
from broker.segments.life import SegmentLife
from broker.segments.pipeline import AppendPipeline
from broker.segments.recorder import SegmentRecorder
from broker.segments.txns import SegmentTxns
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["SegmentMarkers"]


class SegmentMarkers:
    """Writing transaction markers, sealed or not (a part of ``LedgerSegment``).

    Args:
        life: refuses markers to a segment gone or failed.
        txns: whether the segment takes transactions.
        appends: writes a marker to an open segment, in order with the appends.
        chain: the ledgers (a marker after the seal holds its lock).
        pipeline: submits the marker after the seal; the end offset.
        recorder: starts the marker's ledger and records it closed.
        wake: wakes the segment's readers (the marker is durable).
    """

    def __init__(self, life: SegmentLife, txns: SegmentTxns, appends: SegmentAppends,
                 chain: LedgerChain, pipeline: AppendPipeline, recorder: SegmentRecorder,
                 wake: Callable[[], None]) -> None:
        self._life = life
        self._txns = txns
        self._appends = appends
        self._chain = chain
        self._pipeline = pipeline
        self._recorder = recorder
        self._wake = wake

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
        self._txns.check()
        if self._life.sealed:
            return await self._write_marker_after_seal(kind, txn_id)
        self._life.check_appendable(self._pipeline.end_offset)
        result = await self._appends.append_entry((), "", -1, 0, kind, txn_id)
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
            await self._recorder.start_ledger(replacing=[])
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
                await self._recorder.write(snapshot=True)
        self._wake()
        return self._pipeline.end_offset
