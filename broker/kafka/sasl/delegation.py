"""Kafka delegation tokens (KIP-48): the tokens in the metadata store, their HMAC, their SCRAM key.

A token is a token id (a random UUID in URL-safe base64, as Kafka makes
it), an owner (the role it authenticates as), the requester, the renewers,
and three times: issued, expires (``kafka_delegation_token_expiry_time_ms``
after issue or the last renewal) and its maximum (``..._max_lifetime_ms``
after issue; a renewal never passes it). Its password is the HMAC-SHA512 of
the token id under the cluster's delegation token secret, in base64, as
Kafka's; clients authenticate with SCRAM-SHA-256/512, the token id as the
user name (``broker.kafka.sasl.mechanisms``). The HMAC is never stored:
every broker computes it from the secret, so every broker of a cluster must
have the same one.

Each token is one node, ``/folio/kafka/delegation_tokens/<token_id>``
(versioned JSON), so an authentication reads one node (on every broker, so
a token made, renewed or expired through any broker counts at once), a
renewal is one compare-and-set of that node, and tokens do not contend.

Outcomes: a creation is one ``create`` of a fresh id (yes / no /
``MetadataUnavailableError``: maybe made; the client is answered a
retriable error and never learns the token, which then only lives until its
expiry, harmless). A renewal or expiry is a compare-and-set against the
version read (lost to another writer: read again and re-apply, bounded; the
store unreachable: maybe applied, the client retries, and both are
idempotent up to the time they are computed from). The sweep deletes an
expired token's node at the version it read expired, so a renewal that won
meanwhile is never undone; two brokers sweeping at once find ``NoNodeError``
and go on.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from broker.kafka.sasl.scram import MIN_ITERATIONS, ScramCredential, make_credential
from broker.metadata_paths import DELEGATION_TOKENS_ROOT
from ledger.api import MetadataStore
from ledger.errors import BadVersionError, NoNodeError
from ledger.records import dump_record, load_record
from ledger.security.tokens import Principal

__all__ = ["DEFAULT_EXPIRY_TIME_MS", "DEFAULT_MAX_LIFETIME_MS", "DelegationToken",
           "DelegationTokenStore", "DelegationTokens", "TokenPrincipal", "principal_of"]

log = logging.getLogger(__name__)

_FORMAT: Final = 1
_MAX_ATTEMPTS: Final = 20
#: Kafka's ``delegation.token.max.lifetime.ms`` (7 days) and ``...expiry.time.ms`` (24 h).
DEFAULT_MAX_LIFETIME_MS: Final = 7 * 24 * 3600 * 1000
DEFAULT_EXPIRY_TIME_MS: Final = 24 * 3600 * 1000
#: SCRAM credentials computed so far (token id, mechanism): PBKDF2 once per broker.
_CACHE_SIZE: Final = 4096


@dataclass(frozen=True, slots=True)
class TokenPrincipal(Principal):
    """A principal authenticated by a delegation token: its owner's role, and the token."""

    token_id: str = ""


@dataclass(frozen=True, slots=True)
class DelegationToken:
    """One token as stored (times in ms since the epoch; owner, requester
    and renewers are roles, Kafka's ``User:<role>``)."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    expiry_ms: int
    max_ms: int
    #: The node's version (-1: not stored yet).
    version: int = field(default=-1, compare=False)

    def expired(self, now_ms: int) -> bool:
        """Whether the token is past its expiry (then it neither authenticates nor renews)."""
        return now_ms >= self.expiry_ms

    def owner_or_renewer(self, role: str) -> bool:
        """Whether ``role`` may renew or expire the token (Kafka's ``ownerOrRenewer``)."""
        return role == self.owner or role in self.renewers


def _encode(token: DelegationToken) -> bytes:
    return dump_record(_FORMAT, {"owner": token.owner, "requester": token.requester,
                                 "renewers": list(token.renewers), "issue_ms": token.issue_ms,
                                 "expiry_ms": token.expiry_ms, "max_ms": token.max_ms})


def _decode(token_id: str, data: bytes, version: int) -> DelegationToken:
    path = f"{DELEGATION_TOKENS_ROOT}/{token_id}"
    try:
        raw: Any = load_record(data, path, (_FORMAT,))
        return DelegationToken(token_id, str(raw["owner"]), str(raw["requester"]),
                               tuple(str(role) for role in raw["renewers"]),
                               int(raw["issue_ms"]), int(raw["expiry_ms"]), int(raw["max_ms"]),
                               version)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise ValueError(f"{path} is not a delegation token ({error})") from None


def _valid_id(token_id: str) -> bool:
    """Whether ``token_id`` could be a token's (so a node name, never a path)."""
    return 0 < len(token_id) <= 64 and all(c.isalnum() or c in "-_" for c in token_id)


class DelegationTokenStore:
    """The tokens' nodes in the metadata store (see the module docstring)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def get(self, token_id: str) -> DelegationToken | None:
        """The token ``token_id``, None if there is none."""
        if not _valid_id(token_id):
            return None
        try:
            node = await self._store.get(f"{DELEGATION_TOKENS_ROOT}/{token_id}")
        except NoNodeError:
            return None
        try:
            return _decode(token_id, node.data, node.version)
        except ValueError as error:  # (written by no build of Folio): left alone, unusable
            log.warning("kafka: %s", error)
            return None

    async def all(self) -> list[DelegationToken]:
        """Every stored token (expired ones the sweep has not removed yet too)."""
        try:
            names = await self._store.children(DELEGATION_TOKENS_ROOT)
        except NoNodeError:
            return []
        out = []
        for name in names:
            token = await self.get(name)
            if token is not None:  # (deleted meanwhile)
                out.append(token)
        return out

    async def create(self, token: DelegationToken) -> None:
        """Store a new token (``NodeExistsError`` if its id is taken: never, ids are random)."""
        await self._store.create(f"{DELEGATION_TOKENS_ROOT}/{token.token_id}", _encode(token),
                                 make_parents=True)

    async def change(self, token_id: str, edit: Callable[[DelegationToken], DelegationToken | None]
                     ) -> DelegationToken | None:
        """Apply ``edit`` (None: delete) by compare-and-set; the result, None if none is left.

        ``edit`` may raise to refuse the change (nothing is written; the
        exception propagates); it is re-applied to the new token if another
        writer won meanwhile. A token gone meanwhile returns None unedited.
        """
        path = f"{DELEGATION_TOKENS_ROOT}/{token_id}"
        for _attempt in range(_MAX_ATTEMPTS):
            token = await self.get(token_id)
            if token is None:
                return None
            changed = edit(token)
            try:
                if changed is None:
                    await self._store.delete(path, token.version)
                    return None
                version = await self._store.set(path, _encode(changed), token.version)
            except BadVersionError:
                continue
            except NoNodeError:
                return None
            return replace(changed, version=version)
        raise BadVersionError(path, -1, None)

    async def sweep(self, now_ms: int) -> int:
        """Delete the expired tokens (each at the version read expired); how many."""
        removed = 0
        for token in await self.all():
            if not token.expired(now_ms):
                continue
            with contextlib.suppress(NoNodeError, BadVersionError):  # renewed / swept meanwhile
                await self._store.delete(f"{DELEGATION_TOKENS_ROOT}/{token.token_id}",
                                         token.version)
                removed += 1
        return removed


class DelegationTokens:
    """The cluster's delegation tokens as one broker serves them: secret, store, settings.

    Args:
        store: the tokens' nodes.
        secret: the cluster's delegation token secret (Kafka's
            ``delegation.token.secret.key``).
        max_lifetime_ms: Kafka's ``delegation.token.max.lifetime.ms``.
        expiry_time_ms: Kafka's ``delegation.token.expiry.time.ms``.
        sweep_interval_ms: Kafka's ``delegation.token.expiry.check.interval.ms``:
            expired tokens are deleted at most this often (``maybe_sweep``).
        clock: seconds since the epoch.
    """

    def __init__(self, store: DelegationTokenStore, secret: bytes, *,
                 max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS,
                 expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS,
                 sweep_interval_ms: int = 3600 * 1000,
                 clock: Callable[[], float] = time.time) -> None:
        if not secret:
            raise ValueError("the delegation token secret is empty")
        self.store = store
        self._secret = secret
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self._sweep_interval_ms = sweep_interval_ms
        self._clock = clock
        # The first sweep one interval after start (as Kafka's), then every interval.
        self._last_sweep_ms = self.now_ms()
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def now_ms(self) -> int:
        """The clock, in ms since the epoch."""
        return int(self._clock() * 1000)

    def hmac(self, token_id: str) -> bytes:
        """The token's HMAC: HMAC-SHA512 of its id under the secret (Kafka's ``createHmac``)."""
        return hmac.digest(self._secret, token_id.encode(), "sha512")

    def password(self, token_id: str) -> str:
        """The token's SCRAM password: its HMAC in base64."""
        return base64.b64encode(self.hmac(token_id)).decode("ascii")

    def new_token(self, owner: str, requester: str, renewers: tuple[str, ...],
                  max_lifetime_ms: int) -> DelegationToken:
        """A new token (not stored yet); ``max_lifetime_ms`` <= 0: the broker's maximum."""
        now = self.now_ms()
        lifetime = (self.max_lifetime_ms if max_lifetime_ms <= 0
                    else min(max_lifetime_ms, self.max_lifetime_ms))
        token_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        return DelegationToken(token_id, owner, requester, tuple(dict.fromkeys(renewers)), now,
                               min(now + lifetime, now + self.expiry_time_ms), now + lifetime)

    async def by_hmac(self, hmac_bytes: bytes) -> DelegationToken | None:
        """The stored token whose HMAC is ``hmac_bytes`` (Renew and Expire name tokens so)."""
        for token in await self.store.all():
            if hmac.compare_digest(self.hmac(token.token_id), hmac_bytes):
                return token
        return None

    def credential(self, token_id: str, mechanism: str) -> ScramCredential:
        """The SCRAM credential of a token's password (cached: PBKDF2 once per token)."""
        key = (token_id, mechanism)
        credential = self._credentials.get(key)
        if credential is None:
            salt = hmac.digest(self._secret, b"salt:" + token_id.encode(), "sha256")[:16]
            credential = make_credential(mechanism, self.password(token_id), MIN_ITERATIONS,
                                         salt)
            if len(self._credentials) >= _CACHE_SIZE:
                self._credentials.clear()
            self._credentials[key] = credential
        return credential

    async def maybe_sweep(self) -> None:
        """Delete the expired tokens if the sweep interval has passed (a maintenance hook)."""
        now = self.now_ms()
        if now - self._last_sweep_ms < self._sweep_interval_ms:
            return
        self._last_sweep_ms = now
        removed = await self.store.sweep(now)
        if removed:
            log.info("kafka: removed %d expired delegation token(s)", removed)


def principal_of(token: DelegationToken) -> TokenPrincipal:
    """Who a connection authenticated by ``token`` is: its owner, until the token expires."""
    return TokenPrincipal(token.owner, token.expiry_ms / 1000, token.token_id)

