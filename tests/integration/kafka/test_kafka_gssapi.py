"""SASL GSSAPI (Kerberos V5) on the Kafka listener, against a real MIT KDC.

A KDC of the module's own (``tests.support.kdc``, realm FOLIO.TEST) holds
the broker's service principals ``kafka/localhost`` and ``other/localhost``
(both in the broker's keytab: the service-name check, not a missing key,
must refuse the second), ``nokey/localhost`` (in no keytab), and the users
``app`` (granted everything) and ``stranger`` (granted nothing). One
``folio standalone`` with token authentication (so the grants apply) serves
two listeners, SASL_PLAINTEXT and SASL_SSL, both GSSAPI only. Clients run in
subprocesses with the realm's environment (``tests.support.gssapi_client``):
kafka-python produces and reads back on both listeners; the exchange by hand
shows the session lifetime, re-authentication and the refusals (another
service's ticket, a key the broker lacks, an expired ticket, garbage).
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

import folio
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses, folio_argv, folio_env
from tests.support.certs import Pki
from tests.support.kafka import raw_request, read_frame, read_response
from tests.support.kdc import Kdc, running_kdc
from tests.support.standalone import start_standalone

CLIENT_TIMEOUT_S = 120.0
_SECRET = b"kafka-gssapi-test-secret-0123456789abcdef"
_LISTENER = re.compile(r"kafka on (?P<host>[^\s:]+):(?P<port>\d+) \((?P<name>\w+)\)")
_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Realm:
    """The module's KDC and each user's credential cache."""

    kdc: Kdc
    caches: dict[str, Path]


@dataclass(frozen=True)
class Broker:
    """The standalone and its two listeners' ``host:port``."""

    server: BookieProcess
    plain: str
    tls: str
    ca: Path

    def metric(self, reason: str) -> float:
        """``folio_kafka_auth_failures_total{reason}`` scraped from the server."""
        match = re.search(r"metrics on (https?://\S+/metrics)", self.server.ready_line)
        assert match is not None, self.server.ready_line
        context = ssl.create_default_context(cafile=str(self.ca))
        text = urllib.request.urlopen(match[1], timeout=10, context=context).read().decode()
        found = re.search(rf'folio_kafka_auth_failures_total{{reason="{reason}"}} (\S+)', text)
        return 0.0 if found is None else float(found[1])


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    root = tmp_path_factory.mktemp("kdc")
    for kdc in running_kdc(root):
        for name in ("kafka/localhost", "other/localhost", "nokey/localhost", "app",
                     "stranger"):
            kdc.add_principal(name)
        kdc.keytab(root / "broker.keytab", "kafka/localhost", "other/localhost")
        caches = {user: kdc.kinit(user, kdc.keytab(root / f"{user}.keytab", user),
                                  root / f"{user}.ccache") for user in ("app", "stranger")}
        yield Realm(kdc, caches)


@pytest.fixture(scope="module")
def broker(realm: Realm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("gssapi")
    secret = root / "secret"
    secret.write_bytes(_SECRET + b"\n")
    pki = Pki(root / "pki")
    cert = pki.server()
    processes = BookieProcesses()
    try:
        server = start_standalone(
            processes, root / "data", "--tls-cert", str(cert.cert), "--tls-key", str(cert.key),
            "--auth-token-secret-file", str(secret), "--super-users", "admin",
            "--kafka-listeners", "GSS://127.0.0.1:0,GSSTLS://127.0.0.1:0",
            "--kafka-listener-security-protocol-map", "GSS:SASL_PLAINTEXT,GSSTLS:SASL_SSL",
            "--kafka-allow-plaintext", "--kafka-sasl-mechanisms", "GSSAPI",
            "--kafka-sasl-kerberos-keytab", str(realm.kdc.root / "broker.keytab"),
            env=realm.kdc.env())
        found = {match["name"]: f"{match['host']}:{match['port']}"
                 for match in _LISTENER.finditer(server.ready_line)}
        with folio.Client(server.address, tls=folio.TLS(ca=str(pki.ca)),
                          token=create_token("admin", _SECRET, "HS256"), timeout_s=30) as admin:
            admin.grant_permission("app", "*", ["produce", "consume", "admin"])
            admin.grant_permission("app", "*", ["consume"], kind="group")
        yield Broker(server, found["GSS"], found["GSSTLS"], pki.ca)
        server.terminate()
    finally:
        processes.kill_all()


def _client(realm: Realm, user: str, *args: str) -> dict[str, Any]:
    """``tests.support.gssapi_client ARGS`` as ``user`` (its ticket cache); its JSON line."""
    env = realm.kdc.env(realm.caches[user])
    done = subprocess.run([sys.executable, "-m", "tests.support.gssapi_client", *args],
                          env=env, cwd=_ROOT, capture_output=True, text=True,
                          timeout=CLIENT_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("listener", ["plain", "tls"])
def test_kafka_python_produces_and_consumes(realm: Realm, broker: Broker, listener: str) -> None:
    topic = f"gssapi-{listener}-{uuid.uuid4().hex[:8]}"
    args = [broker.plain, topic, "3"] if listener == "plain" else [
        broker.tls, topic, "3", str(broker.ca)]
    result = _client(realm, "app", "round-trip", *args)
    assert "error" not in result, result
    assert result["values"] == result["sent"]


def test_the_mapped_principal_is_what_the_grants_see(realm: Realm, broker: Broker) -> None:
    """``stranger@FOLIO.TEST`` authenticates as role ``stranger``, which has no grant."""
    topic = f"gssapi-acl-{uuid.uuid4().hex[:8]}"
    assert "values" in _client(realm, "app", "round-trip", broker.plain, topic, "1")
    result = _client(realm, "stranger", "round-trip", broker.plain, topic, "1")
    assert result.get("error") == "TopicAuthorizationFailedError", result


def test_session_lifetime_and_reauthentication(realm: Realm, broker: Broker) -> None:
    result = _client(realm, "app", "raw", broker.plain, "kafka", "2")
    assert result["error_code"] == 0 and result["rounds"] == 2, result
    assert result["metadata"] is True
    # Until the service ticket ends (the KDC's max_life, 1 h, plus the clock skew allowed).
    assert 0 < result["session_lifetime_ms"] <= (3600 + 300 + 5) * 1000


def test_ticket_for_another_service_is_refused(realm: Realm, broker: Broker) -> None:
    before = broker.metric("bad_credentials")
    result = _client(realm, "app", "raw", broker.plain, "other")
    assert result["error_code"] == ErrorCode.sasl_authentication_failed.value
    assert result["error_message"] == (
        "authentication failed (GSSAPI): the ticket is for other/localhost@FOLIO.TEST, not a "
        "'kafka' service principal (sasl.kerberos.service.name)")
    assert result["closed"] is True
    assert broker.metric("bad_credentials") == before + 1


def test_ticket_of_a_key_the_broker_lacks_is_refused(realm: Realm, broker: Broker) -> None:
    result = _client(realm, "app", "raw", broker.plain, "nokey")
    assert result["error_code"] == ErrorCode.sasl_authentication_failed.value
    assert result["error_message"].startswith("authentication failed (GSSAPI): ")
    assert result["error_message"] == "authentication failed (GSSAPI): The ticket isn't for us"
    assert result["closed"] is True


def test_a_security_layer_not_offered_is_refused(realm: Realm, broker: Broker) -> None:
    result = _client(realm, "app", "raw", broker.plain, "kafka", "1", "4")  # confidentiality
    assert result["error_code"] == ErrorCode.sasl_authentication_failed.value
    assert result["error_message"] == ("GSSAPI: the client chose security layer 0x04; only "
                                       "0x01 (none) is offered")
    assert result["closed"] is True


def test_an_expired_ticket_is_refused(realm: Realm, broker: Broker) -> None:
    root = realm.kdc.root
    short = realm.kdc.kinit("app", root / "app.keytab", root / "app-short.ccache", "2s")
    result = _client(Realm(realm.kdc, {"short": short}), "short", "late", broker.plain)
    assert result["error_code"] == ErrorCode.sasl_authentication_failed.value
    assert result["error_message"] == "authentication failed (GSSAPI): Ticket expired", result
    assert result["closed"] is True


def _call(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any:
    sock.sendall(raw_request(api_key, version, 5, load_request_schema(api_key, version)(**fields)))
    return read_response(sock, api_key, version)[1]


@pytest.mark.parametrize("token", [b"", b"\x60\x82garbage", b"\x00" * 64, b"\xff" * 300])
def test_garbage_tokens_are_refused_and_the_broker_serves_on(broker: Broker,
                                                             token: bytes) -> None:
    host, _, port = broker.plain.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        assert _call(sock, 17, 1, mechanism="GSSAPI").error_code == ErrorCode.none
        answer = _call(sock, 36, 1, auth_bytes=token)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message.startswith("authentication failed (GSSAPI): ")
        assert read_frame(sock) is None  # closed after the answer
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        versions = _call(sock, 18, 3, client_software_name="t", client_software_version="1")
        assert versions.error_code == ErrorCode.none


def _refused(realm: Realm, data_dir: Path, *args: str, pythonpath: str = "") -> str:
    """``folio standalone`` serving GSSAPI with ARGS, expected to refuse; its error line."""
    env = realm.kdc.env()
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join((pythonpath, str(_ROOT), env.get("PYTHONPATH", "")))
    done = subprocess.run(folio_argv(
        "standalone", "--data-dir", str(data_dir), "--port", "0", "--metrics-port", "0",
        "--kafka-port", "0", "--kafka-security-protocol", "SASL_PLAINTEXT",
        "--kafka-sasl-mechanisms", "GSSAPI", *args), env=folio_env(env), cwd=_ROOT,
        capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines()
              if line.startswith("folio standalone: error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_a_keytab_without_the_brokers_key_stops_the_start(realm: Realm, tmp_path: Path) -> None:
    line = _refused(realm, tmp_path / "data", "--kafka-sasl-kerberos-keytab",
                    str(realm.kdc.root / "app.keytab"), "--kafka-sasl-kerberos-principal",
                    "kafka/localhost")
    assert line.startswith(
        f"folio standalone: error: --kafka-sasl-kerberos-keytab {realm.kdc.root / 'app.keytab'}"
        ": cannot take the key of kafka/localhost from it: "), line


def test_without_the_gssapi_package_the_start_names_the_extra(realm: Realm,
                                                              tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    (hidden / "gssapi").mkdir(parents=True)
    (hidden / "gssapi" / "__init__.py").write_text(
        'raise ImportError("No module named \'gssapi\' (hidden by the test)")\n')
    line = _refused(realm, tmp_path / "data", "--kafka-sasl-kerberos-keytab",
                    str(realm.kdc.root / "broker.keytab"), pythonpath=str(hidden))
    assert line.startswith(
        "folio standalone: error: --kafka-sasl-mechanisms GSSAPI needs the gssapi extra (pip "
        "install 'folio[gssapi]'), which builds the Python package gssapi against MIT Kerberos "
        "(apt-get install libkrb5-dev)"), line
