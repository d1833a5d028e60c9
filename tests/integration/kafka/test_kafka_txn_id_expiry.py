"""Transactional ids expire (``transactional.id.expiration.ms``), ongoing transactions never.

A standalone broker whose ids expire after 2 s without transaction activity,
swept every 200 ms: an id whose transaction committed leaves ListTransactions
and DescribeTransactions, and its next InitProducerId gets a new producer id
at epoch 0; an id with a transaction open longer than that stays (Ongoing);
an id whose transaction timed out is aborted by its timeout first, then
expires. After a SIGKILL and a restart (Kafka's 7 days) the expired ids stay
gone (tombstones in ``_kafka_txn_state``) and the new one keeps its new id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka.errors import TransactionalIdNotFoundError

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_offset_expiry import broker_configs
from tests.integration.kafka.test_kafka_transactions import transactional_producer
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

SHORT = ("--kafka-port", "0", "--kafka-transactional-id-expiration-ms", "2000",
         "--kafka-transaction-remove-expired-transaction-cleanup-interval-ms", "200")


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    started = BookieProcesses()
    yield started
    started.kill_all()


def bootstrap_of(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def listed(admin: KafkaAdminClient) -> dict[str, tuple[int, str]]:
    """ListTransactions: transactional id -> (producer id, state)."""
    (found,) = admin.list_transactions().values()
    return {t.transactional_id: (t.producer_id, t.state.value) for t in found}


@pytest.mark.faults
def test_idle_transactional_ids_expire_and_ongoing_ones_stay(
        processes: BookieProcesses, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(processes, data_dir, *SHORT)
    bootstrap = bootstrap_of(server)
    create_topic(bootstrap, "txn-out", 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    # Open first, and left open (its timeout is a minute): it never expires.
    busy = transactional_producer(bootstrap, "busy-id")
    busy.begin_transaction()
    busy.produce("txn-out", value=b"open", partition=0)
    assert busy.flush(DEADLINE_S) == 0
    # Its transaction times out (1 s): aborted by the coordinator, then expired.
    timed_out = Producer({"bootstrap.servers": bootstrap, "transactional.id": "timeout-id",
                          "transaction.timeout.ms": 1000})
    timed_out.init_transactions(DEADLINE_S)
    timed_out.begin_transaction()
    timed_out.produce("txn-out", value=b"times out", partition=0)
    assert timed_out.flush(DEADLINE_S) == 0
    for transactional_id in ("idle-id", "gone-id"):
        producer = transactional_producer(bootstrap, transactional_id)
        producer.begin_transaction()
        producer.produce("txn-out", value=transactional_id.encode(), partition=0)
        producer.commit_transaction(DEADLINE_S)
    # (From the log: listed, it may have expired already on a slow machine.)
    found = re.search(r"idle-id is producer (\d+) epoch 0", server.log())
    assert found is not None
    old_id = int(found.group(1))

    wait_for(lambda: not {"idle-id", "gone-id", "timeout-id"} & set(listed(admin)),
             "the idle ids expire", DEADLINE_S)
    assert listed(admin)["busy-id"][1] == "Ongoing", "an open transaction never expires"
    with pytest.raises(TransactionalIdNotFoundError):
        admin.describe_transactions(["gone-id"])
    assert "kafka transactions: timeout-id expired" in server.log()
    # Its next InitProducerId starts afresh: a new producer id, epoch 0.
    again = transactional_producer(bootstrap, "idle-id")
    again.begin_transaction()
    again.produce("txn-out", value=b"again", partition=0)
    again.commit_transaction(DEADLINE_S)
    new_id = listed(admin)["idle-id"][0]
    assert new_id != old_id
    assert f"idle-id is producer {new_id} epoch 0" in server.log()
    admin.close()
    configs = broker_configs(AdminClient({"bootstrap.servers": bootstrap}))
    assert (configs["transactional.id.expiration.ms"].value,
            configs["transaction.remove.expired.transaction.cleanup.interval.ms"].value) == (
        "2000", "200")

    # Restarted with Kafka's 7 days: the expired ids stay gone, the new one is kept.
    assert server.kill() == -9
    server = start_standalone(processes, data_dir, "--kafka-port", "0")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_of(server))
    try:
        after = listed(admin)
        assert not {"gone-id", "timeout-id"} & set(after)
        assert after["idle-id"] == (new_id, "CompleteCommit")
    finally:
        admin.close()
