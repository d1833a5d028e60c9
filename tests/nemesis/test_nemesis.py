"""A short nemesis run in ``make test``; ``make chaos`` runs long ones (docs/cluster.md).

Real ZooKeeper, 3 bookies and 3 brokers, each link through a proxy that can
reset, blackhole or lose an answer; exactly-once writers, a transactional
writer and a two-member reader group; 40 s of faults from a fixed seed
(``FOLIO_NEMESIS_SEED`` picks another). Every promise is checked
(``tests/nemesis/checks.py``); the failures dict names what broke.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from tests.nemesis.lossy_proxy import LossyProxy
from tests.nemesis.run import run, summary

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]


def test_a_short_nemesis_run_loses_and_doubles_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("FOLIO_NEMESIS_SEED", "7"))
    report = run(seed, 40.0, tmp_path / "nemesis")
    result = summary(report)
    assert report.acknowledged > 0
    assert result["failures"] == {}, (seed, result, report.errors[:10])


def test_the_lossy_proxy_delivers_the_request_and_loses_the_answer() -> None:
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for _ in range(2):
            connection, _ = server.accept()
            with connection:
                data = connection.recv(1024)
                received.append(data)
                connection.sendall(b"answer to " + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with LossyProxy("127.0.0.1", server.getsockname()[1]) as proxy:
        proxy.lose_next_answer(10)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as first:
            first.sendall(b"write something")
            with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
                if not first.recv(1024):
                    raise ConnectionResetError("closed")
        assert proxy.lost_answers == 1
        # Fired once: the next request gets its answer.
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as second:
            second.sendall(b"write again")
            assert second.recv(1024) == b"answer to write again"
    thread.join(30)
    server.close()
    assert received == [b"write something", b"write again"]
