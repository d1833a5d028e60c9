"""The parts of one segment wired as ``LedgerSegment`` wires them, without a ``LedgerSegment``.

Each part's tests call that part's own methods on real collaborators: the
ledger stack of ``BrokerEnv`` (an in-process bookie, the RocksDB metadata
store) and, with transactions, the broker's snapshot store (a system topic).
"""

from __future__ import annotations

from broker.api import TopicConfig
from broker.segments.appends import SegmentAppends
from broker.segments.chain import LedgerChain
from broker.segments.head import SegmentHead
from broker.segments.life import SegmentLife
from broker.segments.lifecycle import SegmentLifecycle
from broker.segments.markers import SegmentMarkers
from broker.segments.names import segment_path
from broker.segments.pipeline import AppendPipeline
from broker.segments.reading import SegmentReads
from broker.segments.recorder import SegmentRecorder
from broker.segments.records import SegmentRecord, WriterState
from broker.segments.recovery import RecoveredChain
from broker.segments.rollover import SegmentRollover
from broker.segments.txns import SegmentTxns
from broker.segments.wakeup import ReadWakeup
from broker.segments.writers import WriterTable
from broker.system.snapshot_store import snapshot_store
from tests.unit.broker.conftest import MAX_ENTRY_BYTES, BrokerEnv
from txnbuffer.api import SnapshotStore

NAME = "t/0"
PATH = segment_path("t", 0)


class SegmentParts:
    """Segment ``t/0``'s parts on ``env``; ``config`` may be replaced (the rollover reads it)."""

    def __init__(self, env: BrokerEnv, version: int, config: TopicConfig,
                 txn_store: SnapshotStore | None, writers: dict[str, WriterState]) -> None:
        self.env = env
        self.config = config
        self.wakes = 0
        self.wakeup = ReadWakeup()
        self.life = SegmentLife(NAME, sealed=False)
        self.txns = SegmentTxns(NAME, txn_store, None, self.life, self.wake)
        recovered = RecoveredChain(SegmentRecord("t", 0), version, [], 0, writers=writers)
        self.chain = LedgerChain(env.ledgers, env.store, "t", 0, recovered, self.life,
                                 self.wake, self.now_ms)
        self.pipeline = AppendPipeline(
            NAME, 0, WriterTable(writers, 60_000), MAX_ENTRY_BYTES, self.life, self.wake,
            self.now_ms, None if self.txns.buffer is None else self.txns.note_durable)
        self.recorder = SegmentRecorder(self.chain, self.pipeline, self.life, self.now_ms)
        self.rollover = SegmentRollover(NAME, self.chain, self.pipeline, self.life,
                                        self.recorder, lambda: self.config, self.now_ms)
        self.appends = SegmentAppends(NAME, "t", self.life, self.chain, self.pipeline,
                                      self.rollover, self.txns)
        self.markers = SegmentMarkers(self.life, self.txns, self.appends, self.chain,
                                      self.pipeline, self.recorder, self.wake)
        self.reads = SegmentReads(NAME, env.ledgers, self.life, self.chain, self.pipeline,
                                  self.txns, self.wakeup)
        self.head = SegmentHead(NAME, self.life, self.chain, self.pipeline, self.rollover,
                                self.recorder, self.txns, self.reads)
        self.lifecycle = SegmentLifecycle(NAME, self.life, self.chain, self.pipeline,
                                          self.recorder, self.txns, self.wake)

    def now_ms(self) -> int:
        return int(self.env.clock() * 1000)

    def wake(self) -> None:
        self.wakes += 1
        self.wakeup.wake()

    async def recorded(self) -> SegmentRecord:
        """The segment record as stored."""
        return SegmentRecord.from_bytes((await self.env.store.get(PATH)).data)


async def wired(env: BrokerEnv, config: TopicConfig | None = None, *, txns: bool = False,
                writers: dict[str, WriterState] | None = None,
                start: bool = True) -> SegmentParts:
    """A fresh record for ``t/0`` and its parts; ``start``: with an open ledger, as loaded.

    ``txns``: with a transaction buffer on the broker's snapshot store,
    recovered (an empty chain has nothing to replay).
    """
    await env.store.create(PATH, SegmentRecord("t", 0).to_bytes(), make_parents=True)
    version = (await env.store.get(PATH)).version
    store = snapshot_store(env.manager()) if txns else None
    parts = SegmentParts(env, version, config or TopicConfig(), store, dict(writers or {}))
    if start:
        await parts.recorder.start_ledger([])
    if txns:
        parts.txns.start_recovery(parts.chain, parts.reads.reader)
        await parts.txns.recovered()
    return parts
