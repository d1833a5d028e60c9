"""``JwksVerifier``: an identity provider's JWTs checked against its key set (KIP-768).

Keys are made with cryptography, the set read through an injectable reader
(the integration test serves it over a real HTTP server and a file), the
clocks are injected: refresh, unknown-kid refetch, backoff and expiry are
exact. The scope claim (parsed, required scopes), and a CA file as the only
trust of an https endpoint (a trustme CA, a real HTTPS server).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from ledger.security.jwks import (
    MISSING_KID_REFETCH_S,
    JwksSettings,
    JwksVerifier,
    check_jwks_url,
    parse_jwks,
)
from ledger.security.tokens import TokenError
from tests.support.certs import Pki
from tests.support.oidc import ISSUER, JwksServer, Provider, hs256_with_public_key, unsigned
from tests.support.wait import wait_for_async

URL = "https://idp.example/jwks"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def provider() -> Provider:
    made = Provider()
    made.add_rsa("k1")
    return made


def _verifier(provider: Provider, clock: Clock | None = None, **settings: Any) -> JwksVerifier:
    values: dict[str, Any] = {"audience": ("kafka",), "issuer": ISSUER, **settings}
    return JwksVerifier(JwksSettings(URL, **values), monotonic=clock or Clock(),
                        read=provider.read)


async def test_accepts_a_token_of_a_published_key(provider: Provider) -> None:
    verifier = _verifier(provider)
    principal = await verifier.verify(provider.token("k1"))
    assert principal.role == "app"
    assert principal.expires_at is not None and principal.expires_at > time.time()
    await verifier.verify(provider.token("k1", sub="other"))
    assert provider.reads == 1  # the set is kept


async def test_ec_keys_and_another_subject_claim(provider: Provider) -> None:
    provider.add_ec("e1")
    verifier = _verifier(provider, sub_claim="preferred_username")
    token = provider.token("e1", preferred_username="alice")
    assert (await verifier.verify(token)).role == "alice"
    with pytest.raises(TokenError, match="'preferred_username' claim"):
        await verifier.verify(provider.token("e1"))


@pytest.mark.parametrize(("claims", "message"), [
    ({"aud": "other"}, "audience is not one of kafka"),
    ({"iss": "https://evil.example"}, "issuer is not https://idp.example"),
    ({"exp": int(time.time()) - 3600}, "expired"),
    ({"exp": None}, "no 'exp' claim"),
    ({"nbf": int(time.time()) + 3600}, "not valid yet"),
    ({"sub": ""}, "'sub' claim"),
])
async def test_claims_are_checked(provider: Provider, claims: dict[str, Any],
                                  message: str) -> None:
    with pytest.raises(TokenError, match=message):
        await _verifier(provider).verify(provider.token("k1", **claims))


async def test_clock_skew_is_leeway(provider: Provider) -> None:
    token = provider.token("k1", exp=int(time.time()) - 20)
    assert (await _verifier(provider).verify(token)).role == "app"  # 30 s of skew
    with pytest.raises(TokenError, match="expired"):
        await _verifier(provider, clock_skew_s=5).verify(token)


async def test_audience_and_issuer_unchecked_when_not_configured(provider: Provider) -> None:
    verifier = JwksVerifier(JwksSettings(URL), read=provider.read)
    token = provider.token("k1", aud="anyone", iss="anywhere")
    assert (await verifier.verify(token)).role == "app"


async def test_none_and_hmac_are_refused_before_any_key(provider: Provider) -> None:
    verifier = _verifier(provider)
    with pytest.raises(TokenError, match="algorithm 'none' is not accepted"):
        await verifier.verify(unsigned("k1"))
    # The classic confusion: the public key used as an HMAC secret.
    forged = hs256_with_public_key(provider, "k1")
    with pytest.raises(TokenError, match="algorithm 'HS256' is not accepted"):
        await verifier.verify(forged)
    assert provider.reads == 0


async def test_forged_signature_and_mismatched_algorithm(provider: Provider) -> None:
    verifier = _verifier(provider)
    impostor = Provider()
    impostor.add_rsa("k1")  # same kid, another key
    with pytest.raises(TokenError, match="signature does not verify"):
        await verifier.verify(impostor.token("k1"))
    with pytest.raises(TokenError, match="algorithm RS384 does not match its key"):
        await verifier.verify(provider.token("k1", algorithm="RS384"))


async def test_unknown_kid_refetches_once_rate_limited(provider: Provider) -> None:
    clock = Clock()
    verifier = _verifier(provider, clock)
    await verifier.verify(provider.token("k1"))
    provider.add_rsa("k2")  # rotation: a new key published
    clock.now += MISSING_KID_REFETCH_S
    assert (await verifier.verify(provider.token("k2"))).role == "app"
    assert provider.reads == 2
    provider.add_rsa("k3", publish=False)  # a made-up kid
    with pytest.raises(TokenError, match="key id 'k3' is not in the JWKS"):
        await verifier.verify(provider.token("k3"))  # within the second: no fetch
    assert provider.reads == 2
    clock.now += MISSING_KID_REFETCH_S
    with pytest.raises(TokenError, match="key id 'k3' is not in the JWKS"):
        await verifier.verify(provider.token("k3"))
    assert provider.reads == 3


async def test_refresh_after_the_interval(provider: Provider) -> None:
    clock = Clock()
    verifier = _verifier(provider, clock, refresh_ms=60_000)
    await verifier.verify(provider.token("k1"))
    provider.published = []
    provider.add_rsa("k2")  # k1 retired
    clock.now += 61
    with pytest.raises(TokenError, match="key id 'k1' is not in the JWKS"):
        await verifier.verify(provider.token("k1"))
    assert provider.reads == 2


async def test_accepted_tokens_are_kept_until_the_set_changes_or_they_expire(
        provider: Provider) -> None:
    monotonic, wall = Clock(), Clock()
    wall.now = time.time()
    verifier = JwksVerifier(JwksSettings(URL, ("kafka",), ISSUER, refresh_ms=60_000),
                            clock=wall, monotonic=monotonic, read=provider.read)
    token = provider.token("k1")
    principal = await verifier.verify(token)
    assert await verifier.verify(token) is principal  # kept: not parsed again
    wall.now += 600 + 31  # past its exp and the leeway
    with pytest.raises(TokenError, match="the token has expired"):
        await verifier.verify(token)
    wall.now = time.time()
    assert (await verifier.verify(token)).role == "app"
    provider.published = []
    provider.add_rsa("k2")  # k1 retired: the next set forgets what k1 proved
    monotonic.now += 61
    with pytest.raises(TokenError, match="key id 'k1' is not in the JWKS"):
        await verifier.verify(token)


async def test_endpoint_down_keeps_the_keys_held(provider: Provider) -> None:
    clock = Clock()
    verifier = _verifier(provider, clock, refresh_ms=60_000)
    await verifier.verify(provider.token("k1"))
    provider.down = True
    clock.now += 61  # stale: a refresh is tried, fails, the held key still serves
    assert (await verifier.verify(provider.token("k1"))).role == "app"
    provider.add_rsa("k2")
    clock.now += 1
    with pytest.raises(TokenError, match="the last fetch failed: connection refused"):
        await verifier.verify(provider.token("k2"))
    provider.down = False
    clock.now += 10
    assert (await verifier.verify(provider.token("k2"))).role == "app"


async def test_endpoint_down_at_first(provider: Provider) -> None:
    provider.down = True
    with pytest.raises(TokenError, match=r"no keys held; the last fetch failed: connection"):
        await _verifier(provider).verify(provider.token("k1"))


async def test_no_kid_needs_a_set_of_one(provider: Provider) -> None:
    verifier = _verifier(provider)
    body = {"sub": "app", "aud": "kafka", "iss": ISSUER, "exp": int(time.time()) + 60}
    token = jwt.encode(body, provider.keys["k1"], algorithm="RS256")
    assert (await verifier.verify(token)).role == "app"
    provider.add_rsa("k2")
    with pytest.raises(TokenError, match=r"key id '\(none\)'"):
        await _verifier(provider).verify(token)


def test_urls() -> None:
    check_jwks_url("https://idp.example/jwks")
    check_jwks_url("http://127.0.0.1:8080/jwks")
    check_jwks_url("http://localhost/jwks")
    check_jwks_url("http://[::1]:1/jwks")
    check_jwks_url("file:/etc/jwks.json")
    with pytest.raises(ValueError, match="only on a loopback host"):
        check_jwks_url("http://idp.example/jwks")
    with pytest.raises(ValueError, match="give an https:// URL"):
        check_jwks_url("ftp://idp.example/jwks")
    with pytest.raises(ValueError, match="needs a path"):
        check_jwks_url("file:")


def test_parse_keeps_signing_keys_only() -> None:
    provider = Provider()
    provider.add_rsa("k1")
    document = json.loads(provider.jwks())
    document["keys"] += [{"kty": "oct", "k": "c2VjcmV0", "kid": "h1"},
                         {**document["keys"][0], "kid": "enc", "use": "enc"}]
    assert list(parse_jwks(json.dumps(document).encode())) == ["k1"]
    with pytest.raises(ValueError, match="no RSA or EC signing key"):
        parse_jwks(b'{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}')
    with pytest.raises(ValueError, match="not JSON"):
        parse_jwks(b"<html>")


async def test_real_http_fetch_and_refused_redirects(provider: Provider) -> None:
    server = JwksServer(provider)
    try:
        clock = Clock()
        verifier = JwksVerifier(JwksSettings(server.url, ("kafka",), ISSUER), monotonic=clock)
        assert (await verifier.verify(provider.token("k1"))).role == "app"
        server.redirect_to = "http://idp.example/jwks.json"  # a downgrade to remote http
        provider.add_rsa("k2")
        clock.now += MISSING_KID_REFETCH_S
        with pytest.raises(TokenError, match="redirected to a refused URL"):
            await verifier.verify(provider.token("k2"))
        assert (await verifier.verify(provider.token("k1"))).role == "app"  # held key
    finally:
        server.close()


async def test_a_slow_refresh_holds_no_check_of_a_held_key(provider: Provider) -> None:
    clock, gate, slow = Clock(), threading.Event(), threading.Event()

    def read(url: str) -> bytes:
        if slow.is_set():
            gate.wait(30)
        return provider.read(url)

    verifier = JwksVerifier(JwksSettings(URL, ("kafka",), ISSUER, refresh_ms=60_000),
                            monotonic=clock, read=read)
    token = provider.token("k1")
    await verifier.verify(token)
    slow.set()
    clock.now += 61  # stale: the next check starts a refresh, which hangs
    first = asyncio.create_task(verifier.verify(token))

    async def refreshing() -> bool:
        return verifier.fetches == 2

    await wait_for_async(refreshing, "the refresh under way")
    # Meanwhile a check of the held key is answered without waiting for it.
    assert (await asyncio.wait_for(verifier.verify(token), 10)).role == "app"
    assert not first.done()
    gate.set()
    assert (await first).role == "app"


@pytest.mark.parametrize(("scope", "held"), [
    (None, frozenset()),
    ("kafka.read folio  kafka.write", frozenset({"kafka.read", "folio", "kafka.write"})),
    (["folio", " kafka.read "], frozenset({"folio", "kafka.read"})),
])
async def test_scopes_are_parsed_and_kept(provider: Provider, scope: object,
                                          held: frozenset[str]) -> None:
    principal = await _verifier(provider).verify(provider.token("k1", scope=scope))
    assert principal.scopes == held
    scp = await _verifier(provider, scope_claim="scp").verify(provider.token("k1", scp=scope))
    assert scp.scopes == held


@pytest.mark.parametrize("scope", [7, {"folio": True}, ["folio", ""], ["folio", 3]])
async def test_a_malformed_scope_claim_is_refused(provider: Provider, scope: object) -> None:
    with pytest.raises(TokenError, match="the token's 'scope' claim \\(its scopes\\) must be a "
                       "space-delimited string or a list of non-empty strings"):
        await _verifier(provider).verify(provider.token("k1", scope=scope))


async def test_required_scopes(provider: Provider) -> None:
    verifier = _verifier(provider, required_scopes=("folio", "kafka"))
    assert (await verifier.verify(provider.token("k1", scope="kafka x folio"))).role == "app"
    with pytest.raises(TokenError) as refused:
        await verifier.verify(provider.token("k1", scope="kafka other"))
    assert str(refused.value) == ("the token lacks the required scope(s) folio (its 'scope' "
                                  "claim holds: kafka other)")
    with pytest.raises(TokenError, match=r"lacks the required scope\(s\) folio kafka \(its "
                       "'scope' claim holds: none\\)"):
        await verifier.verify(provider.token("k1"))


async def test_a_ca_file_is_the_only_trust_for_an_https_endpoint(
        provider: Provider, tmp_path: Path) -> None:
    pki, other = Pki(tmp_path / "idp"), Pki(tmp_path / "other", "other")
    served = pki.server()
    server = JwksServer(provider, tls=(served.cert, served.key))
    try:
        assert server.url.startswith("https://127.0.0.1:")
        settings = JwksSettings(server.url, ("kafka",), ISSUER, ca_file=str(pki.ca))
        assert (await JwksVerifier(settings).verify(provider.token("k1"))).role == "app"
        # Another CA's bundle, or the system's CAs: the endpoint's certificate is not trusted.
        for ca_file in (str(other.ca), ""):
            refused = JwksVerifier(JwksSettings(server.url, ("kafka",), ISSUER, ca_file=ca_file))
            with pytest.raises(TokenError, match=r"the last fetch failed: .*"
                               r"CERTIFICATE_VERIFY_FAILED"):
                await refused.verify(provider.token("k1"))
    finally:
        server.close()


def test_an_unusable_ca_file_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read the JWKS CA file .*missing\.pem"):
        JwksVerifier(JwksSettings(URL, ca_file=str(tmp_path / "missing.pem")))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ValueError, match=r"the JWKS CA file .*junk\.pem holds no PEM CA"):
        JwksVerifier(JwksSettings(URL, ca_file=str(junk)))
