"""Leader epochs on the Kafka side (``broker.kafka.leader_epochs``, OffsetForLeaderEpoch).

A cluster broker's view on a real ``TopicManager``, as in ``test_leader_hints``:
partition 0 is served here with epoch 3, partition 1 is led elsewhere (epoch
7), partition 2's leader is unknown. Requests go through kio's encoding both
ways. Metadata reports the epochs; Fetch, ListOffsets and OffsetForLeaderEpoch
answer FENCED_LEADER_EPOCH for an older ``current_leader_epoch`` and
UNKNOWN_LEADER_EPOCH for a newer one; batches written carry the epoch; a
standalone's epoch is 0; OffsetForLeaderEpoch answers each earlier epoch's
exact end from the segment's leader-epoch history.
"""

from __future__ import annotations

import datetime
import struct
import sys
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.owned_topics import OwnedTopics
from broker.kafka.apis import dispatch_table
from broker.kafka.batches import parse_batch, split_batches
from broker.kafka.blocks import block_of_batch, with_leader_epoch
from broker.kafka.context import KafkaContext
from broker.kafka.handlers.fetch import FETCH_KEY, handle_fetch
from broker.kafka.handlers.leader_epoch_offsets import (
    OFFSET_FOR_LEADER_EPOCH_KEY,
    handle_offset_for_leader_epoch,
)
from broker.kafka.handlers.list_offsets import LIST_OFFSETS_KEY, handle_list_offsets
from broker.kafka.handlers.metadata import METADATA_KEY, handle_metadata
from broker.kafka.messages import request_class
from broker.kafka.producer_ids import ProducerIds
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv
from tests.unit.broker.kafka.test_leader_hints import (
    OTHER_EPOCH,
    TOPIC,
    _as_client_reads,
    _batch,
    _by_index,
    _call,
    _context,
    _Nodes,
    _produce,
)

#: The epoch of partition 0, served here (``test_leader_hints._Nodes``).
EPOCH = 3


async def _fetch(context: KafkaContext, current: int, version: int = 12) -> Any:
    cls: Any = request_class(FETCH_KEY, version)
    module = sys.modules[cls.__module__]
    request = cls(max_wait=datetime.timedelta(0), min_bytes=1, topics=(module.FetchTopic(
        topic=TOPIC, partitions=(module.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
            current_leader_epoch=current),)),), forgotten_topics_data=())
    answer = await handle_fetch(context, _call(FETCH_KEY, version, request))
    return _as_client_reads(FETCH_KEY, version, answer).responses[0].partitions[0]


async def _list_offsets(context: KafkaContext, current: int, version: int = 6) -> Any:
    cls: Any = request_class(LIST_OFFSETS_KEY, version)
    module = sys.modules[cls.__module__]
    request = cls(replica_id=-1, isolation_level=0, topics=(module.ListOffsetsTopic(
        name=TOPIC, partitions=(module.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=current, timestamp=-1),)),))
    answer = await handle_list_offsets(context, _call(LIST_OFFSETS_KEY, version, request))
    return _as_client_reads(LIST_OFFSETS_KEY, version, answer).topics[0].partitions[0]


async def _end_offsets(context: KafkaContext, asked: list[tuple[int, int, int]],
                       version: int = 4, topic: str = TOPIC) -> list[Any]:
    """OffsetForLeaderEpoch of (partition, current_leader_epoch, leader_epoch) triples."""
    cls: Any = request_class(OFFSET_FOR_LEADER_EPOCH_KEY, version)
    module = sys.modules[cls.__module__]
    replica = {"replica_id": -1} if version >= 3 else {}
    request = cls(**replica, topics=(module.OffsetForLeaderTopic(
        topic=topic, partitions=tuple(module.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=current, leader_epoch=epoch)
            for partition, current, epoch in asked)),))
    answer = await handle_offset_for_leader_epoch(
        context, _call(OFFSET_FOR_LEADER_EPOCH_KEY, version, request))
    return list(_as_client_reads(OFFSET_FOR_LEADER_EPOCH_KEY, version,
                                 answer).topics[0].partitions)


def _epoch_of(batch: bytes) -> int:
    return int(struct.unpack_from(">i", batch, 12)[0])


async def test_metadata_reports_each_partitions_epoch(env: BrokerEnv,
                                                      topics: TopicManager) -> None:
    context, _ = await _context(env, topics, cluster=True)
    cls: Any = request_class(METADATA_KEY, 12)
    module = sys.modules[cls.__module__]
    request = cls(topics=(module.MetadataRequestTopic(topic_id=None, name=TOPIC),),
                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    metadata = _as_client_reads(METADATA_KEY, 12, await handle_metadata(
        context, _call(METADATA_KEY, 12, request)))
    parts = _by_index(metadata.topics[0].partitions, "partition_index")
    assert [parts[index].leader_epoch for index in range(3)] == [EPOCH, OTHER_EPOCH, -1]


@pytest.mark.parametrize(("current", "expected"), [
    (-1, ErrorCode.none), (EPOCH, ErrorCode.none),
    (EPOCH - 1, ErrorCode.fenced_leader_epoch), (EPOCH + 1, ErrorCode.unknown_leader_epoch)])
async def test_fetch_and_list_offsets_check_the_current_leader_epoch(
        env: BrokerEnv, topics: TopicManager, current: int, expected: ErrorCode) -> None:
    context, topic_id = await _context(env, topics, cluster=True)
    await _produce(context, 13, topic_id)  # partition 0 holds one record
    fetched = await _fetch(context, current)
    assert fetched.error_code == expected
    assert bool(fetched.records) is (expected is ErrorCode.none)
    listed = await _list_offsets(context, current)
    assert listed.error_code == expected
    if expected is ErrorCode.none:
        assert (listed.offset, listed.leader_epoch) == (1, EPOCH)
    else:
        assert listed.offset == -1


async def test_batches_carry_the_epoch_they_were_written_in(env: BrokerEnv,
                                                            topics: TopicManager) -> None:
    context, topic_id = await _context(env, topics, cluster=True)
    await _produce(context, 13, topic_id)
    [batch] = split_batches(bytes((await _fetch(context, -1)).records))
    assert _epoch_of(batch) == EPOCH
    parse_batch(batch)  # the CRC still holds: the epoch is outside it


async def test_a_standalone_reports_epoch_zero(env: BrokerEnv, topics: TopicManager) -> None:
    context, topic_id = await _context(env, topics, cluster=False)
    await _produce(context, 13, topic_id)
    fetched = await _fetch(context, 0)
    assert fetched.error_code == ErrorCode.none
    [batch] = split_batches(bytes(fetched.records))
    assert _epoch_of(batch) == 0
    assert (await _fetch(context, 1)).error_code == ErrorCode.unknown_leader_epoch
    [answer] = await _end_offsets(context, [(0, 0, 0)])
    assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (ErrorCode.none, 0, 1)


@pytest.mark.parametrize("version", [2, 3, 4])
async def test_offset_for_leader_epoch(env: BrokerEnv, topics: TopicManager,
                                       version: int) -> None:
    context, topic_id = await _context(env, topics, cluster=True)
    await _produce(context, 13, topic_id)
    await _produce(context, 13, topic_id)  # partition 0 ends at 2
    answers = await _end_offsets(context, [
        (0, EPOCH, EPOCH),       # the current epoch: the log end
        (0, -1, EPOCH - 2),      # no history: the epoch now starts at the log end
        (0, EPOCH, EPOCH + 1),   # above the partition's: undefined, as Kafka
        (0, EPOCH - 1, EPOCH),   # a stale current epoch
        (0, EPOCH + 1, EPOCH),   # one this broker does not know yet
        (1, OTHER_EPOCH, 1),     # led elsewhere
    ], version)
    assert [(a.partition, a.error_code, a.leader_epoch, a.end_offset) for a in answers] == [
        (0, ErrorCode.none, EPOCH, 2),
        (0, ErrorCode.none, EPOCH - 2, 2),
        (0, ErrorCode.none, -1, -1),
        (0, ErrorCode.fenced_leader_epoch, -1, -1),
        (0, ErrorCode.unknown_leader_epoch, -1, -1),
        (1, ErrorCode.not_leader_or_follower, -1, -1),
    ]


async def test_each_earlier_epoch_ends_where_the_next_ownership_started(
        env: BrokerEnv) -> None:
    first = env.manager(leader_epoch_of=lambda _segment: 1)
    context, topic_id = await _context(env, first, cluster=True)
    await _produce(context, 13, topic_id)
    await _produce(context, 13, topic_id)  # partition 0: offsets 0 and 1 in epoch 1
    await first.close()
    env.abandon(first)
    # The next owner loads it in epoch 3 (the partition's epoch now: ``_Nodes``).
    second = env.manager(leader_epoch_of=lambda _segment: EPOCH)
    info = await second.get_topic(TOPIC)
    context = KafkaContext(OwnedTopics(second, lambda name: name == f"{TOPIC}/0",
                                       lambda _name: "10.0.0.2:5000"),
                           "this-broker", ProducerIds(env.store), nodes=_Nodes())
    await _produce(context, 13, uuid.UUID(info.topic_id))  # offset 2, in epoch 3
    answers = await _end_offsets(context, [(0, EPOCH, 1), (0, EPOCH, 2), (0, EPOCH, 0),
                                           (0, EPOCH, EPOCH), (0, EPOCH, EPOCH + 1)])
    assert [(a.error_code, a.leader_epoch, a.end_offset) for a in answers] == [
        (ErrorCode.none, 1, 2),    # epoch 1 ends where epoch 3 started
        (ErrorCode.none, 1, 2),    # not kept: the largest below it, and the same end
        (ErrorCode.none, 0, 0),    # below every kept epoch: the oldest one's start
        (ErrorCode.none, EPOCH, 3),  # the epoch now: the log end
        (ErrorCode.none, -1, -1),  # above it
    ]


def test_api_versions_advertise_offset_for_leader_epoch() -> None:
    row = dispatch_table().get(OFFSET_FOR_LEADER_EPOCH_KEY)
    assert row is not None and (row.min_version, row.max_version) == (2, 4)


def test_the_epoch_is_set_outside_the_crc() -> None:
    batch = _batch(b"value")
    block = block_of_batch(batch, 5)
    assert with_leader_epoch(block, 5) is block  # already that epoch: no copy
    moved = with_leader_epoch(block, 9)
    assert _epoch_of(moved[len(moved) - len(batch):]) == 9
    parse_batch(moved[len(moved) - len(batch):])
    assert with_leader_epoch(block, -1) is block  # unknown: left as it was
    assert _epoch_of(block_of_batch(batch)[-len(batch):]) == _epoch_of(batch)
