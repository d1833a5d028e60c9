"""The nemesis's faults: one at a time, chosen and timed by a seeded random generator.

Each fault is applied, held for a while, then healed; the log says what was
done when (seconds since the start), so a failing seed can be replayed and
read. Bookie faults stay within the quorum (E=3, Qw=2, Qa=2): one bookie at
a time. Kinds:

- ``kill-broker`` / ``kill-bookie``: SIGKILL, restarted on heal (same port, same data);
- ``pause-broker``: SIGSTOP past the session timeout, then SIGCONT (a silent peer);
- ``restart-zookeeper``: ZooKeeper killed and started again on its port and data;
- ``reset-zk-link`` / ``blackhole-zk-link``: one broker's link to ZooKeeper reset
  (RST) or silent (nothing relayed, connections open) for a while;
- ``lose-zk-answer`` / ``lose-bookie-answer``: the next request on a broker's
  ZooKeeper link, or on a bookie's link, reaches the server and its answer is
  lost (the connection is reset after the server answered).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.nemesis.cluster import SESSION_TIMEOUT_MS, NemesisCluster

__all__ = ["KINDS", "Nemesis"]

KINDS = ("kill-broker", "pause-broker", "kill-bookie", "restart-zookeeper", "reset-zk-link",
         "blackhole-zk-link", "lose-zk-answer", "lose-bookie-answer")


@dataclass
class Nemesis:
    """Applies ``KINDS`` faults to ``cluster`` with the generator seeded by ``seed``."""

    cluster: NemesisCluster
    seed: int
    log: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._started = time.monotonic()

    def _note(self, text: str) -> None:
        line = f"{time.monotonic() - self._started:7.1f}s {text}"
        self.log.append(line)
        print(f"nemesis: {line}", flush=True)

    def run(self, duration_s: float, should_stop: Callable[[], bool]) -> None:
        """Faults one after another for ``duration_s``, each healed before the next."""
        deadline = time.monotonic() + duration_s
        while time.monotonic() < deadline and not should_stop():
            kind = self._random.choice(KINDS)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self._apply(kind)
            time.sleep(self._random.uniform(1.0, 3.0))  # quiet between faults

    def _apply(self, kind: str) -> None:
        cluster = self.cluster
        broker = self._random.choice(cluster.brokers)
        bookie = self._random.choice(cluster.bookies)
        hold_s = self._random.uniform(0.5, 2.0 * SESSION_TIMEOUT_MS / 1000)
        if kind == "kill-broker":
            self._note(f"SIGKILL {broker.name}")
            cluster.kill(broker)
            time.sleep(hold_s)
        elif kind == "pause-broker":
            hold_s = SESSION_TIMEOUT_MS / 1000 + self._random.uniform(0.5, 3.0)
            self._note(f"SIGSTOP {broker.name} for {hold_s:.1f}s")
            cluster.pause(broker)
            time.sleep(hold_s)
            cluster.resume(broker)
        elif kind == "kill-bookie":
            self._note(f"SIGKILL {bookie.name}")
            cluster.kill(bookie)
            time.sleep(hold_s)
        elif kind == "restart-zookeeper":
            self._note("ZooKeeper killed")
            cluster.zookeeper.kill()
            time.sleep(self._random.uniform(0.2, 2.5))
            cluster.zookeeper.start()
            self._note("ZooKeeper started")
        elif kind == "reset-zk-link":
            self._note(f"reset {broker.name}'s ZooKeeper link")
            broker.proxy.cut()
        elif kind == "blackhole-zk-link":
            self._note(f"blackhole {broker.name}'s ZooKeeper link for {hold_s:.1f}s")
            broker.proxy.pause()
            time.sleep(hold_s)
            broker.proxy.resume()
        elif kind == "lose-zk-answer":
            self._note(f"lose the next answer to {broker.name} from ZooKeeper")
            broker.proxy.lose_next_answer(20)
            time.sleep(hold_s)
            broker.proxy.disarm()
        elif kind == "lose-bookie-answer":
            self._note(f"lose the next answer from {bookie.name}")
            bookie.proxy.lose_next_answer(100)
            time.sleep(hold_s)
            bookie.proxy.disarm()
        self._note(f"heal after {kind}")
        cluster.heal()
