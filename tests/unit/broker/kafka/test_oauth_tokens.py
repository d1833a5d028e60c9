"""The Kafka listener's token check with an identity provider: settings, routing, configs."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import cast

import pytest

from broker.api import TopicConfig, Topics
from broker.broker_config import BrokerConfig, KafkaSecurityProtocol
from broker.kafka.broker_configs import broker_configs
from broker.kafka.config_docs import CONFIG_DOCS
from broker.kafka.context import KafkaContext
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.sasl.credentials import ScramCredentialStore
from broker.kafka.sasl.security import KafkaSecurity
from broker.kafka.topic_configs import DEFAULT_CONFIG, STATIC_BROKER_CONFIG
from ledger.security.bearer import BearerTokens
from ledger.security.jwks import JwksSettings, JwksVerifier
from ledger.security.tokens import TokenError, TokenVerifier, create_token
from tests.support.oidc import Provider

_SASL = KafkaSecurityProtocol.SASL_PLAINTEXT
_SECRET = b"oauth-tokens-unit-secret-0123456789abcdef"


def _config(**values: object) -> BrokerConfig:
    return BrokerConfig(kafka_port=0, **values)  # type: ignore[arg-type]


def test_settings() -> None:
    config = _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="file:/jwks.json",
                     kafka_oauth_expected_audience=" kafka, other ,",
                     kafka_oauth_expected_issuer="https://idp", kafka_oauth_sub_claim="uid",
                     kafka_oauth_clock_skew_s=5, kafka_oauth_jwks_refresh_ms=60000)
    assert config.kafka_oauth() == JwksSettings("file:/jwks.json", ("kafka", "other"),
                                                "https://idp", "uid", 5, 60000)
    # OAUTHBEARER is served without a Folio key; PLAIN still needs one.
    assert config.sasl_mechanisms() == ("OAUTHBEARER", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert config.kafka_access and not config.token_auth
    assert config.grpc_auth  # the gRPC port takes the provider's tokens too, and needs one
    assert _config().kafka_oauth() is None and not _config().kafka_access
    assert not _config().grpc_auth
    scoped = _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="https://idp/jwks",
                     kafka_oauth_scope_claim="scp", kafka_oauth_required_scopes="folio, kafka.rw",
                     kafka_oauth_jwks_ca_file="/etc/idp-ca.pem")
    assert scoped.kafka_oauth() == JwksSettings("https://idp/jwks", scope_claim="scp",
                                                required_scopes=("folio", "kafka.rw"),
                                                ca_file="/etc/idp-ca.pem")
    # No Kafka port: the gRPC port alone takes the provider's tokens.
    assert BrokerConfig(kafka_oauth_jwks_url="https://idp/jwks").grpc_auth


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="plain http is accepted only on a loopback host"):
        _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="http://idp.example/j")
    with pytest.raises(ValueError, match="needs OAUTHBEARER on the Kafka port"):
        _config(kafka_oauth_jwks_url="https://idp.example/jwks")  # PLAINTEXT
    with pytest.raises(ValueError, match="needs OAUTHBEARER on the Kafka port"):
        _config(kafka_security_protocol=_SASL, kafka_sasl_mechanisms="SCRAM-SHA-256",
                kafka_oauth_jwks_url="https://idp.example/jwks")
    with pytest.raises(ValueError, match="clock skew must be >= 0"):
        _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="https://idp/jwks",
                kafka_oauth_clock_skew_s=-1)
    with pytest.raises(ValueError, match="subject claim name must not be empty"):
        _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="https://idp/jwks",
                kafka_oauth_sub_claim="")
    with pytest.raises(ValueError, match="scope claim name must not be empty"):
        _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="https://idp/jwks",
                kafka_oauth_scope_claim="")
    with pytest.raises(ValueError, match="a required scope must be a non-empty word"):
        _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="https://idp/jwks",
                kafka_oauth_required_scopes="read write")
    with pytest.raises(ValueError, match=re.escape(
            "a CA file for the JWKS endpoint's TLS needs an https:// URL, not "
            "'file:/jwks.json'")):
        _config(kafka_security_protocol=_SASL, kafka_oauth_jwks_url="file:/jwks.json",
                kafka_oauth_jwks_ca_file="/etc/ca.pem")


@pytest.fixture
def provider() -> Provider:
    made = Provider()
    made.add_rsa("k1")
    return made


def _folio(tmp_path: Path) -> TokenVerifier:
    secret = tmp_path / "secret"
    secret.write_bytes(_SECRET)
    return TokenVerifier.from_files(secret_file=str(secret))


async def test_a_kid_picks_the_provider_none_picks_folio(provider: Provider,
                                                         tmp_path: Path) -> None:
    external = JwksVerifier(JwksSettings("https://idp/jwks"), read=provider.read)
    tokens = BearerTokens(_folio(tmp_path), external)
    assert (await tokens.verify(provider.token("k1", sub="alice"))).role == "alice"
    assert (await tokens.verify(create_token("bob", _SECRET, "HS256"))).role == "bob"
    # A Folio-signed token naming a kid goes to the key set, and fails there.
    with pytest.raises(TokenError, match="algorithm 'HS256' is not accepted"):
        await tokens.verify(_with_kid(create_token("bob", _SECRET, "HS256")))
    # Garbage goes to Folio's verifier, which says so.
    with pytest.raises(TokenError, match="not a valid JWT"):
        await tokens.verify("not-a-jwt")


async def test_one_verifier_takes_every_token(provider: Provider, tmp_path: Path) -> None:
    only_external = BearerTokens(None, JwksVerifier(JwksSettings("https://idp/jwks"),
                                                      read=provider.read))
    with pytest.raises(TokenError, match="algorithm 'HS256' is not accepted"):
        await only_external.verify(create_token("bob", _SECRET, "HS256"))
    only_folio = BearerTokens(_folio(tmp_path), None)
    with pytest.raises(TokenError, match="algorithm is not accepted here"):
        await only_folio.verify(provider.token("k1"))
    with pytest.raises(ValueError, match="needs Folio's key or a JWKS URL"):
        BearerTokens(None, None)


def _with_kid(token: str) -> str:
    header, rest = token.split(".", 1)
    decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    encoded = base64.urlsafe_b64encode(json.dumps({**decoded, "kid": "x"}).encode())
    return encoded.rstrip(b"=").decode() + "." + rest


def test_describe_configs_reports_kip_768s_keys() -> None:
    oauth = JwksSettings("https://idp/jwks", ("kafka",), "", "uid", 30, 60000)
    security = KafkaSecurity(cast(ScramCredentialStore, None), oauth=oauth)
    context = KafkaContext(cast(Topics, _Topics()), "127.0.0.1", cast(ProducerIds, None),
                           port=9092, security=security)
    described = {entry.name: (entry.value, entry.source)
                 for entry in broker_configs(context, 0) if entry.name.startswith("sasl.")}
    assert described == {
        "sasl.oauthbearer.jwks.endpoint.url": ("https://idp/jwks", STATIC_BROKER_CONFIG),
        "sasl.oauthbearer.expected.audience": ("kafka", STATIC_BROKER_CONFIG),
        "sasl.oauthbearer.expected.issuer": ("", DEFAULT_CONFIG),
        "sasl.oauthbearer.sub.claim.name": ("uid", STATIC_BROKER_CONFIG),
        "sasl.oauthbearer.clock.skew.seconds": ("30", DEFAULT_CONFIG),
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": ("60000", STATIC_BROKER_CONFIG),
        "sasl.oauthbearer.scope.claim.name": ("scope", DEFAULT_CONFIG),
    }
    assert set(described) <= set(CONFIG_DOCS)
    plain = KafkaContext(cast(Topics, _Topics()), "127.0.0.1", cast(ProducerIds, None),
                         port=9092)
    assert not [entry for entry in broker_configs(plain, 0) if entry.name.startswith("sasl.")]


class _Topics:
    def default_config(self) -> TopicConfig:
        return TopicConfig()
