"""Kafka client quotas' rules (``broker.kafka.quotas``): entities, filters, precedence, rates.

Pure parts, no broker: what AlterClientQuotas refuses and with which code,
DescribeClientQuotas' filter as Kafka's ``ClientQuotasImage``, Kafka's
precedence of the eight entity levels and the usage tags each gives, the
sampled rate and throttle time on a chosen clock, and the per-client
counting of ``ClientQuotas``.
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.kafka.quotas.enforcer import ANONYMOUS, FETCH, PRODUCE, ClientQuotas
from broker.kafka.quotas.rate import MAX_THROTTLE_MS, Rate
from broker.kafka.quotas.table import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    USER,
    Entity,
    Filter,
    QuotaError,
    QuotaTable,
    check_entity,
    check_ops,
)

P = PRODUCER_BYTE_RATE


def _entity(user: str | bool | None = False, client: str | bool | None = False) -> Entity:
    """An entity: False leaves a component out, None is the default."""
    parts: list[tuple[str, str | None]] = []
    if client is not False:
        parts.append((CLIENT_ID, client if isinstance(client, str) else None))
    if user is not False:
        parts.append((USER, user if isinstance(user, str) else None))
    return check_entity(parts)


# ------------------------------------------------------------------ alter checks


@pytest.mark.parametrize(("components", "message"), [
    ([], "Invalid empty client quota entity"),
    ([(USER, "a"), (USER, "b")], "duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([("ip", "127.0.0.1"), (USER, "a")], "IP quota should not combine with user or clientId"),
    ([("ip", "somehost")], "somehost is not a valid IP address"),
    ([(CLIENT_ID, "")], "Empty client-id not supported"),
])
def test_entities_kafka_refuses_are_invalid_requests(
        components: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        check_entity(components)
    assert caught.value.code is ErrorCode.invalid_request
    assert message in caught.value.message


def test_an_entity_is_its_components_in_type_order() -> None:
    assert check_entity([(USER, "alice"), (CLIENT_ID, None)]) == (
        (CLIENT_ID, None), (USER, "alice"))


@pytest.mark.parametrize(("ops", "message"), [
    ([("request_percentage", 0.0, False)], "must be greater than 0"),
    ("connection_creation_rate", "Invalid configuration key connection_creation_rate"),
    ([("bogus", 1.0, False)], "Invalid configuration key bogus"),
    ([(P, 10.5, False)], "must be a Long value"),
    ([(P, float("inf"), False)], "must be a Long value"),
    ([(P, 0.0, False)], "must be greater than 0"),
    ([(P, -5.0, False)], "must be greater than 0"),
    ([(P, 5.0, False), (P, 6.0, False)], "Duplicate quota key"),
])
def test_ops_kafka_refuses_are_invalid_requests(ops: object, message: str) -> None:
    if isinstance(ops, str):
        ops = [(ops, 1.0, False)]
    with pytest.raises(QuotaError) as caught:
        check_ops(ops)  # type: ignore[arg-type]  # a list of tuples, or made one above
    assert caught.value.code is ErrorCode.invalid_request
    assert message in caught.value.message


def test_ops_set_whole_numbers_and_remove_any_key() -> None:
    assert check_ops([(P, 1024.0000001, False), (CONSUMER_BYTE_RATE, 0.0, True),
                      ("request_percentage", 0.0, True)]) == {
        P: 1024.0, CONSUMER_BYTE_RATE: None, "request_percentage": None}


def test_alterations_set_remove_and_drop_empty_entities() -> None:
    alice = _entity(user="alice")
    table = QuotaTable().altered(alice, {P: 100.0, CONSUMER_BYTE_RATE: 200.0})
    assert table.entries == {alice: {P: 100.0, CONSUMER_BYTE_RATE: 200.0}}
    table = table.altered(alice, {P: None, "request_percentage": None})
    assert table.entries == {alice: {CONSUMER_BYTE_RATE: 200.0}}
    assert table.altered(alice, {CONSUMER_BYTE_RATE: None}).entries == {}


def test_the_table_round_trips_through_its_bytes() -> None:
    table = (QuotaTable()
             .altered(_entity(user=None, client="c1"), {P: 10.0})
             .altered(_entity(client=None), {CONSUMER_BYTE_RATE: 20.0})
             .altered(_entity(user="u"), {P: 30.0, CONSUMER_BYTE_RATE: 40.0}))
    assert QuotaTable.decode(table.encode(), 7) == QuotaTable(table.entries, 7)
    assert QuotaTable.decode(b"", 3) == QuotaTable({}, 3)
    with pytest.raises(ValueError, match="not a client quota table"):
        QuotaTable.decode(b'{"format_version": 1, "entries": [{"entity": 5}]}', 1)


# ------------------------------------------------------------------ describe filters

_TABLE = (QuotaTable()
          .altered(_entity(user="alice"), {P: 1.0})
          .altered(_entity(user=None), {P: 2.0})
          .altered(_entity(user="alice", client="app"), {P: 3.0})
          .altered(_entity(user="alice", client=None), {P: 4.0})
          .altered(_entity(client="app"), {P: 5.0})
          .altered(_entity(client=None), {P: 6.0}))


def _described(components: list[tuple[str, int, str | None]], strict: bool) -> list[float]:
    return sorted(values[P] for _, values in _TABLE.describe(Filter.of(components, strict)))


@pytest.mark.parametrize(("components", "strict", "values"), [
    ([], False, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    ([], True, []),
    ([(USER, 0, "alice")], False, [1.0, 3.0, 4.0]),
    ([(USER, 0, "alice")], True, [1.0]),
    ([(USER, 1, None)], False, [2.0]),
    ([(USER, 2, None)], False, [1.0, 3.0, 4.0]),
    ([(USER, 2, None)], True, [1.0]),
    ([(CLIENT_ID, 2, None)], False, [3.0, 5.0]),
    ([(USER, 0, "alice"), (CLIENT_ID, 1, None)], True, [4.0]),
    ([(USER, 0, "alice"), (CLIENT_ID, 2, None)], False, [3.0]),
    ([(CLIENT_ID, 1, None)], True, [6.0]),
    ([("ip", 2, None)], False, []),
])
def test_describe_filters_as_kafka(components: list[tuple[str, int, str | None]],
                                   strict: bool, values: list[float]) -> None:
    assert _described(components, strict) == values


@pytest.mark.parametrize(("components", "code"), [
    ([("", 0, "x")], ErrorCode.invalid_request),
    ([(USER, 0, "a"), (USER, 2, None)], ErrorCode.invalid_request),
    ([("group", 0, "g")], ErrorCode.unsupported_version),
    ([(USER, 0, None)], ErrorCode.invalid_request),
    ([(USER, 1, "x")], ErrorCode.invalid_request),
    ([(USER, 2, "x")], ErrorCode.invalid_request),
    ([(USER, 7, None)], ErrorCode.invalid_request),
    ([("ip", 2, None), (USER, 2, None)], ErrorCode.invalid_request),
])
def test_filters_kafka_refuses(components: list[tuple[str, int, str | None]],
                               code: ErrorCode) -> None:
    with pytest.raises(QuotaError) as caught:
        Filter.of(components, False)
    assert caught.value.code is code


# ------------------------------------------------------------------ precedence

#: Kafka's order, most specific first, each with the usage tags it gives
#: client ``app`` of user ``alice``.
_LEVELS = [
    (_entity(user="alice", client="app"), ("alice", "app")),
    (_entity(user="alice", client=None), ("alice", "app")),
    (_entity(user="alice"), ("alice", "")),
    (_entity(user=None, client="app"), ("alice", "app")),
    (_entity(user=None, client=None), ("alice", "app")),
    (_entity(user=None), ("alice", "")),
    (_entity(client="app"), ("", "app")),
    (_entity(client=None), ("", "app")),
]


def test_the_most_specific_entity_with_the_key_wins_in_kafkas_order() -> None:
    table = QuotaTable()
    for value, (entity, _) in enumerate(_LEVELS, start=1):
        table = table.altered(entity, {P: float(value)})
    # Another key elsewhere changes nothing for this one.
    table = table.altered(_entity(user="alice", client="app"), {CONSUMER_BYTE_RATE: 99.0})
    for value, (entity, tags) in enumerate(_LEVELS, start=1):
        assert table.resolve(P, "alice", "app") == (float(value), tags), entity
        table = table.altered(entity, {P: None})
    assert table.resolve(P, "alice", "app") is None
    assert table.resolve(CONSUMER_BYTE_RATE, "alice", "app") == (99.0, ("alice", "app"))


def test_named_entities_match_only_their_names() -> None:
    table = QuotaTable().altered(_entity(user="bob", client="app"), {P: 1.0})
    assert table.resolve(P, "alice", "app") is None
    assert table.resolve(P, "bob", "other") is None


# ------------------------------------------------------------------ rates


def test_a_first_burst_is_spread_over_ten_windows() -> None:
    rate = Rate(0.0)
    rate.record(4_000, 0.0)
    assert rate.measure(0.0) == 400.0
    assert rate.throttle_ms(500.0, 0.0) == 0
    rate.record(6_000, 0.5)
    # 10,000 bytes over 10.5 s: (952.4 - 500) / 500 * 10.5 s.
    assert rate.throttle_ms(500.0, 0.5) == 9_500


def test_the_throttle_time_is_kafkas_formula() -> None:
    rate = Rate(0.0)
    rate.record(10_000, 0.0)
    assert rate.throttle_ms(500.0, 0.0) == 10_000  # (1,000/s - 500/s) / 500/s * 10 s
    assert rate.throttle_ms(1_000.0, 0.0) == 0  # at the quota is within it
    # Over a longer window: (10,000 B / 10.5 s - 500/s) / 500/s * 10.5 s.
    assert rate.throttle_ms(500.0, 10.5) == 9_500


def test_the_throttle_time_fits_the_int32_field() -> None:
    rate = Rate(0.0)
    rate.record(64 * 2**20, 0.0)
    assert rate.throttle_ms(1.0, 0.0) == MAX_THROTTLE_MS


def test_samples_older_than_the_window_count_for_nothing() -> None:
    rate = Rate(0.0)
    rate.record(100_000, 0.0)
    assert not rate.idle(5.0)
    assert rate.idle(11.0)
    assert rate.measure(11.0) == 0.0
    assert rate.throttle_ms(1.0, 11.0) == 0


def test_samples_rotate_through_the_window() -> None:
    rate = Rate(0.0)
    for second in range(30):
        rate.record(100, float(second))
    # Eleven samples of 100 bytes, the oldest started at 19 s.
    assert rate.measure(29.5) == pytest.approx(1_100 / 10.5)


# ------------------------------------------------------------------ per client


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_quota_counts_nothing() -> None:
    quotas = ClientQuotas(lambda: QuotaTable().altered(_entity(user="x"), {P: 1.0}))
    assert quotas.record(PRODUCE, "alice", "app", 10**9) == 0
    assert quotas.record(FETCH, "x", "app", 10**9) == 0  # a produce quota only
    assert quotas.rates() == 0


def test_a_user_quota_is_shared_by_its_clients_and_a_default_is_each_ones_own() -> None:
    table = (QuotaTable().altered(_entity(user="alice"), {P: 100.0})
             .altered(_entity(client=None), {P: 100.0}))
    clock = _Clock()
    quotas = ClientQuotas(lambda: table, clock)
    assert quotas.record(PRODUCE, "alice", "one", 600) == 0
    # 1,200 B over 10 s, shared: (120/s - 100/s) / 100/s * 10 s.
    assert quotas.record(PRODUCE, "alice", "two", 600) == 2_000
    # Unauthenticated clients are user ANONYMOUS: the client-id default, one usage each.
    assert quotas.record(PRODUCE, None, "three", 600) == 0
    assert quotas.record(PRODUCE, None, "four", 600) == 0
    assert quotas.rates() == 3
    assert ClientQuotas(lambda: QuotaTable().altered(_entity(user=ANONYMOUS), {P: 1.0}),
                        clock).record(PRODUCE, None, None, 100) > 0


def test_one_answer_is_bounded_by_what_the_quota_window_holds() -> None:
    table = QuotaTable().altered(_entity(client="app"), {CONSUMER_BYTE_RATE: 1000.0})
    quotas = ClientQuotas(lambda: table, _Clock())
    assert quotas.window_bytes(FETCH, None, "app") == 10_000  # Kafka: quota x 10 s
    assert quotas.window_bytes(FETCH, None, "other") is None
    assert quotas.window_bytes(PRODUCE, None, "app") is None
