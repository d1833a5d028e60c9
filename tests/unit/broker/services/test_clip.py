"""``broker.clip`` and ``broker.services.request_names``: short echoes, exact name rules."""

from __future__ import annotations

import json

import pytest

from broker.clip import MAX_MESSAGE_CHARS, clip, clip_context, clip_context_json, clip_message
from broker.errors import InvalidArgumentError, TopicNameError, TopicNotFoundError
from broker.services.request_names import check_request_names
from broker.status import status_for, trailing_metadata_for
from folio.api.v1 import admin_pb2, groups_pb2, transactions_pb2


def test_clip_keeps_short_values_and_cuts_long_ones() -> None:
    assert clip("abc") == "abc"
    assert clip("x" * 100) == "x" * 64 + "…(100 chars)"


def test_messages_quote_a_prefix_once_and_stay_bounded() -> None:
    name = "n" * 20_000
    assert clip_message(f"topic {name!r} does not exist", {"topic": name}) \
        == f"topic '{'n' * 64}…(20000 chars)' does not exist"
    assert clip_message(f"bad value {'y' * 5000}") == f"bad value {'y' * 64}…(5000 chars)"
    assert len(clip_message("word " * 10_000)) <= MAX_MESSAGE_CHARS + 20


def test_contexts_are_clipped_value_by_value() -> None:
    assert clip_context({"segment": "s" * 70, "offset": 3, "names": ["a"] * 100}) == {
        "segment": "s" * 64 + "…(70 chars)", "offset": 3,
        "names": ["a"] * 64 + ["…(100 items)"]}
    assert json.loads(clip_context_json(json.dumps({"k": "v" * 80}))) == {
        "k": "v" * 64 + "…(80 chars)"}


def test_status_and_metadata_of_an_error_echoing_a_huge_name_are_small() -> None:
    error = TopicNotFoundError("t" * 10_000_000)
    code, message = status_for(error)
    assert code.name == "NOT_FOUND"
    assert len(message) < 200
    context = dict(trailing_metadata_for(error))["folio-error-context"]
    assert len(context) < 200


@pytest.mark.parametrize(("request_message", "error", "text"), [
    (admin_pb2.GetTopicRequest(name="t" * 250), TopicNameError,
     "topic name must be 1 to 249 characters, got 250"),
    (admin_pb2.GetSegmentInfoRequest(segment="t" * 261), InvalidArgumentError,
     "segment name must be 1 to 260 characters, got 261"),
    (groups_pb2.GetReaderGroupRequest(name="g" * 257), InvalidArgumentError,
     "reader group name must be 1 to 256 characters, got 257"),
    (groups_pb2.CreateReaderGroupRequest(name="g", state=groups_pb2.ReaderGroupState(
        topics=["ok", "t" * 300])), TopicNameError,
     "topic name must be 1 to 249 characters, got 300"),
    (transactions_pb2.BeginTxnRequest(label="l" * 1025), InvalidArgumentError,
     "transaction label must be at most 256 bytes of UTF-8, got 1025 characters"),
])
def test_request_names_too_long_are_refused_by_rule(
        request_message: object, error: type[Exception], text: str) -> None:
    with pytest.raises(error) as raised:
        check_request_names(request_message)
    assert str(raised.value) == text


def test_names_within_the_rules_pass() -> None:
    check_request_names(admin_pb2.GetTopicRequest(name="t" * 249))
    check_request_names(admin_pb2.GetSegmentInfoRequest(segment="t" * 249 + "/4294967295"))
    # The domain checks labels in bytes: 257 ASCII characters pass the edge.
    check_request_names(transactions_pb2.BeginTxnRequest(label="l" * 257))


def test_prose_between_two_short_quoted_names_is_left_whole() -> None:
    message = ("topic '_txnlog' is internal to the broker: DeleteTopic is refused (topics "
               "whose names start with '_' hold the broker's own state)")
    assert clip_message(message) == message
    long_value = "x" * 500
    assert clip_message(f"group {long_value!r} with prose after it") == (
        f"group '{'x' * 64}…(500 chars)' with prose after it")
