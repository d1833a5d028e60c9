"""Delegation tokens in a cluster: made through one broker, accepted and expired through the other.

Two brokers on a real ZooKeeper with token authentication, the same
``--kafka-delegation-token-secret-file`` and a SASL_PLAINTEXT Kafka listener
each. A token created on the first authenticates (SCRAM-SHA-512,
``tokenauth=true``) on the second at once, is renewed by its renewer on the
second, and once expired through the second is refused on the first: the
token is in the metadata store both read (docs/kafka.md, "Delegation tokens").
"""

from __future__ import annotations

import socket
from pathlib import Path

from kio.schema.errors import ErrorCode

from ledger.security.tokens import create_token
from tests.integration.kafka.test_kafka_delegation_tokens import (
    DEADLINE_S,
    _create,
    _describe,
    _expire,
    _ids,
    _password,
    _renew,
    _scram,
)
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.kafka import kafka_address, sasl_plain

_SECRET = b"cluster-delegation-test-secret-0123456789abcdef"


def _as(broker: BookieProcess, role: str) -> socket.socket:
    sock = socket.create_connection(kafka_address(broker), timeout=DEADLINE_S)
    sasl_plain(sock, create_token(role, _SECRET, "HS256", expiry_s=3600))
    return sock


def _token_login(broker: BookieProcess, token_id: str, token_hmac: bytes) -> ErrorCode:
    with socket.create_connection(kafka_address(broker), timeout=DEADLINE_S) as sock:
        code: ErrorCode = _scram(sock, token_id, _password(token_hmac),
                                 tokenauth=True).error_code
        return code


def test_a_token_made_on_one_broker_works_and_expires_on_the_other(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    secret, admin_token, delegation = (tmp_path / "secret", tmp_path / "admin",
                                       tmp_path / "delegation")
    secret.write_bytes(_SECRET + b"\n")
    delegation.write_bytes(b"cluster-wide delegation token secret\n")
    admin_token.write_text(create_token("admin", _SECRET, "HS256"))
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=4, ensemble_size=1, write_quorum=1, ack_quorum=1)
    cluster.start_bookie()
    flags = ("--auth-token-secret-file", str(secret), "--super-users", "admin",
             "--peer-token-file", str(admin_token), "--kafka-port", "0",
             "--kafka-delegation-token-secret-file", str(delegation),
             "--kafka-security-protocol", "SASL_PLAINTEXT",
             "--kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-512")
    first, second = cluster.start_broker(*flags), cluster.start_broker(*flags)
    with _as(first, "alice") as alice, _as(second, "bob") as bob:
        created = _create(alice, renewers=("bob",))
        assert created.error_code == ErrorCode.none
        assert _token_login(second, created.token_id, created.hmac) == ErrorCode.none
        assert created.token_id in _ids(_describe(bob))
        assert _renew(bob, created.hmac, 60_000).error_code == ErrorCode.none
        assert _expire(bob, created.hmac).error_code == ErrorCode.none
    assert _token_login(first, created.token_id, created.hmac) == \
        ErrorCode.sasl_authentication_failed
