"""Issue 22: a Kafka group's ``reset``/``delete`` whose answer is lost (``folio._unknown``).

As ``tests/integration/test_unknown_outcomes.py``: the real standalone applies
the call and the answer is lost at the client's call seam; the old code raised
``TimeoutError`` (and a bare repeat of the delete ``ReaderGroupNotFoundError``).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

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


def test_a_shift_whose_answer_is_lost_is_applied_once(bootstrap: str,
                                                      client: folio.Client) -> None:
    """A shift is not idempotent: the SDK plans it (a dry run) and writes the plan as
    absolute offsets (TO_OFFSETS), so the repeat after a lost answer shifts nothing more."""
    topic, group = "kg-unknown-shift-in", "kg-unknown-shift"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(10):
        producer.produce(topic, value=b"%d" % index, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    finally:
        consumer.close()
    real = client._call
    sent: list[int] = []

    def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
        if isinstance(request, groups_pb2.ResetKafkaGroupRequest):
            sent.append(request.to)
            if request.to == groups_pb2.ResetKafkaGroupRequest.TO_OFFSETS and \
                    sent.count(request.to) == 1:
                real(method, request, retry=retry)  # applied, its answer lost
                raise TimeoutError("no answer within 35.0 s")
        return real(method, request, retry=retry)

    client._call = losing  # type: ignore[method-assign]
    after = client.kafka_group(group).reset("shift", value=3)
    to = groups_pb2.ResetKafkaGroupRequest
    assert sent == [to.TO_SHIFT, to.TO_OFFSETS, to.TO_OFFSETS]  # planned, lost, repeated
    assert [p.committed_offset for p in after.reset] == [5]
    assert [p.committed_offset for p in after.partitions] == [5]  # shifted once, not twice
