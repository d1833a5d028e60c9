"""Share groups (KIP-932): their lag metric, ``folio group reset``, ShareFetch v2's extras.

One real ``folio standalone --kafka-port 0`` with a maintenance round every
second (the lag metric's), raw requests (kio) and the ``folio`` CLI in a
subprocess:

- ``folio_group_lag{kind="kafka"}`` of a share partition is its share lag (records
  from its start offset to the end not yet acknowledged or archived, as
  DescribeShareGroupOffsets v1 answers it), ``folio_share_in_flight_records``
  its in-flight records, scraped from ``/metrics``; ``folio group describe``
  shows the same lag;
- ``folio group reset`` of a share group: refused with members (and saying how
  to empty it), then --to-latest, --to-datetime, --to-offset and --dry-run, each
  read back by DescribeShareGroupOffsets and a fetch;
- ShareFetch / ShareAcknowledge v2: RENEW acknowledgements keep a record's lock
  while the others' expire, a renew-only ShareFetch fetches nothing, the
  record-limit acquire mode acquires exactly ``max_records`` records (cutting
  blocks and runs); bad input with Kafka's error codes.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.share_requests import (
    ask,
    heartbeat,
    offsets,
    partition,
    share_fetch,
)
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic, produce
from tests.integration.kafka.test_kafka_share_groups import set_group_configs
from tests.observability.scrape import Scrape, metrics_url, wait_for
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone

Acks = tuple[tuple[int, int, tuple[int, ...]], ...]
RENEW, ACCEPT, RELEASE = 4, 1, 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone serving Kafka, with a maintenance round (the lag metric) every second."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data",
                               "--kafka-port", "0", "--retention-interval-s", "1")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def bootstrap(server: BookieProcess) -> str:
    host, port = kafka_address(server)
    return f"{host}:{port}"


def _joined(bootstrap: str, topic: str, group: str, member: str, **configs: str) -> Any:
    """A topic of one partition, the group reading it from the earliest record, ``member``
    joined: the topic's id."""
    create_topic(bootstrap, topic, 1)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest", **configs})
    [assigned] = heartbeat(bootstrap, group, member, 0, (topic,)).assignment.topic_partitions
    return assigned.topic_id


def fetch_v2(bootstrap: str, group: str, member: str, epoch: int, topic_id: Any, *,
             acks: Acks = (), mode: int = 0, max_records: int = 100, renew: bool = False,
             partitions: tuple[int, ...] = (0,)) -> Any:
    """ShareFetch v2 of ``partitions``, ``acks`` of the first (``renew``: IsRenewAck, with
    every limit 0)."""
    schema: Any = load_request_schema(78, 2)
    module = sys.modules[schema.__module__]
    limits = (0, 0, 0, 0) if renew else (200, 1, 1 << 20, max_records)  # (wait: 200 ms)
    return ask(bootstrap, 78, 2, schema(
        group_id=group, member_id=member, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=limits[0]), min_bytes=limits[1],
        max_bytes=limits[2], max_records=limits[3], batch_size=100, share_acquire_mode=mode,
        is_renew_ack=renew, forgotten_topics_data=(), topics=(module.FetchTopic(
            topic_id=topic_id, partitions=tuple(module.FetchPartition(
                partition_index=number, acknowledgement_batches=tuple(
                    module.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                acknowledge_types=types)
                    for first, last, types in (acks if number == partitions[0] else ())))
                for number in partitions)),)))


def acknowledge(bootstrap: str, group: str, member: str, epoch: int, topic_id: Any,
                acks: Acks, version: int = 2) -> Any:
    """ShareAcknowledge of partition 0 (v2: IsRenewAck set when a type is RENEW)."""
    schema: Any = load_request_schema(79, version)
    module = sys.modules[schema.__module__]
    renew = {"is_renew_ack": any(RENEW in t for _, _, t in acks)} if version >= 2 else {}
    return ask(bootstrap, 79, version, schema(
        group_id=group, member_id=member, share_session_epoch=epoch, **renew, topics=(
            module.AcknowledgeTopic(topic_id=topic_id, partitions=(module.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=tuple(
                    module.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                acknowledge_types=types)
                    for first, last, types in acks)),)),)))


def _ranges(answer: Any) -> list[tuple[int, int, int]]:
    """The acquired ranges of partition 0 ([] when it is not in the answer: nothing)."""
    assert answer.error_code == ErrorCode.none, answer
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for topic in answer.responses for p in topic.partitions
            for r in p.acquired_records]


def _series(page: Scrape, name: str, group: str, topic: str, **extra: str) -> float | None:
    for labels, value in page.samples.get(name, ()):
        if labels == {**extra, "group": group, "topic": topic, "partition": "0"}:
            return value
    return None


def _group(server: BookieProcess, *args: str) -> Any:
    done = run_folio("group", *args, "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    return done


def test_the_share_lag_metric_and_folio_group_describe(server: BookieProcess,
                                                       bootstrap: str) -> None:
    topic, group = "sm-lag", "sm-lag-g"
    topic_id = _joined(bootstrap, topic, group, "a")
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(6)])
    assert _ranges(share_fetch(bootstrap, group, "a", 0, topic_id)) == [(0, 5, 1)]
    # 0-1 and 3 accepted: the start moves to 2; 2, 4, 5 are still to do (lag 3);
    # 2-5 are in flight (4).
    answer = share_fetch(bootstrap, group, "a", 1, topic_id, ((0, 1, (1,)), (3, 3, (1,))))
    assert partition(answer).acknowledge_error_code == ErrorCode.none
    assert offsets(bootstrap, group, topic) == [(0, 2, 3, ErrorCode.none)]
    page = wait_for(metrics_url(server), lambda p: _series(
        p, "folio_group_lag", group, topic, kind="kafka") == 3, timeout_s=DEADLINE_S,
        what="folio_group_lag of the share group")
    assert _series(page, "folio_share_in_flight_records", group, topic) == 4
    shown = json.loads(_group(server, "describe", group, "--json").stdout)
    assert (shown["protocol_type"], shown["lag"]) == ("share", 3)
    assert [(p["committed_offset"], p["end_offset"], p["lag"]) for p in shown["partitions"]
            ] == [(2, 6, 3)]
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none


def test_folio_group_reset_of_a_share_group(server: BookieProcess, bootstrap: str) -> None:
    topic, group = "sm-reset", "sm-reset-g"
    topic_id = _joined(bootstrap, topic, group, "a")
    now_ms = int(time.time() * 1000)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(6):  # 0-2 ten days ago, 3-5 one day ago
        producer.produce(topic, value=b"r%d" % index, partition=0,
                         timestamp=now_ms - (10 if index < 3 else 1) * 86_400_000)
    assert producer.flush(DEADLINE_S) == 0
    assert _ranges(share_fetch(bootstrap, group, "a", 0, topic_id)) == [(0, 5, 1)]
    ep = ("--endpoint", server.address)
    refused = run_folio("group", "reset", group, "--to-earliest", *ep)
    assert refused.returncode == 1
    assert f"Kafka share group '{group}' has members: a" in refused.stderr
    assert "close its share consumers first" in refused.stderr
    assert offsets(bootstrap, group, topic) == [(0, 0, 6, ErrorCode.none)]  # unchanged
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none

    def reset(*how: str) -> list[tuple[str, int, int]]:
        done = _group(server, "reset", group, *how, "--json")
        return [(o["topic"], o["partition"], o["new_offset"])
                for o in json.loads(done.stdout)["offsets"]]

    assert reset("--to-latest") == [(topic, 0, 6)]
    assert offsets(bootstrap, group, topic) == [(0, 6, 0, ErrorCode.none)]
    two_days_ago = datetime.datetime.fromtimestamp(now_ms / 1000 - 2 * 86_400,
                                                   datetime.UTC)
    assert reset("--to-datetime", two_days_ago.strftime("%Y-%m-%dT%H:%M:%SZ")) == [
        (topic, 0, 3)]
    assert offsets(bootstrap, group, topic) == [(0, 3, 3, ErrorCode.none)]
    assert reset("--to-offset", "4", "--dry-run") == [(topic, 0, 4)]
    assert offsets(bootstrap, group, topic) == [(0, 3, 3, ErrorCode.none)]  # a plan only
    assert reset("--to-offset", "4", "--topic", topic) == [(topic, 0, 4)]
    heartbeat(bootstrap, group, "b", 0, (topic,))
    # The next member starts at 4, nothing in flight from before.
    assert _ranges(share_fetch(bootstrap, group, "b", 0, topic_id)) == [(4, 5, 1)]
    assert heartbeat(bootstrap, group, "b", -1, None).error_code == ErrorCode.none
    nothing = run_folio("group", "reset", "sm-reset-none", "--to-earliest", *ep)
    assert nothing.returncode == 1 and "does not exist" in nothing.stderr


def test_renew_keeps_a_records_lock_while_the_others_expire(bootstrap: str) -> None:
    topic, group = "sm-renew", "sm-renew-g"
    topic_id = _joined(bootstrap, topic, group, "a", **{
        "share.record.lock.duration.ms": "3000"})
    heartbeat(bootstrap, group, "b", 0, (topic,))
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(3)])
    fetched = fetch_v2(bootstrap, group, "a", 0, topic_id)
    assert _ranges(fetched) == [(0, 2, 1)]
    assert fetched.acquisition_lock_timeout == datetime.timedelta(seconds=3)
    # b waits for the locks to expire; a renews record 0's meanwhile, again and again.
    got: list[tuple[int, int, int]] = []
    epoch_a, epoch_b = 1, 0
    deadline = time.monotonic() + DEADLINE_S
    while not got:
        assert time.monotonic() < deadline, "a's records 1-2 never expired"
        renewed = acknowledge(bootstrap, group, "a", epoch_a, topic_id, ((0, 0, (RENEW,)),))
        assert partition(renewed).error_code == ErrorCode.none
        assert renewed.acquisition_lock_timeout == datetime.timedelta(seconds=3)
        got = _ranges(fetch_v2(bootstrap, group, "b", epoch_b, topic_id))
        epoch_a, epoch_b = epoch_a + 1, epoch_b + 1
    assert got == [(1, 2, 2)]  # record 0 stayed a's
    # A renew-only ShareFetch: renews, fetches nothing (1-2 are b's now: refused).
    only = fetch_v2(bootstrap, group, "a", epoch_a, topic_id, renew=True,
                    acks=((0, 0, (RENEW,)),))
    assert only.error_code == ErrorCode.none
    assert (partition(only).acknowledge_error_code, _ranges(only)) == (ErrorCode.none, [])
    other = acknowledge(bootstrap, group, "a", epoch_a + 1, topic_id, ((1, 1, (RENEW,)),))
    assert partition(other).error_code == ErrorCode.invalid_record_state
    done = acknowledge(bootstrap, group, "a", epoch_a + 2, topic_id, ((0, 0, (ACCEPT,)),))
    assert partition(done).error_code == ErrorCode.none
    # Renewing never changed the state written: 0 accepted, 1-2 b's (lag 2).
    assert offsets(bootstrap, group, topic) == [(0, 1, 2, ErrorCode.none)]


def test_record_limit_acquires_exactly_max_records(bootstrap: str) -> None:
    topic, group = "sm-limit", "sm-limit-g"
    topic_id = _joined(bootstrap, topic, group, "a")
    for block in range(3):  # three blocks of four records: 0-3, 4-7, 8-11
        produce(bootstrap, topic, [(0, b"b%d-%d" % (block, i), None, []) for i in range(4)])
    first = fetch_v2(bootstrap, group, "a", 0, topic_id, mode=1, max_records=3)
    assert _ranges(first) == [(0, 2, 1)]
    assert partition(first).records  # the whole block sent: the client keeps 0-2
    second = fetch_v2(bootstrap, group, "a", 1, topic_id, mode=1, max_records=3)
    assert _ranges(second) == [(3, 5, 1)]  # across two blocks, as one range
    # Released 1-2, then one record: the head of that run only.
    third = fetch_v2(bootstrap, group, "a", 2, topic_id, mode=1, max_records=1,
                     acks=((1, 2, (RELEASE,)),))
    assert partition(third).acknowledge_error_code == ErrorCode.none
    assert _ranges(third) == [(1, 1, 2)]
    # Batch-optimized (mode 0): whole blocks, over max_records.
    assert _ranges(fetch_v2(bootstrap, group, "a", 3, topic_id, mode=0, max_records=1)) == [
        (2, 2, 2)]
    assert _ranges(fetch_v2(bootstrap, group, "a", 4, topic_id, mode=0, max_records=1)) == [
        (6, 7, 1)]
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none


def test_record_limit_bounds_the_whole_answer(bootstrap: str) -> None:
    topic, group = "sm-limit-two", "sm-limit-two-g"
    create_topic(bootstrap, topic, 2)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    [assigned] = heartbeat(bootstrap, group, "a", 0, (topic,)).assignment.topic_partitions
    assert sorted(assigned.partitions) == [0, 1]
    produce(bootstrap, topic, [(p, b"v%d" % i, None, []) for p in (0, 1) for i in range(4)])
    answer = fetch_v2(bootstrap, group, "a", 0, assigned.topic_id, mode=1, max_records=3,
                      partitions=(0, 1))
    # 3 records in all, whichever partitions they come from (8 are there).
    assert sum(last - first + 1 for first, last, _ in _ranges(answer)) == 3
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none


def test_v2_requests_the_broker_refuses(bootstrap: str) -> None:
    topic, group = "sm-bad", "sm-bad-g"
    topic_id = _joined(bootstrap, topic, group, "a")
    produce(bootstrap, topic, [(0, b"v%d" % i, None, []) for i in range(3)])
    assert _ranges(fetch_v2(bootstrap, group, "a", 0, topic_id)) == [(0, 2, 1)]
    no_mode = fetch_v2(bootstrap, group, "a", 1, topic_id, mode=7)
    assert no_mode.error_code == ErrorCode.invalid_request
    assert "ShareAcquireMode 7 is neither" in no_mode.error_message
    no_limit = fetch_v2(bootstrap, group, "a", 1, topic_id, mode=1, max_records=0)
    assert no_limit.error_code == ErrorCode.invalid_request
    # IsRenewAck with limits that are not 0: the whole request refused.
    schema: Any = load_request_schema(78, 2)
    module = sys.modules[schema.__module__]
    renew_with_limits = ask(bootstrap, 78, 2, schema(
        group_id=group, member_id="a", share_session_epoch=1,
        max_wait=datetime.timedelta(milliseconds=100), min_bytes=1, max_bytes=1 << 20,
        max_records=5, batch_size=5, share_acquire_mode=0, is_renew_ack=True,
        forgotten_topics_data=(), topics=(module.FetchTopic(topic_id=topic_id, partitions=(
            module.FetchPartition(partition_index=0, acknowledgement_batches=(
                module.AcknowledgementBatch(first_offset=0, last_offset=0,
                                            acknowledge_types=(RENEW,)),)),)),)))
    assert renew_with_limits.error_code == ErrorCode.invalid_request
    assert "must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0" in \
        renew_with_limits.error_message
    # RENEW (4) is no type of version 1; unknown types are refused in v2 too.
    assert partition(share_fetch(bootstrap, group, "a", 1, topic_id, ((0, 0, (RENEW,)),))
                     ).acknowledge_error_code == ErrorCode.invalid_request
    assert partition(acknowledge(bootstrap, group, "a", 2, topic_id, ((0, 0, (RENEW,)),),
                                 version=1)).error_code == ErrorCode.invalid_request
    assert partition(acknowledge(bootstrap, group, "a", 3, topic_id, ((0, 0, (5,)),))
                     ).error_code == ErrorCode.invalid_request
    # Renewing offsets not acquired (never fetched).
    assert partition(acknowledge(bootstrap, group, "a", 4, topic_id, ((7, 9, (RENEW,)),))
                     ).error_code == ErrorCode.invalid_record_state
    # The refusals changed nothing: the records are still a's, each once delivered.
    assert partition(acknowledge(bootstrap, group, "a", 5, topic_id, ((0, 2, (ACCEPT,)),))
                     ).error_code == ErrorCode.none
    assert offsets(bootstrap, group, topic) == [(0, 3, 0, ErrorCode.none)]
    assert heartbeat(bootstrap, group, "a", -1, None).error_code == ErrorCode.none
