"""Folio through its SDK for ``bench.peers``: ``folio perf``'s own load and read loops.

The writer is ``folio perf produce``'s loop (``folio.cli._perf_produce.run_produce``:
an ``EventWriter`` with the SDK's defaults, publish latency per group of 16
events) and the reader ``folio perf consume``'s (``run_consume``), each run
as a ``bench._peer_common.Job`` in its own process, as the peers' are. The
server is ``folio standalone`` with sync durability (an append is
acknowledged once fsynced), started by ``bench._standalone``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import folio
from bench._peer_budget import client_stages
from bench._peer_common import ProduceResult, ReadLoad, ReadResult, WriteLoad
from folio.cli._perf_consume import ConsumeConfig, run_consume
from folio.cli._perf_produce import ProduceConfig, run_produce

__all__ = ["FolioProduceResult", "create_topic", "produce", "read"]


@dataclasses.dataclass(frozen=True)
class FolioProduceResult(ProduceResult):
    """A Folio writer's result with its SDK's latency-budget histograms (``bench._peer_budget``)."""

    stages: dict[str, Any] = dataclasses.field(default_factory=dict)


def create_topic(endpoint: str, topic: str) -> None:
    """Create ``topic`` with one segment (one stream, as the peers get)."""
    with folio.Client(endpoint) as client:
        client.create_topic(topic, 1)


def produce(load: WriteLoad, ready: Callable[[], None]) -> ProduceResult:
    """One Folio writer (a ``bench._peer_common.Job`` function)."""
    config = ProduceConfig(endpoint=load.endpoint, topic=load.stream,
                           event_bytes=load.event_bytes, rate=load.rate,
                           duration_s=load.duration_s)
    with folio.Client(load.endpoint) as client:
        result = run_produce(client, config, ready=ready)
    # This process ran this one writer: its registry holds exactly its blocks.
    return FolioProduceResult(**dataclasses.asdict(result), stages=client_stages())


def read(load: ReadLoad, ready: Callable[[], None]) -> ReadResult:
    """One Folio reader (a ``bench._peer_common.Job`` function).

    A catch-up reader is ready at once; a "latest" one once its read loop
    has run a second (its first tick), so it reads whatever comes next.
    """
    config = ConsumeConfig(topic=load.stream,
                           start="earliest" if load.start == "earliest" else "latest",
                           max_events=load.max_events, idle_timeout_s=load.idle_s)
    waiting = load.start != "earliest"
    if not waiting:
        ready()

    def tick(elapsed_s: float, events: int) -> bool:
        nonlocal waiting
        if waiting:
            waiting = False
            ready()
        return False

    with folio.Client(load.endpoint) as client:
        result = run_consume(client, config, tick)
    return ReadResult(result.events, result.payload_bytes, result.duration_s,
                      result.histogram.encode())
