"""The nemesis's cluster: ZooKeeper, 3 bookies and 3 brokers, each link through a proxy.

Every broker reaches ZooKeeper through a ``LossyProxy`` of its own (so one
broker's link can be reset, blackholed or lose an answer while the others'
stay up), and every bookie advertises a ``LossyProxy`` in front of it (so the
brokers' adds to it can be reset or lose their answers). Brokers and bookies
keep their ports across restarts, and ZooKeeper restarts on its port with
its data, so a restarted process is the same member of the cluster.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from tests.nemesis.lossy_proxy import LossyProxy
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.zookeeper import ZooKeeperServer, free_port, make_chroot

__all__ = ["Member", "NemesisCluster"]

#: Session timeout of brokers and bookies (as the independent fault run had).
SESSION_TIMEOUT_MS = 4_000
#: Deadline for a process's ready line: generous, the machine is loaded by the run itself.
START_TIMEOUT_S = 120.0


@dataclass
class Member:
    """A bookie or broker: its process (None while killed), its port and its proxy."""

    name: str
    port: int
    proxy: LossyProxy
    data_dir: Path
    process: BookieProcess | None = None
    stopped: bool = False  # SIGSTOPped
    kafka_port: int = 0  # brokers: the Kafka listener's port

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running()


@dataclass
class NemesisCluster:
    """Starts, breaks and heals the processes; ``endpoint`` is the brokers' list."""

    base: Path
    processes: BookieProcesses = field(default_factory=BookieProcesses)
    bookies: list[Member] = field(default_factory=list)
    brokers: list[Member] = field(default_factory=list)

    def start(self, *, bookies: int = 3, brokers: int = 3, containers: int = 12) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.zookeeper = ZooKeeperServer(self.base / "zookeeper")
        self.zookeeper.start()
        self.url = make_chroot(self.zookeeper)
        self.chroot = self.url.split("/", 3)[3]
        done = run_folio("cluster", "init", "--metadata-url", self.url,
                         "--container-count", str(containers), "--ensemble-size", "3",
                         "--write-quorum", "2", "--ack-quorum", "2")
        assert done.returncode == 0, done.stderr
        host, port = self.zookeeper.address.rsplit(":", 1)
        for index in range(bookies):
            bookie_port = free_port()
            self.bookies.append(Member(f"bookie-{index}", bookie_port,
                                       LossyProxy("127.0.0.1", bookie_port),
                                       self.base / f"bookie-{index}"))
            self.start_bookie(self.bookies[-1])
        for index in range(brokers):
            self.brokers.append(Member(f"broker-{index}", free_port(),
                                       LossyProxy(host, int(port)),
                                       self.base / f"broker-{index}", kafka_port=free_port()))
            self.start_broker(self.brokers[-1])

    @property
    def endpoint(self) -> str:
        return ",".join(f"127.0.0.1:{broker.port}" for broker in self.brokers)

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{broker.kafka_port}" for broker in self.brokers)

    def start_bookie(self, bookie: Member) -> None:
        bookie.process = self.processes.start(
            bookie.data_dir, "--metadata-url", self.url, "--durability", "async",
            "--advertised-address", bookie.proxy.address,
            "--metadata-session-timeout-ms", str(SESSION_TIMEOUT_MS), port=bookie.port,
            timeout_s=START_TIMEOUT_S)
        bookie.stopped = False

    def start_broker(self, broker: Member) -> None:
        url = f"zk://{broker.proxy.address}/{self.chroot}"
        broker.process = self.processes.start_folio(
            ["broker", "--metadata-url", url, "--port", str(broker.port), "--metrics-port",
             "0", "--metadata-session-timeout-ms", str(SESSION_TIMEOUT_MS),
             "--kafka-port", str(broker.kafka_port), "--kafka-advertised-host", "127.0.0.1"],
            broker.data_dir, timeout_s=START_TIMEOUT_S)
        broker.stopped = False

    def kill(self, member: Member) -> None:
        if member.process is not None:
            if member.stopped:
                member.process.process.send_signal(signal.SIGCONT)
            member.process.kill()
        member.process = None
        member.stopped = False

    def pause(self, member: Member) -> None:
        assert member.process is not None
        member.process.process.send_signal(signal.SIGSTOP)
        member.stopped = True

    def resume(self, member: Member) -> None:
        if member.process is not None and member.stopped:
            member.process.process.send_signal(signal.SIGCONT)
        member.stopped = False

    def heal(self) -> None:
        """Every proxy relaying, every process running and resumed, ZooKeeper up."""
        if not self.zookeeper.running():
            self.zookeeper.start()
        for member in [*self.bookies, *self.brokers]:
            member.proxy.resume()
            member.proxy.disarm()
            self.resume(member)
        for bookie in self.bookies:
            if not bookie.running:
                self.start_bookie(bookie)
        for broker in self.brokers:
            if not broker.running:
                self.start_broker(broker)

    def close(self) -> None:
        self.processes.kill_all()
        for member in [*self.bookies, *self.brokers]:
            member.proxy.close()
        self.zookeeper.stop()

    def logs(self) -> dict[str, str]:
        """Each process's log path, for a failure's report."""
        return {member.name: str(member.data_dir.with_name(member.data_dir.name + ".log"))
                for member in [*self.bookies, *self.brokers]}
