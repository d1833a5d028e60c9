"""Regular-expression subscriptions of the consumer protocol (KIP-848) without a broker.

``check_regex`` accepts RE2 syntax (translated for Python's ``re``, see
test_re2_syntax.py) and refuses what RE2/J refuses with Kafka's message;
``ModernGroups`` resolves a member's regex against the topic names (whole
names, only those it may see), re-resolves at each refresh so a topic
created or deleted reaches the assignment, and answers
INVALID_REGULAR_EXPRESSION for a bad one.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, TopicNotFoundError
from broker.kafka.consumer_groups.modern import HeartbeatRequest, ModernConfig, ModernGroups
from broker.kafka.consumer_groups.modern_members import Partitions
from broker.kafka.consumer_groups.topic_regex import check_regex, matching
from tests.unit.broker.kafka.test_consumer_protocol import Classic, Records


@pytest.mark.parametrize("regex", [
    "^orders-.*", "orders-[0-9]+$", "(?i)ORDERS", "a|b", "x{2,5}", "x{3}", "[a-z.-]+",
    "(?P<name>a)b", r"\d+\.\w*", "(?:ab)*?", "[]a]", "[^]a]+", "{}", "a{", r"\A.*",
    # RE2 syntax Python's re lacks, translated (test_re2_syntax.py).
    r"\pL+", r"\p{Greek}", r"\PL", r"^\Qorders.eu\E", r"orders\z", "(?U)a+", "a(?i)b",
    "[[:alpha:]]", "[[:^digit:]]", "x{,3}", r"\12",
])
def test_re2_syntax_is_accepted(regex: str) -> None:
    assert check_regex(regex) is None


@pytest.mark.parametrize(("regex", "why"), [
    ("(orders", "missing closing ): `(orders`"),
    (r"(a)\1", "invalid escape sequence: `\\1`"),
    ("(?P<n>a)(?P=n)", "invalid or unsupported Perl syntax: `(?P`"),
    ("a(?=b)", "invalid or unsupported Perl syntax: `(?=`"),
    ("(?<!a)b", "invalid named capture"), ("(?>ab)", "invalid or unsupported Perl syntax"),
    ("(?#note)a", "invalid or unsupported Perl syntax"),
    ("a*+", "invalid nested repetition operator: `*+`"),
    ("a{2}+", "invalid nested repetition operator"),
    ("(?x)a b", "invalid or unsupported Perl syntax: `(?x`"),
    ("x{1001}", "invalid repeat count: `{1001}`"),
    ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
    (r"a\Z", "invalid escape sequence: `\\Z`"), (r"\C", "invalid escape sequence"),
    (r"\p{Klingon}", "invalid character class range: `\\p{Klingon}`"),
])
def test_what_re2_refuses_is_refused_with_kafkas_message(regex: str, why: str) -> None:
    message = check_regex(regex)
    assert message is not None
    assert message.startswith(f"SubscribedTopicRegex `{regex}` is not a valid regular "
                              "expression: ")
    assert why in message and message.endswith(".")


def test_a_topic_matches_by_its_whole_name() -> None:
    topics = ["orders-eu", "orders-us", "old-orders-eu", "orders"]
    assert matching("orders-.*", topics) == {"orders-eu", "orders-us"}
    assert matching("orders", topics) == {"orders"}
    assert matching("^orders-e.$", topics) == {"orders-eu"}
    assert matching(r"^\Qorders-\E\pL+", topics) == {"orders-eu", "orders-us"}
    assert matching(r"(?i)ORDERS-\p{Latin}U", topics) == {"orders-eu"}


class Topics:
    """Topics with four partitions each; ``failing`` makes the list unreadable."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)
        self.failing = False

    async def count(self, topic: str) -> int:
        if topic not in self.names:
            raise TopicNotFoundError(topic)
        return 4

    async def list(self) -> list[str]:
        if self.failing:
            raise BrokerError("topics not readable now")
        return sorted(self.names)


def _groups(topics: Topics, refresh_ms: int = 0) -> ModernGroups:
    return ModernGroups(topics.count, Records(), Classic(),
                        ModernConfig(metadata_refresh_ms=refresh_ms), names=topics.list)


def _join(member: str, regex: str, **fields: object) -> HeartbeatRequest:
    fields.setdefault("subscribed", ())
    return HeartbeatRequest(group_id="g", member_id=member, member_epoch=0,
                            rebalance_timeout_ms=30_000, regex=regex,
                            owned={}, **fields)  # type: ignore[arg-type]


def _beat(member: str, epoch: int, owned: Partitions) -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", member_id=member, member_epoch=epoch, owned=owned)


def _topics(assignment: Partitions | None) -> set[str]:
    assert assignment is not None
    return {topic for topic, numbers in assignment.items() if numbers}


async def test_a_regex_member_gets_the_matching_topics_and_later_ones() -> None:
    topics = Topics("orders-eu", "orders-us", "payments")
    groups = _groups(topics)
    joined = await groups.heartbeat(_join("a", "orders-.*"))
    assert joined.error is ErrorCode.none, joined
    assert _topics(joined.assignment) == {"orders-eu", "orders-us"}
    assert joined.member_epoch == 1
    # A topic created that matches is assigned at the next refresh; one that does not is not.
    topics.names |= {"orders-asia", "audit"}
    owned = {t: {0, 1, 2, 3} for t in ("orders-eu", "orders-us")}
    later = await groups.heartbeat(_beat("a", 1, owned))
    assert later.member_epoch == 2 and _topics(later.assignment) == {
        "orders-eu", "orders-us", "orders-asia"}
    # A deleted one is revoked (the member stops reporting it, then moves on).
    topics.names.discard("orders-us")
    owned["orders-asia"] = {0, 1, 2, 3}
    gone = await groups.heartbeat(_beat("a", 2, owned))
    assert gone.error is ErrorCode.none and _topics(gone.assignment) == {
        "orders-eu", "orders-asia"}
    group = groups.group("g")
    assert group is not None and group.members["a"].regex == "orders-.*"


async def test_regex_and_names_together_and_what_the_member_may_see() -> None:
    topics = Topics("orders-eu", "orders-secret", "payments")
    groups = _groups(topics)
    joined = await groups.heartbeat(_join("a", "orders-.*", subscribed=("payments",),
                                          topic_allowed=lambda t: t != "orders-secret"))
    assert _topics(joined.assignment) == {"orders-eu", "payments"}


async def test_unreadable_topics_keep_what_the_member_had() -> None:
    topics = Topics("orders-eu")
    groups = _groups(topics)
    joined = await groups.heartbeat(_join("a", "orders-.*"))
    assert _topics(joined.assignment) == {"orders-eu"}
    topics.failing = True
    again = await groups.heartbeat(_beat("a", 1, {"orders-eu": {0, 1, 2, 3}}))
    assert again.error is ErrorCode.none and again.member_epoch == 1
    group = groups.group("g")
    assert group is not None and group.members["a"].subscribed == {"orders-eu"}


async def test_no_refresh_before_its_round() -> None:
    topics = Topics("orders-eu")
    groups = _groups(topics, refresh_ms=60_000)
    await groups.heartbeat(_join("a", "orders-.*"))
    topics.names.add("orders-us")
    again = await groups.heartbeat(_beat("a", 1, {"orders-eu": {0, 1, 2, 3}}))
    assert again.member_epoch == 1 and again.assignment is None


async def test_a_bad_regex_is_invalid_regular_expression_and_none_is_invalid_request() -> None:
    groups = _groups(Topics("orders-eu"))
    bad = await groups.heartbeat(_join("a", "orders-(?=x)"))
    assert bad.error is ErrorCode.invalid_regular_expression
    assert bad.message is not None and "orders-(?=x)" in bad.message
    none = await groups.heartbeat(_join("a", ""))
    assert none.error is ErrorCode.invalid_request
    assert none.message == ("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                            "first request.")
