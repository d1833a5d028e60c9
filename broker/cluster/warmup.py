"""``SegmentWarmup``: a claimed container's open segments are loaded at once, not on first use.

A segment is loaded lazily, on the first call that needs it (``TopicManager``).
After a failover that call is the writers' SetupAppend, which comes only once
they have learnt the new owner (a lookup after their backoff), and the load
(fencing the old ledger, scanning it, starting a new one) then adds its own
time to their stall. So, as Pulsar loads a bundle's topics when the broker
acquires it, the broker that claims containers starts loading their open
segments right away: the load overlaps the clients' search, and a writer that
arrives finds the segment loaded or loading (it waits for that same load:
loads are one at a time per segment).

Nothing here changes what a load does: it is the load the first call would
have made, by the broker that owns the container now. Each load checks that
the container is still served first, so a container released or dropped
(``released``) loads nothing more. A load that fails is logged and left to the next call
(which loads again, as without warm-up). Claims of one ownership step come
together: one listing of the topics serves them all, and at most
``concurrency`` segments load at a time.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Protocol

from broker.cluster.containers import container_of
from broker.errors import BrokerError
from ledger.errors import LedgerError

__all__ = ["SegmentWarmup", "WarmTopics"]

log = logging.getLogger(__name__)

#: Segments loaded at a time by one broker's warm-up.
DEFAULT_CONCURRENCY = 4


class WarmTopics(Protocol):
    """What the warm-up needs of the topic manager."""

    async def open_segment_names(self) -> list[str]:
        """Every open segment of the user topics."""
        ...

    async def writable_segment(self, name: str, action: str) -> object:
        """The segment, loaded on first use (its transaction buffer may still recover)."""
        ...


class SegmentWarmup:
    """Loads the open segments of claimed containers (see the module docstring).

    Args:
        topics: the broker's topic manager.
        container_count: the cluster's number of containers.
        serves: whether this broker serves a container now.
        concurrency: segments loaded at a time.
    """

    def __init__(self, topics: WarmTopics, container_count: int,
                 serves: Callable[[int], bool],
                 concurrency: int = DEFAULT_CONCURRENCY) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self._topics = topics
        self._count = container_count
        self._serves = serves
        self._limit = asyncio.Semaphore(concurrency)
        self._pending: set[int] = set()
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._lister: asyncio.Task[None] | None = None
        #: Segments loaded so far by the warm-up (for tests and logs).
        self.loaded = 0

    async def claimed(self, container: int) -> None:
        """A container was claimed (a ``ClusterOwnership`` container listener)."""
        self._pending.add(container)
        if self._lister is None or self._lister.done():
            self._lister = asyncio.get_running_loop().create_task(
                self._list(), name="segment warm-up")

    def released(self, containers: frozenset[int]) -> None:
        """Containers given up or dropped: no more of their segments load.

        A load under way finishes (cancelling one midway would leave its
        outcome to sort out); the release waits for it and unloads it.
        """
        self._pending.difference_update(containers)

    async def close(self) -> None:
        """End every warm-up task (the broker stops)."""
        tasks = [task for task in (self._lister, *self._tasks.values()) if task is not None]
        self._pending.clear()
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        # Their ends (cancelled, or a load's failure, logged by the task) are
        # collected; a cancellation of this close itself still propagates.
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _list(self) -> None:
        await asyncio.sleep(0)  # the other claims of the same step join this listing
        while self._pending:
            containers, self._pending = self._pending, set()
            try:
                names = await self._topics.open_segment_names()
            except (BrokerError, LedgerError) as error:  # the clients' calls load them
                log.info("segment warm-up of containers %s: topics not listed: %s",
                         sorted(containers), error)
                continue
            by_container: dict[int, list[str]] = {}
            for name in names:
                container = container_of(name, self._count)
                if container in containers:
                    by_container.setdefault(container, []).append(name)
            for container, segments in by_container.items():
                if self._serves(container) and container not in self._tasks:
                    task = asyncio.get_running_loop().create_task(
                        self._load(container, segments), name=f"warm-up of {container}")
                    self._tasks[container] = task
                    task.add_done_callback(functools.partial(self._forget, container))

    def _forget(self, container: int, task: asyncio.Task[None]) -> None:
        if self._tasks.get(container) is task:
            del self._tasks[container]

    async def _load(self, container: int, segments: list[str]) -> None:
        async def one(name: str) -> None:
            async with self._limit:
                if not self._serves(container):
                    return
                try:
                    await self._topics.writable_segment(name, "warm-up")
                except (BrokerError, LedgerError) as error:  # the next call loads it again
                    log.info("segment warm-up: %s not loaded: %s", name, error)
                    return
                self.loaded += 1

        await asyncio.gather(*(one(name) for name in segments))
        log.info("segment warm-up: container %d, %d open segments tried", container,
                 len(segments))
