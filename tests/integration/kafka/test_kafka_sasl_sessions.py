"""SASL sessions over a raw socket: what is served before authentication, token lifetimes, flags.

A ``folio standalone`` with token authentication and a SASL_PLAINTEXT Kafka
listener: requests are encoded with kio as a client would, so the test sees
the exact answers (error codes, session lifetime) and when the broker closes
the connection. The start-up refusals (no silent bypass) run the command
and read its usage error.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.certs import Pki
from tests.support.kafka import kafka_address, raw_request, read_frame, read_response
from tests.support.standalone import start_standalone

CLI_TIMEOUT_S = 120.0
_SECRET = b"kafka-session-test-secret-0123456789abcdef"
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "secret"
    path.write_bytes(_SECRET + b"\n")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, secret: Path) -> Iterator[BookieProcess]:
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("sessions") / "data",
                               "--auth-token-secret-file", str(secret), "--super-users",
                               "admin", "--kafka-port", "0", "--kafka-security-protocol",
                               "SASL_PLAINTEXT", "--kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-256")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture
def sock(server: BookieProcess) -> Iterator[socket.socket]:
    made = socket.create_connection(kafka_address(server), timeout=DEADLINE_S)
    yield made
    made.close()


def _folio(*args: str) -> Any:
    """``folio ARGS`` to completion, with time for a loaded machine to start Python."""
    return run_folio(*args, timeout_s=CLI_TIMEOUT_S)


def _request(api_key: int, version: int, **fields: Any) -> Any:
    return load_request_schema(api_key, version)(**fields)


def _call(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any:
    sock.sendall(raw_request(api_key, version, 7, _request(api_key, version, **fields)))
    correlation_id, response = read_response(sock, api_key, version)
    assert correlation_id == 7
    return response


def _plain(sock: socket.socket, token: str, user: str = "") -> Any:
    handshake = _call(sock, 17, 1, mechanism="PLAIN")
    assert handshake.error_code == ErrorCode.none
    assert handshake.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    return _call(sock, 36, 1, auth_bytes=b"\x00" + user.encode() + b"\x00" + token.encode())


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closes the connection (waits up to the socket timeout)."""
    try:
        return read_frame(sock) is None
    except (ConnectionResetError, TimeoutError):
        return False


def test_only_sasl_is_served_before_authentication(sock: socket.socket) -> None:
    versions = _call(sock, 18, 3, client_software_name="t", client_software_version="1")
    keys = {api.api_key for api in versions.api_keys}
    assert {17, 36, 50, 51} <= keys
    sock.sendall(raw_request(3, 1, 8, _request(3, 1, topics=None)))  # Metadata, too early
    assert _closed(sock)


def test_unserved_mechanism_is_answered_then_closed(sock: socket.socket) -> None:
    answer = _call(sock, 17, 1, mechanism="OAUTHBEARER")  # not in --kafka-sasl-mechanisms
    assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
    assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert _closed(sock)


def test_plain_user_name_must_be_the_token_role(sock: socket.socket) -> None:
    answer = _plain(sock, create_token("app", _SECRET, "HS256"), user="admin")
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert "must be the token's role" in answer.error_message
    assert _closed(sock)


def test_session_lifetime_is_the_token_expiry_and_the_connection_closes(
        sock: socket.socket) -> None:
    token = create_token("app", _SECRET, "HS256", expiry_s=4)
    answer = _plain(sock, token, user="app")
    assert answer.error_code == ErrorCode.none
    lifetime_ms = answer.session_lifetime.total_seconds() * 1000
    assert 0 < lifetime_ms <= 4000
    assert _call(sock, 3, 1, topics=None).brokers  # authenticated: Metadata is served
    assert _closed(sock)  # the token expires: the broker ends the session


def test_reauthentication_extends_the_session(sock: socket.socket) -> None:
    first = _plain(sock, create_token("app", _SECRET, "HS256", expiry_s=3))
    assert first.error_code == ErrorCode.none
    again = _plain(sock, create_token("app", _SECRET, "HS256", expiry_s=3600))
    assert again.error_code == ErrorCode.none
    assert again.session_lifetime.total_seconds() > 3000
    deadline = time.monotonic() + 5  # past the first token's expiry
    while time.monotonic() < deadline:
        assert _call(sock, 3, 1, topics=None).brokers


def test_reauthentication_may_not_change_the_role(sock: socket.socket) -> None:
    assert _plain(sock, create_token("app", _SECRET, "HS256")).error_code == ErrorCode.none
    other = _plain(sock, create_token("admin", _SECRET, "HS256"))
    assert other.error_code == ErrorCode.sasl_authentication_failed
    assert _closed(sock)


def _padded(api_key: int, version: int, size: int, **fields: Any) -> bytes:
    """A request frame of ``size`` bytes (after its prefix): the request, then zeros.

    The broker ignores bytes after a decoded request body, as Kafka's does.
    """
    data = raw_request(api_key, version, 7, _request(api_key, version, **fields))
    body = data[4:]
    return struct.pack(">i", size) + body + bytes(size - len(body))


def test_a_large_frame_before_authentication_is_refused(sock: socket.socket) -> None:
    cap = 512 * 1024  # Kafka's sasl.server.max.receive.size
    # At the cap: read whole and answered (ApiVersions is served before authenticating).
    sock.sendall(_padded(18, 3, cap, client_software_name="t", client_software_version="1"))
    correlation_id, versions = read_response(sock, 18, 3)
    assert correlation_id == 7 and versions.error_code == ErrorCode.none
    # One byte over: refused once its size is read, before its body comes.
    sock.sendall(struct.pack(">i", cap + 1) + raw_request(18, 3, 8, _request(
        18, 3, client_software_name="t", client_software_version="1"))[4:])
    assert _closed(sock)


def test_large_frames_are_read_once_authenticated(sock: socket.socket) -> None:
    answer = _plain(sock, create_token("app", _SECRET, "HS256"), user="app")
    assert answer.error_code == ErrorCode.none
    sock.sendall(_padded(3, 1, 2 * 1024 * 1024, topics=None))  # Metadata of 2 MiB
    correlation_id, metadata = read_response(sock, 3, 1)
    assert correlation_id == 7 and metadata.brokers


@pytest.mark.parametrize(("flags", "message"), [
    ((), "add --kafka-security-protocol SASL_SSL"),
    (("--kafka-security-protocol", "SSL"), "needs --tls-cert"),
    (("--kafka-security-protocol", "SASL_PLAINTEXT", "--kafka-sasl-mechanisms", "KERBEROS"),
     "KERBEROS not served"),
    (("--kafka-security-protocol", "SASL_PLAINTEXT", "--kafka-sasl-mechanisms", "GSSAPI"),
     "GSSAPI needs --kafka-sasl-kerberos-keytab"),
])
def test_unsafe_listeners_are_refused_at_start(tmp_path: Path, secret: Path,
                                               flags: tuple[str, ...], message: str) -> None:
    done = run_folio("standalone", "--data-dir", str(tmp_path), "--auth-token-secret-file",
                     str(secret), "--kafka-port", "0", *flags, "--print-config")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_plaintext_beside_a_tls_api_needs_the_flag(tmp_path: Path) -> None:
    cert = Pki(tmp_path / "pki").server()
    base = ("standalone", "--data-dir", str(tmp_path), "--tls-cert", str(cert.cert),
            "--tls-key", str(cert.key), "--kafka-port", "0", "--print-config")
    refused = run_folio(*base)
    assert refused.returncode == 2
    assert "--kafka-allow-plaintext" in refused.stderr
    allowed = run_folio(*base, "--kafka-allow-plaintext")
    assert allowed.returncode == 0, allowed.stderr
    assert "kafka_allow_plaintext = true" in allowed.stdout


def _scram(server: BookieProcess, user: str, password: str,
           mechanism: str = "SCRAM-SHA-256") -> Any:
    """SCRAM over a new connection; the last SaslAuthenticate answer."""
    client = ScramClient(user, password, mechanism)
    with socket.create_connection(kafka_address(server), timeout=DEADLINE_S) as made:
        assert _call(made, 17, 1, mechanism=mechanism).error_code == ErrorCode.none
        first = _call(made, 36, 2, auth_bytes=client.first_message())
        if first.error_code != ErrorCode.none:
            return first
        client.process_server_first_message(first.auth_bytes)
        final = _call(made, 36, 2, auth_bytes=client.final_message())
        if final.error_code == ErrorCode.none:
            client.process_server_final_message(final.auth_bytes)
        return final


def test_kafka_user_command_manages_scram_users(server: BookieProcess,
                                                tmp_path: Path) -> None:
    host, port = kafka_address(server)
    admin_token, app_token, password = (tmp_path / "admin", tmp_path / "app",
                                        tmp_path / "password")
    admin_token.write_text(create_token("admin", _SECRET, "HS256"))
    app_token.write_text(create_token("app", _SECRET, "HS256"))
    password.write_text("correct horse\n")
    where = ("--bootstrap-server", f"{host}:{port}")
    added = _folio("kafka-user", "add", *where, "--sasl-token-file", str(admin_token),
                      "--user", "reporter", "--password-file", str(password))
    assert added.returncode == 0, added.stderr
    assert _scram(server, "reporter", "correct horse").error_code == ErrorCode.none
    wrong = _scram(server, "reporter", "wrong horse")
    assert wrong.error_code == ErrorCode.sasl_authentication_failed
    listed = _folio("kafka-user", "list", *where, "--sasl-token-file", str(admin_token))
    assert "reporter\tSCRAM-SHA-256\t8192" in listed.stdout
    assert "reporter\tSCRAM-SHA-512\t8192" in listed.stdout
    refused = _folio("kafka-user", "list", *where, "--sasl-token-file", str(app_token))
    assert refused.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
    anonymous = _folio("kafka-user", "list", *where)
    assert anonymous.returncode == 1 and "closed the connection" in anonymous.stderr
    deleted = _folio("kafka-user", "delete", *where, "--sasl-token-file", str(admin_token),
                        "--user", "reporter")
    assert deleted.returncode == 0, deleted.stderr
    assert _scram(server, "reporter", "correct horse").error_code == \
        ErrorCode.sasl_authentication_failed
    again = _folio("kafka-user", "delete", *where, "--sasl-token-file", str(admin_token),
                      "--user", "reporter")
    assert again.returncode == 1 and "RESOURCE_NOT_FOUND" in again.stderr
