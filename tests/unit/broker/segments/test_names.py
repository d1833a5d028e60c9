"""Topic and segment names."""

from __future__ import annotations

import pytest

from broker.errors import NoSuchSegmentError, TopicNameError
from broker.segments.names import (
    LEGACY_SYSTEM_TOPICS,
    check_topic_name,
    is_system_topic,
    make_segment_name,
    parse_segment_name,
)


# Every name Kafka's Topic.validate accepts: [a-zA-Z0-9._-], 1 to 249, not "." or "..".
@pytest.mark.parametrize("name", [
    "a", "orders", "A.b-c_d9", "-x", "9", "x" * 249, "_schemas", "_confluent-metrics",
    ".hidden", "...", "_", "-", "__consumer_offsets", "__transaction_state", "__folio",
    "_folio_x", "a.b", "a_b", "_" * 249])
def test_good_topic_names(name: str) -> None:
    check_topic_name(name)
    assert not is_system_topic(name)


@pytest.mark.parametrize(("name", "message"), [
    ("", "topic name must be 1 to 249 characters, got 0"),
    ("x" * 250, "topic name must be 1 to 249 characters, got 250"),
    (".", "topic name cannot be '.'"),
    ("..", "topic name cannot be '..'"),
    ("a/b", "topic name 'a/b' may only hold characters of [A-Za-z0-9._-]"),
    ("a b", "topic name 'a b' may only hold characters of [A-Za-z0-9._-]"),
    ("é", "topic name 'é' may only hold characters of [A-Za-z0-9._-]"),
    ("a:b", "topic name 'a:b' may only hold characters of [A-Za-z0-9._-]"),
])
def test_bad_topic_names(name: str, message: str) -> None:
    with pytest.raises(TopicNameError) as raised:
        check_topic_name(name)
    assert str(raised.value) == message


@pytest.mark.parametrize("name", ["__folio_txnlog", "__folio_", *sorted(LEGACY_SYSTEM_TOPICS)])
def test_system_names_only_internal(name: str) -> None:
    assert is_system_topic(name)
    check_topic_name(name, internal=True)
    with pytest.raises(TopicNameError, match="reserved for Folio's system topics"):
        check_topic_name(name)


def test_the_system_topics_of_earlier_builds_are_still_system_topics() -> None:
    """The names the broker's components use are the ones earlier builds wrote."""
    from broker.cluster.containers import KAFKA_OFFSETS_TOPIC, SNAPSHOT_TOPIC  # noqa: PLC0415
    from broker.kafka.consumer_groups.offsets import OFFSETS_TOPIC  # noqa: PLC0415
    from broker.kafka.txns.records import TXN_STATE_TOPIC  # noqa: PLC0415
    from broker.txn.commit_keys import COMMIT_KEYS_TOPIC  # noqa: PLC0415
    from broker.txn.states import TXN_LOG_TOPIC  # noqa: PLC0415

    used = {TXN_LOG_TOPIC, COMMIT_KEYS_TOPIC, SNAPSHOT_TOPIC, KAFKA_OFFSETS_TOPIC,
            OFFSETS_TOPIC, TXN_STATE_TOPIC}
    assert used == LEGACY_SYSTEM_TOPICS == {
        "_txnlog", "_txncommitkeys", "_txnbuffer_snapshots", "_kafka_offsets",
        "_kafka_txn_state"}


def test_segment_names_round_trip() -> None:
    assert make_segment_name("orders", 12) == "orders/12"
    assert parse_segment_name("orders/12") == ("orders", 12)
    assert parse_segment_name("_txnlog/0") == ("_txnlog", 0)
    assert parse_segment_name(".hidden/3") == (".hidden", 3)
    assert parse_segment_name("_schemas/0") == ("_schemas", 0)


@pytest.mark.parametrize("name", ["orders", "orders/", "/1", "orders/x", "orders/01",
                                  "orders/-1", "a/b/1", "./1", "../1", "orders/1/"])
def test_bad_segment_names(name: str) -> None:
    with pytest.raises(NoSuchSegmentError) as raised:
        parse_segment_name(name)
    assert raised.value.segment == name
