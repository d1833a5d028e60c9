"""The listener's settings on a real process: a taken port, a bad value, the environment."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import cast

from tests.support.bookies import BookieProcesses, folio_argv, folio_env
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone

RUN_TIMEOUT_S = 60.0


def test_a_taken_kafka_port_stops_the_start_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            folio_argv("standalone", "--data-dir", str(tmp_path / "data"), "--port", "0",
                       "--metrics-port", "0", "--kafka-port", str(port)),
            capture_output=True, env=folio_env(), timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 1
    assert f"cannot serve Kafka on 127.0.0.1:{port}" in done.stderr.decode()
    assert b"listening on" not in done.stdout


def test_a_bad_kafka_port_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        folio_argv("standalone", "--data-dir", str(tmp_path / "data"), "--kafka-port", "-7"),
        capture_output=True, env=folio_env(), timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 2
    assert "kafka_port" in done.stderr.decode()


def test_the_environment_and_advertised_address(tmp_path: Path) -> None:
    processes = BookieProcesses()
    try:
        server = start_standalone(processes, tmp_path / "data", env={
            "FOLIO_STANDALONE_KAFKA_PORT": "0",
            "FOLIO_STANDALONE_KAFKA_ADVERTISED_HOST": "127.0.0.2",
            "FOLIO_STANDALONE_KAFKA_ADVERTISED_PORT": "19092"})
        host, port = kafka_address(server)
        assert (host, port > 0) == ("127.0.0.1", True)
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415

        brokers = AdminClient({"bootstrap.servers": f"{host}:{port}"}).list_topics(
            timeout=RUN_TIMEOUT_S).brokers
        # cast: confluent-kafka types BrokerMetadata.host by its initial None.
        assert [(b.id, cast(str, b.host), b.port) for b in brokers.values()] == [
            (0, "127.0.0.2", 19092)]
    finally:
        processes.kill_all()
