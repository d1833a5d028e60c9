"""Issue 22: a Kafka group's ``reset``/``delete`` whose answer is lost (``folio._unknown``).

As ``tests/integration/test_unknown_outcomes.py``: the real standalone applies
the call and the answer is lost at the client's call seam; the old code raised
``TimeoutError`` (and a bare repeat of the delete ``ReaderGroupNotFoundError``).
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

import folio
from folio.api.v1 import groups_pb2
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.integration.test_unknown_outcomes import _lose


def test_kafka_group_reset_and_delete_whose_answers_are_lost(bootstrap: str,
                                                              client: folio.Client) -> None:
    topic, group = "kg-unknown-in", "kg-unknown"
    create_topic(bootstrap, topic, 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:  # a group with offsets and no members
        consumer.commit(offsets=[TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)],
                        asynchronous=False)
    finally:
        consumer.close()
    kafka = client.kafka_group(group)
    lost = _lose(client, groups_pb2.ResetKafkaGroupRequest)
    described = kafka.reset("latest", [topic])  # old: TimeoutError
    assert lost == ["ResetKafkaGroupRequest"]
    assert [p.committed_offset for p in described.partitions] == [0, 0]  # (empty partitions)
    lost = _lose(client, groups_pb2.DeleteKafkaGroupRequest)
    kafka.delete()  # old: TimeoutError; a bare repeat: ReaderGroupNotFoundError
    assert lost == ["DeleteKafkaGroupRequest"]
    with pytest.raises(folio.ReaderGroupNotFoundError):  # deleted; no unknown outcome now
        kafka.delete()
