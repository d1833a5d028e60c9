"""Kafka's request time, controller mutation and connection quotas (``broker.kafka.quotas``).

Pure parts on a chosen clock, no broker: the keys each entity type takes,
the ip entity's lookup, the request quota's percentage and its one-window
bound, KIP-599's token bucket and its strict and permissive requests, the
per-IP connection rate and counts and the broker's cap, and the timing of a
handler's steps (waits not counted).
"""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from broker.broker_config import BrokerConfig
from broker.kafka.quotas.connections import ConnectionQuotas
from broker.kafka.quotas.enforcer import REQUEST, ClientQuotas
from broker.kafka.quotas.mutations import ControllerMutations, MutationQuota
from broker.kafka.quotas.rate import TokenBucket
from broker.kafka.quotas.table import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaError,
    QuotaTable,
    check_entity,
    check_ops,
)
from broker.kafka.quotas.timing import StepTimer


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


_CLIENT = check_entity([(CLIENT_ID, "app")])
_LOCAL = check_entity([(IP, "127.0.0.2")])
_DEFAULT_IP = check_entity([(IP, None)])

# ------------------------------------------------------------------ keys per entity type


def test_each_entity_type_takes_its_own_keys() -> None:
    assert check_ops([(REQUEST_PERCENTAGE, 12.5, False), (CONTROLLER_MUTATION_RATE, 0.5, False)],
                     _CLIENT) == {REQUEST_PERCENTAGE: 12.5, CONTROLLER_MUTATION_RATE: 0.5}
    assert check_ops([(CONNECTION_CREATION_RATE, 5.0, False)], _LOCAL) == {
        CONNECTION_CREATION_RATE: 5.0}
    for ops, entity, message in [
        ([(PRODUCER_BYTE_RATE, 5.0, False)], _LOCAL, "Invalid configuration key"),
        ([(CONNECTION_CREATION_RATE, 5.0, False)], _CLIENT, "Invalid configuration key"),
        ([(CONNECTION_CREATION_RATE, 2.5, False)], _LOCAL, "must be a Integer value"),
        ([(CONNECTION_CREATION_RATE, 2.0**31, False)], _LOCAL, "too large for a INT"),
        ([(REQUEST_PERCENTAGE, float("nan"), False)], _CLIENT, "must be a Double value"),
        ([(CONTROLLER_MUTATION_RATE, -1.0, False)], _CLIENT, "must be greater than 0"),
    ]:
        with pytest.raises(QuotaError) as caught:
            check_ops(ops, entity)
        assert caught.value.code is ErrorCode.invalid_request
        assert message in caught.value.message, (ops, caught.value.message)


def test_an_ip_entity_is_an_address_alone() -> None:
    assert check_entity([(IP, "::1")]) == ((IP, "::1"),)
    assert check_entity([(IP, None)]) == ((IP, None),)
    for components in ([(IP, "10.0.0.1"), (CLIENT_ID, None)], [(USER, "u"), (IP, None)]):
        with pytest.raises(QuotaError, match="IP quota should not combine"):
            check_entity(components)


def test_an_address_has_its_own_quota_else_the_default_ips() -> None:
    table = QuotaTable().altered(check_entity([(IP, "0:0::1")]), {CONNECTION_CREATION_RATE: 3.0})
    assert table.resolve_ip("::1") == (3.0, "::1")  # compared as addresses
    assert table.resolve_ip("127.0.0.1") is None
    table = table.altered(_DEFAULT_IP, {CONNECTION_CREATION_RATE: 7.0})
    assert table.resolve_ip("127.0.0.1") == (7.0, "127.0.0.1")
    assert table.resolve_ip("::1") == (3.0, "::1")


# ------------------------------------------------------------------ request time


def test_request_time_is_a_percentage_of_one_thread_bounded_by_one_window() -> None:
    table = QuotaTable().altered(_CLIENT, {REQUEST_PERCENTAGE: 10.0})
    clock = _Clock()
    quotas = ClientQuotas(lambda: table, clock)
    assert quotas.counts(REQUEST)
    assert not quotas.counts(PRODUCER_BYTE_RATE)
    # 0.5 s of one thread (50 percent-seconds) over the 10 s minimum window: 5 %.
    assert quotas.record(REQUEST, None, "app", 0.5 * 100) == 0
    # 1.2 s in all: 12 % against 10 %: (12 - 10) / 10 x 10 s = 2 s, bounded by 1 s.
    assert quotas.record(REQUEST, None, "app", 0.7 * 100) == 1_000
    assert quotas.record(REQUEST, None, "other", 5 * 100) == 0  # no quota: not counted
    clock.now += 0.9
    # 1.25 s over 10.9 s is 11.5 %: (11.47 - 10) / 10 x 10.9 s = 1.6 s, still bounded.
    assert quotas.record(REQUEST, None, "app", 0.05 * 100) == 1_000
    clock.now += 11.0
    assert quotas.record(REQUEST, None, "app", 0.1 * 100) == 0  # the old samples expired


def test_a_timed_handler_counts_its_steps_not_its_waits() -> None:
    clock = _Clock()

    async def handler(ready: asyncio.Event) -> str:
        clock.now += 1.0  # a step's work
        await ready.wait()
        clock.now += 2.0  # the next step's
        return "answer"

    async def run() -> tuple[str, float]:
        ready = asyncio.Event()
        timer = StepTimer(handler(ready), clock)
        task = asyncio.ensure_future(timer)
        await asyncio.sleep(0)  # the handler's first step, then its wait
        clock.now += 100.0  # the loop serves others meanwhile: not this request's time
        ready.set()
        return await task, timer.seconds

    assert asyncio.run(run()) == ("answer", 3.0)


def test_a_timed_handler_is_cancelled_as_any_coroutine() -> None:
    cancelled: list[bool] = []

    async def handler() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def run() -> None:
        task = asyncio.ensure_future(StepTimer(handler()))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(run())
    assert cancelled == [True]


# ------------------------------------------------------------------ token bucket (KIP-599)


def test_the_bucket_starts_full_with_ten_seconds_of_tokens_and_refills_at_the_quota() -> None:
    bucket = TokenBucket(2.0, 0.0)
    assert bucket.tokens(2.0, 0.0) == 20.0  # (11 - 1) x 1 s x 2/s
    bucket.record(2.0, 26.0, 0.0)
    assert bucket.tokens(2.0, 0.0) == -6.0
    assert bucket.throttle_ms(2.0, 0.0) == 3_000  # -(-6) / 2/s
    assert bucket.throttle_ms(2.0, 1.0) == 2_000
    assert bucket.throttle_ms(2.0, 3.0) == 0
    assert not bucket.full(2.0, 3.0)
    assert bucket.full(2.0, 13.0)  # never above the burst
    assert bucket.tokens(2.0, 100.0) == 20.0


def _mutations(rate: float = 1.0) -> tuple[ControllerMutations, _Clock]:
    table = QuotaTable().altered(_CLIENT, {CONTROLLER_MUTATION_RATE: rate})
    clock = _Clock()
    return ControllerMutations(lambda: table, clock), clock


def test_a_strict_request_takes_a_topic_while_tokens_last_then_refuses() -> None:
    mutations, clock = _mutations()
    quota = mutations.quota(None, "app", strict=True)
    assert quota.admit(12)  # 10 tokens: a whole topic goes, the bucket at -2
    assert quota.throttle_ms == 0
    assert not quota.admit(1)  # THROTTLING_QUOTA_EXCEEDED
    assert quota.throttle_ms == 2_000
    assert quota.throttle_time().total_seconds() == 2.0
    clock.now += 2.0
    again = mutations.quota(None, "app", strict=True)
    assert again.admit(1)  # back at 0: accepted, now at -1
    assert not again.admit(1)
    assert mutations.buckets() == 1


def test_a_permissive_request_takes_every_topic_and_throttles() -> None:
    mutations, _ = _mutations()
    quota = mutations.quota(None, "app", strict=False)
    assert quota.admit(8) and quota.throttle_ms == 0
    assert quota.admit(8)  # -6: still done, throttled 6 s
    assert quota.throttle_ms == 6_000


def test_clients_without_a_mutation_quota_are_unbounded() -> None:
    mutations, _ = _mutations()
    quota = mutations.quota("someone", "other", strict=True)
    assert all(quota.admit(1_000) for _ in range(10))
    assert quota.throttle_ms == 0 and mutations.buckets() == 0
    assert MutationQuota().admit(10**6)


# ------------------------------------------------------------------ connections


def _admit(gate: ConnectionQuotas, address: str) -> tuple[bool, int, str]:
    admission = asyncio.run(gate.enter(address))
    return admission.admitted, admission.close_after_ms, admission.reason


def test_connections_over_the_ip_rate_are_closed_after_a_delay() -> None:
    table = (QuotaTable().altered(_LOCAL, {CONNECTION_CREATION_RATE: 1.0})
             .altered(_DEFAULT_IP, {CONNECTION_CREATION_RATE: 100.0}))
    clock = _Clock()
    gate = ConnectionQuotas(lambda: table, clock=clock)
    # 1/s over the 10 s minimum window: ten connections at once, not eleven.
    assert [_admit(gate, "127.0.0.2")[0] for _ in range(10)] == [True] * 10
    assert _admit(gate, "127.0.0.2") == (False, 1_000, "ip_rate")  # bounded by one window
    assert gate.count("127.0.0.2") == 10  # the refused one is not counted open
    assert _admit(gate, "127.0.0.3")[0]  # another address: the default ip's quota
    clock.now += 12.0
    assert _admit(gate, "127.0.0.2")[0]


def test_connections_over_the_per_ip_count_are_closed_at_once_until_one_leaves() -> None:
    gate = ConnectionQuotas(QuotaTable, max_per_ip=2, per_ip_overrides={"127.0.0.9": 0})
    assert _admit(gate, "10.0.0.1")[0] and _admit(gate, "10.0.0.1")[0]
    assert _admit(gate, "10.0.0.1") == (False, 0, "ip_max")
    assert _admit(gate, "127.0.0.9") == (False, 0, "ip_max")
    gate.leave("10.0.0.1")
    assert _admit(gate, "10.0.0.1")[0]
    assert gate.total == 2


def test_at_the_broker_cap_a_connection_waits_for_a_slot() -> None:
    async def run() -> None:
        gate = ConnectionQuotas(QuotaTable, max_connections=1)
        assert (await gate.enter("10.0.0.1")).admitted
        waiting = asyncio.ensure_future(gate.enter("10.0.0.2"))
        for _ in range(3):
            await asyncio.sleep(0)  # its turns: it stays waiting
        assert not waiting.done()
        gate.leave("10.0.0.1")
        assert (await waiting).admitted
        assert (gate.total, gate.count("10.0.0.2")) == (1, 1)

    asyncio.run(run())


def test_the_connection_settings_are_checked() -> None:
    config = BrokerConfig(kafka_max_connections_per_ip_overrides="127.0.0.1:3, ::1:0,")
    assert config.kafka_connection_overrides() == {"127.0.0.1": 3, "::1": 0}
    for bad, message in [
        ({"kafka_max_connections_per_ip_overrides": "localhost:3"}, "'localhost:3' is not"),
        ({"kafka_max_connections_per_ip_overrides": "10.0.0.1:-1"}, "'10.0.0.1:-1' is not"),
        ({"kafka_max_connections_per_ip_overrides": "10.0.0.1"}, "'10.0.0.1' is not"),
        ({"kafka_max_connections": 0}, "kafka_max_connections must be positive"),
        ({"kafka_max_connections_per_ip": -1}, "kafka_max_connections_per_ip must be >= 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            BrokerConfig(**bad)  # type: ignore[arg-type]  # each a field of its own type
