"""Where a transaction's markers go: this broker's own segments, or their owners in a cluster.

Kafka's ``TransactionMarkerChannelManager`` in small: the finisher decides
which marker (COMMIT or ABORT) and when; this part only writes it in every
segment the transaction touched, in parallel. Standalone, the segment is
this broker's (``TopicManager.segment``); in a cluster a ``MarkerWriter``
(``broker.cluster.txn_routes``) sends it to the segment's owner, set at
construction or later by ``route``. A marker written twice changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from broker.segments.entry import EntryKind
from broker.topics.manager import TopicManager
from broker.txn.states import Txn
from txnbuffer.api import TxnId

__all__ = ["MarkerWriter", "TxnMarkers"]

#: Writes one marker (segment name, txn id, kind) wherever the segment is served,
#: returning once it is durable (a cluster: ``broker.cluster.txn_routes``).
MarkerWriter = Callable[[str, TxnId, EntryKind], Awaitable[None]]


class TxnMarkers:
    """Writes markers in this broker's segments (``topics``), or through ``writer``."""

    def __init__(self, topics: TopicManager, writer: MarkerWriter | None = None) -> None:
        self._topics = topics
        #: None: markers go to this broker's own segments (standalone).
        self._writer = writer

    def route(self, writer: MarkerWriter) -> None:
        """Write markers through ``writer`` from now on (a cluster: the segments' owners)."""
        self._writer = writer

    @property
    def routed(self) -> bool:
        """Markers go to other brokers (which may not be reachable yet), not to ``topics``."""
        return self._writer is not None

    async def write(self, txn: Txn, kind: EntryKind) -> None:
        """The marker in every segment ``txn`` touched, written in parallel; durable on return.

        Raises what a marker write raised (its outcome unknown: written again,
        which is harmless).
        """

        async def mark(name: str) -> None:
            if self._writer is not None:  # a cluster: the segment's owner writes it
                await self._writer(name, txn.txn_id, kind)
                return
            segment = await self._topics.segment(name)
            await segment.write_marker(kind, txn.txn_id)

        await asyncio.gather(*(mark(name) for name in txn.segments))
