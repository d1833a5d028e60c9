"""Delegation tokens' parts: the store (compare-and-set, the sweep), lifetimes, SCRAM by token,
and the handlers' refusals on a broker without a secret.

A real RocksDB metadata store in a temp dir and an injected clock; the SCRAM
side runs kafka-python's client against ``ScramServer`` with the
``ScramLookup`` the listener uses, with and without Kafka's ``tokenauth``
extension.
"""

from __future__ import annotations

import base64
import datetime
import hmac
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from kafka.net.sasl.scram import ScramClient
from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.delegation_tokens import ROWS
from broker.kafka.messages import build, request_class
from broker.kafka.sasl.credentials import ScramCredentialStore
from broker.kafka.sasl.delegation import (
    DelegationToken,
    DelegationTokens,
    DelegationTokenStore,
    TokenPrincipal,
)
from broker.kafka.sasl.scram import ScramError, ScramServer, make_credential
from broker.kafka.sasl.security import KafkaSecurity
from broker.kafka.sasl.token_login import ScramLookup
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from ledger.security.tokens import Principal

SECRET = b"unit-delegation-secret"
HOUR_MS = 3_600_000


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000_000.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RocksDBMetadataStore]:
    made = RocksDBMetadataStore(str(tmp_path / "metadata"))
    yield made
    await made.close()


def _tokens(store: RocksDBMetadataStore, clock: Clock) -> DelegationTokens:
    return DelegationTokens(DelegationTokenStore(store), SECRET, max_lifetime_ms=10 * HOUR_MS,
                            expiry_time_ms=HOUR_MS, sweep_interval_ms=HOUR_MS, clock=clock)


async def test_lifetimes_hmac_and_lookup_by_hmac(store: RocksDBMetadataStore) -> None:
    clock = Clock()
    tokens = _tokens(store, clock)
    token = tokens.new_token("alice", "alice", ("bob", "bob"), -1)
    now = 1_000_000_000
    assert (token.issue_ms, token.expiry_ms, token.max_ms) == (now, now + HOUR_MS,
                                                               now + 10 * HOUR_MS)
    assert token.renewers == ("bob",) and len(token.token_id) == 22
    short = tokens.new_token("alice", "alice", (), HOUR_MS // 2)
    assert short.expiry_ms == short.max_ms == now + HOUR_MS // 2
    assert tokens.hmac(token.token_id) == hmac.digest(SECRET, token.token_id.encode(), "sha512")
    await tokens.store.create(token)
    await tokens.store.create(short)
    assert await tokens.by_hmac(tokens.hmac(token.token_id)) == token
    assert await tokens.by_hmac(b"\x00" * 64) is None
    assert await tokens.store.get("../scram") is None  # never a path


async def test_change_applies_by_compare_and_set_and_refusals_write_nothing(
        store: RocksDBMetadataStore) -> None:
    tokens = _tokens(store, Clock())
    token = tokens.new_token("alice", "alice", (), -1)
    await tokens.store.create(token)
    renewed = await tokens.store.change(
        token.token_id, lambda t: DelegationToken(t.token_id, t.owner, t.requester, t.renewers,
                                                  t.issue_ms, t.expiry_ms + 5, t.max_ms))
    assert renewed is not None and renewed.expiry_ms == token.expiry_ms + 5

    def refuse(_token: DelegationToken) -> DelegationToken:
        raise LookupError("refused")

    with pytest.raises(LookupError):
        await tokens.store.change(token.token_id, refuse)
    stored = await tokens.store.get(token.token_id)
    assert stored is not None and stored.version == renewed.version
    assert await tokens.store.change(token.token_id, lambda _t: None) is None  # deleted
    assert await tokens.store.get(token.token_id) is None
    assert await tokens.store.change(token.token_id, lambda t: t) is None  # gone: unedited


async def test_the_sweep_deletes_expired_tokens_only_and_never_a_renewed_one(
        store: RocksDBMetadataStore) -> None:
    clock = Clock()
    tokens = _tokens(store, clock)
    fresh, dead = (tokens.new_token("alice", "alice", (), -1) for _ in range(2))
    live = DelegationToken(fresh.token_id, "alice", "alice", (), fresh.issue_ms,
                           fresh.issue_ms + 5 * HOUR_MS, fresh.max_ms)
    await tokens.store.create(live)
    await tokens.store.create(DelegationToken(dead.token_id, "alice", "alice", (), 0, 1, 2))
    await tokens.maybe_sweep()  # the first sweep comes one interval after start
    assert len(await tokens.store.all()) == 2
    clock.now_s += HOUR_MS / 1000
    await tokens.maybe_sweep()
    assert [t.token_id for t in await tokens.store.all()] == [live.token_id]
    # A token read expired but renewed before the delete: the delete loses, the token stays.
    read = await tokens.store.get(live.token_id)
    assert read is not None
    await tokens.store.change(live.token_id, lambda t: t)  # another broker's renewal
    stale = _StaleStore(store, [DelegationToken(read.token_id, read.owner, read.requester,
                                                read.renewers, read.issue_ms, 0, read.max_ms,
                                                read.version)])
    assert await stale.sweep(int(clock.now_s * 1000)) == 0
    assert await tokens.store.get(live.token_id) is not None


class _StaleStore(DelegationTokenStore):
    """A store whose list is an earlier read (the sweep's, before another broker renewed)."""

    def __init__(self, store: RocksDBMetadataStore, read: list[DelegationToken]) -> None:
        super().__init__(store)
        self._read = read

    async def all(self) -> list[DelegationToken]:
        return self._read


def _exchange(user: str, password: str, *, tokenauth: bool,
              mechanism: str = "SCRAM-SHA-512") -> tuple[ScramServer, ScramClient, bytes]:
    client = ScramClient(user, password, mechanism)
    first = client.first_message()
    if tokenauth:
        first += b",tokenauth=true"
        client.auth_message += b",tokenauth=true"
    return ScramServer(mechanism), client, first


async def _authenticate(lookup: ScramLookup, user: str, password: str, *,
                        tokenauth: bool) -> Principal | None:
    server, client, first = _exchange(user, password, tokenauth=tokenauth)
    name = server.first(first)
    assert server.extensions == ({"tokenauth": "true"} if tokenauth else {})
    credential = await lookup.credential(name, server.mechanism, server.extensions)
    client.process_server_first_message(server.use(credential))
    client.process_server_final_message(server.final(client.final_message()))
    return lookup.principal(name)


async def test_scram_with_a_token_as_its_owner_with_or_without_the_extension(
        store: RocksDBMetadataStore) -> None:
    clock = Clock()
    tokens = _tokens(store, clock)
    scram = ScramCredentialStore(store)
    token = tokens.new_token("alice", "admin", (), -1)
    await tokens.store.create(token)
    password = base64.b64encode(tokens.hmac(token.token_id)).decode()
    for tokenauth in (True, False):  # librdkafka cannot send the extension
        principal = await _authenticate(ScramLookup(scram, tokens), token.token_id, password,
                                        tokenauth=tokenauth)
        assert principal == TokenPrincipal("alice", token.expiry_ms / 1000, token.token_id)
    with pytest.raises(ScramError, match="authentication failed"):
        await _authenticate(ScramLookup(scram, tokens), token.token_id, "wrong", tokenauth=True)
    # Expired: the proof is right, the principal refused.
    clock.now_s = token.expiry_ms / 1000
    assert await _authenticate(ScramLookup(scram, tokens), token.token_id, password,
                               tokenauth=True) is None


async def test_a_scram_user_wins_over_a_token_of_its_name_and_tokenauth_never_finds_users(
        store: RocksDBMetadataStore) -> None:
    tokens = _tokens(store, Clock())
    scram = ScramCredentialStore(store)
    token = tokens.new_token("alice", "alice", (), -1)
    await tokens.store.create(token)
    await scram.change(lambda table: {token.token_id: {
        "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "user-password")}})
    assert await _authenticate(ScramLookup(scram, tokens), token.token_id, "user-password",
                               tokenauth=False) == Principal(token.token_id)
    await scram.change(lambda table: {"carol": {
        "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "carol-password")}})
    with pytest.raises(ScramError, match="authentication failed"):
        await _authenticate(ScramLookup(scram, tokens), "carol", "carol-password",
                            tokenauth=True)
    with pytest.raises(ScramError, match="authentication failed"):  # tokens off
        await _authenticate(ScramLookup(scram, None), token.token_id, "x", tokenauth=True)



class _Context:
    """What the token handlers read of a ``KafkaContext``: the listener's security only."""

    def __init__(self, security: KafkaSecurity) -> None:
        self.security = security
        self.authorizer = None


async def test_a_broker_without_a_secret_answers_auth_disabled(
        store: RocksDBMetadataStore) -> None:
    context = cast(KafkaContext, _Context(KafkaSecurity(ScramCredentialStore(store))))
    requests = {
        38: build(request_class(38, 3), owner_principal_type=None, owner_principal_name=None,
                  renewers=(), max_lifetime=datetime.timedelta(hours=1)),
        39: build(request_class(39, 2), hmac=b"x", renew_period=datetime.timedelta(hours=1)),
        40: build(request_class(40, 2), hmac=b"x",
                  expiry_time_period=datetime.timedelta(hours=1)),
        41: build(request_class(41, 3), owners=None)}
    for row in ROWS:
        version = 3 if row.key in (38, 41) else 2
        call = Call(row.key, version, 1, "t", requests[row.key], Principal("alice"))
        answer: Any = await row.handler(context, call)
        assert answer.error_code == ErrorCode.delegation_token_auth_disabled, row.name
        token_call = Call(row.key, version, 1, "t", requests[row.key],
                          TokenPrincipal("alice", None, "some-token"))
        answer = await row.handler(context, token_call)
        assert answer.error_code == ErrorCode.delegation_token_request_not_allowed, row.name
