"""A real ZooKeeper for tests: one server per session, a fresh chroot per test.

A pytest plugin (``tests/conftest.py`` lists it in ``pytest_plugins``) with
these fixtures:

- ``zookeeper`` (session): a ``ZooKeeperServer`` (``scripts/zookeeper_server.py``)
  on a free loopback port, started on first use, stopped at the session's end.
  Tests must not stop or restart it: use ``make_zookeeper`` for that.
- ``zk_url`` (function): ``zk://127.0.0.1:PORT/t-<random>`` on the session
  server; the chroot node exists (empty), so every test starts on an empty tree
  and tests never see each other's nodes.
- ``make_zookeeper`` (function): starts dedicated servers in ``tmp_path``, for
  tests that restart or kill ZooKeeper (``server.restart()`` keeps the port and
  the data); each is stopped at teardown.

``zk_client(address)`` is a plain kazoo client with a deadline on connecting,
for tests that look at ZooKeeper directly. The session timeout a test asks for
must lie within the server's bounds (2 ticks = 1 s to 60 s here).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(_ROOT / "scripts"))

from zookeeper_server import ZooKeeperServer, four_letter_word, free_port  # noqa: E402

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ZooKeeperServer",
    "four_letter_word",
    "free_port",
    "make_chroot",
    "make_zookeeper",
    "zk_client",
    "zk_url",
    "zookeeper",
]

#: Deadline for a kazoo client to connect.
CONNECT_TIMEOUT_S = 30.0


def zk_client(address: str, *, timeout_s: float = 10.0) -> KazooClient:
    """A started kazoo client of ``address`` (``host:port[/chroot]``); the caller stops it."""
    client = KazooClient(hosts=address, timeout=timeout_s)
    client.start(timeout=CONNECT_TIMEOUT_S)
    return client


def make_chroot(server: ZooKeeperServer) -> str:
    """Create an empty, uniquely named chroot on ``server``; return its ``zk://`` URL."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    client = zk_client(server.address)
    try:
        client.create(chroot)
    finally:
        client.stop()
        client.close()
    return server.url(chroot)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """The session's ZooKeeper server (never restart it in a test: ``make_zookeeper``)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_url(zookeeper: ZooKeeperServer) -> str:
    """``zk://host:port/<fresh chroot>`` on the session server; the chroot exists and is empty."""
    if not zookeeper.running():
        # A test broke the rule above; bring the server back rather than fail the rest.
        zookeeper.start()
    return make_chroot(zookeeper)


@pytest.fixture
def make_zookeeper(tmp_path: Path) -> Iterator[Callable[[], ZooKeeperServer]]:
    """Start dedicated ZooKeeper servers (``make_zookeeper()``); all stopped at teardown."""
    started: list[ZooKeeperServer] = []

    def make() -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path / f"zookeeper-{len(started)}")
        started.append(server)
        server.start()
        return server

    yield make
    for server in started:
        server.stop()
