"""A wrong endpoint fails within the connect timeout, saying why (issue 24, "fail fast").

Real servers on loopback: a free port nobody listens on, a real ``folio
standalone`` (its metrics port is an HTTP server, its ``--kafka-port`` a Kafka
listener) with and without TLS. Every client has a call deadline far beyond
the test's own timeout (``timeout_s=600``): before the connect timeout
existed, each of these waited out the call deadline (30 s by default), so
the test would time out instead of seeing the typed error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone
from tests.support.zookeeper import free_port

#: Far beyond the per-test timeout: only the connect timeout can end these calls.
_CALL_DEADLINE_S = 600.0


@pytest.fixture(scope="module")
def processes() -> Iterator[BookieProcesses]:
    made = BookieProcesses()
    yield made
    made.kill_all()


@pytest.fixture(scope="module")
def plain(processes: BookieProcesses, tmp_path_factory: pytest.TempPathFactory
          ) -> BookieProcess:
    """A plain-text standalone with a Kafka listener."""
    return start_standalone(processes, tmp_path_factory.mktemp("plain") / "data",
                            "--kafka-port", "0")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls(processes: BookieProcesses, tmp_path_factory: pytest.TempPathFactory,
        pki: Pki) -> BookieProcess:
    """A standalone serving TLS with a certificate for 127.0.0.1 and localhost."""
    files = pki.server()
    return start_standalone(processes, tmp_path_factory.mktemp("tls") / "data",
                            "--tls-cert", str(files.cert), "--tls-key", str(files.key))


def _free_port() -> int:
    """A port nothing listens on (scripts/free_ports.py: not one a port-0 server may take)."""
    return free_port()


def _list_topics(endpoint: str, tls: folio.TLS | None = None) -> folio.FolioError:
    with folio.Client(endpoint, timeout_s=_CALL_DEADLINE_S, connect_timeout_s=3.0,
                      tls=tls) as client, \
            pytest.raises(folio.FolioError) as raised:
        client.list_topics()
    return raised.value


def test_nothing_listening() -> None:
    port = _free_port()
    error = _list_topics(f"127.0.0.1:{port}")
    assert type(error) is folio.FolioUnavailableError
    assert error.context["reason"] == "refused"
    assert f"nothing is listening at 127.0.0.1:{port}" in str(error)


def test_an_http_server_is_not_a_broker(plain: BookieProcess) -> None:
    url = plain.ready_line.split("metrics on ", 1)[1].rstrip(")")
    endpoint = url.removeprefix("http://").split("/", 1)[0]
    error = _list_topics(endpoint)
    assert isinstance(error, folio.WrongEndpointError)
    assert error.found == "http"
    assert "an HTTP server listens at" in str(error)


def test_a_kafka_listener_is_not_a_broker(plain: BookieProcess) -> None:
    host, port = kafka_address(plain)
    error = _list_topics(f"{host}:{port}")
    assert isinstance(error, folio.WrongEndpointError)
    assert error.found == "kafka"
    assert "a Kafka listener answers at" in str(error)


def test_plain_text_against_tls(tls: BookieProcess) -> None:
    error = _list_topics(tls.address)
    assert isinstance(error, folio.TlsError)
    assert error.context["reason"] == "plain_text"
    assert "the broker speaks TLS and the client plain text" in str(error)


def test_tls_against_plain_text(plain: BookieProcess, pki: Pki) -> None:
    error = _list_topics(plain.address, tls=folio.TLS(ca=str(pki.ca)))
    assert isinstance(error, folio.TlsError)
    assert error.context["reason"] == "plain_text"
    assert "the server does not speak TLS" in str(error)


def test_wrong_ca(tls: BookieProcess, tmp_path: Path) -> None:
    other = Pki(tmp_path / "other", "other")
    error = _list_topics(tls.address, tls=folio.TLS(ca=str(other.ca)))
    assert isinstance(error, folio.TlsError)
    assert error.context["reason"] == "ca"
    assert "does not chain to the CA" in str(error)


def test_host_name_mismatch(tls: BookieProcess, pki: Pki) -> None:
    error = _list_topics(tls.address,
                         tls=folio.TLS(ca=str(pki.ca), server_name="other.folio.test"))
    assert isinstance(error, folio.TlsError)
    assert error.context["reason"] == "host_name"
    assert "does not name 'other.folio.test'" in str(error)


def test_the_right_settings_still_connect(tls: BookieProcess, pki: Pki) -> None:
    with folio.Client(tls.address, tls=folio.TLS(ca=str(pki.ca)), timeout_s=30) as client:
        assert isinstance(client.list_topics(), list)


def _folio(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "FOLIO_CLIENT_TIMEOUT_S": str(_CALL_DEADLINE_S), **(env or {})}
    environment.pop("GRPC_VERBOSITY", None)
    return subprocess.run([sys.executable, "-m", "folio.cli", *argv], capture_output=True,
                          text=True, env=environment, timeout=90, check=False)


def test_cli_says_why_in_one_line(tls: BookieProcess, tmp_path: Path) -> None:
    port = _free_port()
    result = _folio("--endpoint", f"127.0.0.1:{port}", "topic", "list")
    assert result.returncode == 1
    assert f"nothing is listening at 127.0.0.1:{port}" in result.stderr
    assert "make run" in result.stderr

    other = Pki(tmp_path / "other", "other")
    result = _folio("--endpoint", tls.address, "--tls-ca", str(other.ca), "topic", "list")
    assert result.returncode == 1
    # gRPC core's own "Handshake failed" lines are quiet: one line says it all.
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "does not chain to the CA" in result.stderr

    result = _folio("--verbose", "--endpoint", tls.address, "--tls-ca", str(other.ca),
                    "topic", "list")
    assert result.returncode == 1
    assert "andshake" in result.stderr  # gRPC core's log, asked for


def test_a_list_moves_past_a_refusing_endpoint_at_once(plain: BookieProcess) -> None:
    # With a connect timeout beyond the test's own, only moving on at once passes.
    dead = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    with folio.Client(",".join(dead), timeout_s=_CALL_DEADLINE_S,
                      connect_timeout_s=_CALL_DEADLINE_S) as client, \
            pytest.raises(folio.NoBrokerAvailableError) as raised:
        client.list_topics()
    assert all(f"{endpoint}: nothing is listening at {endpoint}" in str(raised.value)
               for endpoint in dead)
    with folio.Client(",".join([*dead, plain.address]), timeout_s=_CALL_DEADLINE_S,
                      connect_timeout_s=_CALL_DEADLINE_S) as client:
        assert isinstance(client.list_topics(), list)
