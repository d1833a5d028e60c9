"""Topic and segment names."""

from __future__ import annotations

import pytest

from broker.errors import NoSuchSegmentError, TopicNameError
from broker.segments.names import check_topic_name, make_segment_name, parse_segment_name


@pytest.mark.parametrize("name", ["a", "orders", "A.b-c_d9", "-x", "9", "x" * 249])
def test_good_topic_names(name: str) -> None:
    check_topic_name(name)


@pytest.mark.parametrize("name", ["", "x" * 250, ".hidden", "_sys", "a/b", "a b", "é", "a:b"])
def test_bad_topic_names(name: str) -> None:
    with pytest.raises(TopicNameError):
        check_topic_name(name)


def test_system_names_only_internal() -> None:
    check_topic_name("_txnlog", internal=True)
    with pytest.raises(TopicNameError, match="reserved"):
        check_topic_name("_txnlog")
    with pytest.raises(TopicNameError):
        check_topic_name(".x", internal=True)


def test_segment_names_round_trip() -> None:
    assert make_segment_name("orders", 12) == "orders/12"
    assert parse_segment_name("orders/12") == ("orders", 12)
    assert parse_segment_name("_txnlog/0") == ("_txnlog", 0)


@pytest.mark.parametrize("name", ["orders", "orders/", "/1", "orders/x", "orders/01",
                                  "orders/-1", "a/b/1", ".x/1", "orders/1/"])
def test_bad_segment_names(name: str) -> None:
    with pytest.raises(NoSuchSegmentError) as raised:
        parse_segment_name(name)
    assert raised.value.segment == name
