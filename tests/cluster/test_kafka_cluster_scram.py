"""SCRAM users in a cluster: made through one broker's Kafka port, accepted by the other's.

Two brokers on a real ZooKeeper, token authentication on and a SASL_PLAINTEXT
Kafka listener each. ``folio kafka-user add`` talks to the first broker; a
SCRAM-SHA-512 client then authenticates on the second one, with no restart
and no wait: the credential is in the metadata store both read
(docs/security.md, "Kafka").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from ledger.security.tokens import create_token
from tests.integration.kafka.test_kafka_sasl_sessions import _scram
from tests.support.bookies import BookieProcesses, run_folio
from tests.support.cluster import LocalCluster
from tests.support.kafka import kafka_address

CLI_TIMEOUT_S = 120.0
_SECRET = b"cluster-scram-test-secret-0123456789abcdef"


def _folio(*args: str) -> Any:
    """``folio ARGS`` to completion, with time for a loaded machine to start Python."""
    return run_folio(*args, timeout_s=CLI_TIMEOUT_S)


def test_scram_user_made_on_one_broker_works_on_the_other(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    secret, admin_token, password = (tmp_path / "secret", tmp_path / "admin",
                                     tmp_path / "password")
    secret.write_bytes(_SECRET + b"\n")
    admin_token.write_text(create_token("admin", _SECRET, "HS256"))
    password.write_text("cluster wide\n")
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=4, ensemble_size=1, write_quorum=1, ack_quorum=1)
    cluster.start_bookie()
    flags = ("--auth-token-secret-file", str(secret), "--super-users", "admin",
             "--peer-token-file", str(admin_token), "--kafka-port", "0",
             "--kafka-security-protocol", "SASL_PLAINTEXT",
             "--kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-512")
    first, second = cluster.start_broker(*flags), cluster.start_broker(*flags)
    assert _scram(second, "orders-app", "cluster wide", "SCRAM-SHA-512").error_code == \
        ErrorCode.sasl_authentication_failed, "no such user yet"
    host, port = kafka_address(first)
    added = _folio("kafka-user", "add", "--bootstrap-server", f"{host}:{port}",
                      "--sasl-token-file", str(admin_token), "--user", "orders-app",
                      "--mechanism", "SCRAM-SHA-512", "--password-file", str(password))
    assert added.returncode == 0, added.stderr
    assert _scram(second, "orders-app", "cluster wide", "SCRAM-SHA-512").error_code == \
        ErrorCode.none
    assert _scram(second, "orders-app", "wrong", "SCRAM-SHA-512").error_code == \
        ErrorCode.sasl_authentication_failed
