"""Client quotas in a cluster: set through one broker's Kafka port, enforced by every broker.

Two brokers on a real ZooKeeper. A quota set with AlterClientQuotas on the
first broker is described by the second (its watch of the metadata node),
then a librdkafka producer of that client id, bootstrapped at the second
broker, writes to a topic of four partitions spread over both brokers: the
answers carry throttle times (whichever broker leads a partition enforces the
quota, as each Kafka broker does), and every record is stored once, in order
per partition. A controller mutation quota set the same way bounds a
CreateTopics v6 sent to the second broker: THROTTLING_QUOTA_EXCEEDED once the
client's tokens are spent (docs/kafka.md, "Client quotas"). A dynamic broker
config's cluster default set through the first broker is in force on the
second, beneath the second's own value (docs/kafka.md, "Dynamic broker configs").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Producer, ThrottleEvent
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_client_quotas import (
    _alter,
    _describe,
    _end_offset,
    _entries,
    _payloads,
    _read_all,
)
from tests.integration.kafka.test_kafka_dynamic_broker_configs import alter_raw, synonyms_raw
from tests.integration.kafka.test_kafka_quota_kinds import _create
from tests.support.bookies import BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.kafka import kafka_address
from tests.support.wait import wait_for

DEADLINE_S = 120.0
TOPIC = "cq.cluster"
CLIENT = "cq-cluster-app"
MUTATOR = "cq-cluster-mutator"
#: DescribeConfigs' sources (Kafka's ConfigSource).
_DYNAMIC_BROKER, _DYNAMIC_DEFAULT, _DEFAULT = 2, 3, 5


def test_a_quota_set_through_one_broker_throttles_through_the_other(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=4, ensemble_size=1, write_quorum=1, ack_quorum=1)
    cluster.start_bookie()
    first = cluster.start_broker("--kafka-port", "0")
    second = cluster.start_broker("--kafka-port", "0")
    one, two = (":".join(map(str, kafka_address(broker))) for broker in (first, second))
    assert _alter(one, [([("client-id", CLIENT)], [("producer_byte_rate", 5000.0, False)]),
                        ([("client-id", MUTATOR)], [("controller_mutation_rate", 0.2, False)])]) \
        == [(ErrorCode.none, None)] * 2
    wanted = {(("client-id", CLIENT),): {"producer_byte_rate": 5000.0}}
    wait_for(lambda: _entries(_describe(two, [("client-id", 0, CLIENT)])) == wanted,
             "the second broker describes the quota", timeout_s=DEADLINE_S)
    wait_for(lambda: _entries(_describe(two, [("client-id", 0, MUTATOR)])) != {},
             "the second broker describes the mutation quota", timeout_s=DEADLINE_S)
    # 2 tokens: a topic of 12 partitions goes (the bucket at -10), the next is refused.
    assert _create(two, MUTATOR, "cq.cluster.big", 12, 6).topics[0].error_code is \
        ErrorCode.none
    refused = _create(two, MUTATOR, "cq.cluster.small", 1, 6)
    assert refused.topics[0].error_code is ErrorCode.throttling_quota_exceeded
    admin = AdminClient({"bootstrap.servers": two})
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=4,
                                                replication_factor=1)]).values():
        future.result(timeout=DEADLINE_S)
    throttles: list[float] = []

    def throttled(event: ThrottleEvent) -> None:
        throttles.append(event.throttle_time)

    producer = Producer({"bootstrap.servers": two, "client.id": CLIENT, "linger.ms": 5,
                         "batch.size": 4096, "enable.idempotence": True,
                         "throttle_cb": throttled})
    payloads = _payloads(120, 1000)
    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    for number, payload in enumerate(payloads):
        producer.produce(TOPIC, payload, partition=number % 4, on_delivery=delivered)
    assert producer.flush(DEADLINE_S) == 0
    assert failures == []
    assert any(seconds > 0 for seconds in throttles), throttles
    for partition in range(4):
        assert _end_offset(two, TOPIC, partition) == 30  # each record stored once
        assert _read_all(two, TOPIC, 30, {}, partition=partition) == payloads[partition::4]
    # The dynamic broker configs live in ZooKeeper too (docs/kafka.md, "Dynamic broker
    # configs"): the cluster default set through the first is in force on the second,
    # and one broker's own value is set through that broker only.
    rate = "max.connection.creation.rate"
    assert alter_raw(one, "", [(rate, 0, "1000")]) == (ErrorCode.none, None)
    wait_for(lambda: synonyms_raw(two, rate)[0] == ("1000", _DYNAMIC_DEFAULT),
             "the second broker applies the cluster default", timeout_s=DEADLINE_S)
    [(second_id, _source)] = synonyms_raw(two, "broker.id")
    assert alter_raw(one, second_id, [(rate, 0, "2000")])[0] is ErrorCode.invalid_request
    assert alter_raw(two, second_id, [(rate, 0, "2000")]) == (ErrorCode.none, None)
    assert synonyms_raw(two, rate) == [("2000", _DYNAMIC_BROKER), ("1000", _DYNAMIC_DEFAULT),
                                       (str(2**31 - 1), _DEFAULT)]
    assert synonyms_raw(one, rate)[0] == ("1000", _DYNAMIC_DEFAULT)
