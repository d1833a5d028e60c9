"""Kafka's principal-to-local rules (``broker.kafka.sasl.kerberos_names``); GSSAPI's refusals.

The expectations are Kafka's (``KerberosShortNamer``, ``KerberosRule`` and
their tests): DEFAULT takes the first component of a default-realm
principal, RULE formats, matches, substitutes and cases, the first rule
that applies wins, and a principal none applies to is refused.
"""

from __future__ import annotations

import re
import sys
from typing import cast

import pytest

from broker.api import TopicConfig, Topics
from broker.app.kafka_listener import KafkaUnavailableError, kerberos_acceptor
from broker.broker_config import BrokerConfig, KafkaSecurityProtocol
from broker.kafka.broker_configs import broker_configs
from broker.kafka.config_docs import CONFIG_DOCS
from broker.kafka.context import KafkaContext
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.sasl.credentials import ScramCredentialStore
from broker.kafka.sasl.kerberos_names import KerberosRules, NoMatchingRuleError
from broker.kafka.sasl.security import KafkaSecurity, KerberosSettings
from broker.kafka.topic_configs import DEFAULT_CONFIG, STATIC_BROKER_CONFIG

REALM = "FOLIO.TEST"


@pytest.mark.parametrize(("principal", "expected"), [
    ("alice@FOLIO.TEST", "alice"),
    ("etl/host1.example.com@FOLIO.TEST", "etl"),
    ("kafka/a/b@FOLIO.TEST", "kafka"),
])
def test_default_maps_a_default_realm_principal_to_its_first_component(
        principal: str, expected: str) -> None:
    assert KerberosRules().short_name(principal, REALM) == expected


def test_default_does_not_map_another_realm() -> None:
    with pytest.raises(NoMatchingRuleError, match=re.escape(
            "no principal-to-local rule maps 'alice@OTHER.TEST'")):
        KerberosRules("DEFAULT").short_name("alice@OTHER.TEST", REALM)


@pytest.mark.parametrize(("rules", "principal", "expected"), [
    # Kafka's documentation example: user@MYDOMAIN.COM -> user.
    (r"RULE:[1:$1@$0](.*@MYDOMAIN\.COM)s/@.*//,DEFAULT", "bob@MYDOMAIN.COM", "bob"),
    # Services of one name on any host -> one user, before DEFAULT.
    (r"RULE:[2:$1@$0](etl@FOLIO\.TEST)s/.*/pipeline/,DEFAULT", "etl/h1@FOLIO.TEST", "pipeline"),
    # Not matched: the next rule applies.
    (r"RULE:[2:$1@$0](etl@FOLIO\.TEST)s/.*/pipeline/,DEFAULT", "app@FOLIO.TEST", "app"),
    # Lower case, and groups in the replacement (Java's $1).
    (r"RULE:[1:$1]/L", "Alice@FOLIO.TEST", "alice"),
    (r"RULE:[1:$1]/U", "alice@ANY.TEST", "ALICE"),
    (r"RULE:[1:$1](svc-.*)s/svc-(.*)/$1-app/", "svc-billing@X.TEST", "billing-app"),
    (r"RULE:[1:$1]s/a/o/g", "banana@X.TEST", "bonono"),
    (r"RULE:[1:$1]s/a/o/", "banana@X.TEST", "bonana"),
    # Spaces separate rules as commas do.
    (r"RULE:[1:$1@$0](.*@OTHER\.TEST)s/@.*// DEFAULT", "carol@OTHER.TEST", "carol"),
])
def test_rules_as_kafka_applies_them(rules: str, principal: str, expected: str) -> None:
    assert KerberosRules(rules).short_name(principal, REALM) == expected


def test_a_rule_making_a_name_that_is_not_simple_refuses() -> None:
    with pytest.raises(NoMatchingRuleError, match="not a simple name"):
        KerberosRules(r"RULE:[1:$1@$0]").short_name("alice@FOLIO.TEST", REALM)


@pytest.mark.parametrize(("rules", "message"), [
    ("", "none given"),
    ("DEFAULTS", "cannot parse 'S'"),
    ("RULE:1:$1", "cannot parse 'RULE:1:\\$1'"),
    (r"RULE:[1:$1](a[)", "bad regular expression"),
])
def test_malformed_rules_are_refused(rules: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KerberosRules(rules)


def _gssapi_config(keytab: str = "", principal: str = "", rules: str = "DEFAULT") -> BrokerConfig:
    return BrokerConfig(kafka_port=0, kafka_security_protocol=KafkaSecurityProtocol.SASL_PLAINTEXT,
                        kafka_sasl_mechanisms="GSSAPI,SCRAM-SHA-256",
                        kafka_sasl_kerberos_keytab=keytab, kafka_sasl_kerberos_principal=principal,
                        kafka_sasl_kerberos_principal_to_local_rules=rules)


def test_gssapi_needs_a_keytab() -> None:
    with pytest.raises(ValueError, match="GSSAPI needs --kafka-sasl-kerberos-keytab"):
        _gssapi_config()
    assert _gssapi_config("/etc/kafka.keytab").sasl_mechanisms() == (
        "GSSAPI", "SCRAM-SHA-256")


def test_gssapi_is_not_served_unless_named() -> None:
    assert "GSSAPI" not in BrokerConfig(
        kafka_port=0, kafka_security_protocol=KafkaSecurityProtocol.SASL_PLAINTEXT,
    ).sasl_mechanisms()


def test_without_the_gssapi_package_the_broker_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "broker.kafka.sasl.kerberos", raising=False)
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi raises ImportError
    with pytest.raises(KafkaUnavailableError, match=r"needs the gssapi extra \(pip install "
                       r"'folio\[gssapi\]'\), which builds the Python package gssapi against "
                       r"MIT Kerberos \(apt-get install libkrb5-dev\)"):
        kerberos_acceptor(_gssapi_config("/etc/kafka.keytab"))


def test_malformed_rules_refuse_the_start() -> None:
    with pytest.raises(ValueError, match="cannot parse"):
        kerberos_acceptor(_gssapi_config("/etc/kafka.keytab", rules="NOPE"))


def test_a_keytab_without_the_key_refuses_the_start() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "--kafka-sasl-kerberos-keytab /nonexistent/kafka.keytab: cannot take the key of "
            "kafka/localhost@FOLIO.TEST from it")):
        kerberos_acceptor(_gssapi_config(
            "/nonexistent/kafka.keytab", "kafka/localhost@FOLIO.TEST"))


def test_a_principal_of_another_service_refuses_the_start() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "--kafka-sasl-kerberos-principal HTTP/localhost@FOLIO.TEST is not of the service "
            "'kafka' (--kafka-sasl-kerberos-service-name)")):
        kerberos_acceptor(_gssapi_config("/etc/kafka.keytab", "HTTP/localhost@FOLIO.TEST"))


class _Topics:
    def default_config(self) -> TopicConfig:
        return TopicConfig()


def test_describe_configs_reports_the_kerberos_keys() -> None:
    security = KafkaSecurity(cast(ScramCredentialStore, None),
                             kerberos=KerberosSettings("kafka", r"RULE:[1:$1]/L,DEFAULT"))
    context = KafkaContext(cast(Topics, _Topics()), "127.0.0.1", cast(ProducerIds, None),
                           port=9092, security=security)
    described = {entry.name: (entry.value, entry.source)
                 for entry in broker_configs(context, 0) if entry.name.startswith("sasl.")}
    assert described == {
        "sasl.kerberos.service.name": ("kafka", DEFAULT_CONFIG),
        "sasl.kerberos.principal.to.local.rules": (r"RULE:[1:$1]/L,DEFAULT",
                                                   STATIC_BROKER_CONFIG),
    }
    assert set(described) <= set(CONFIG_DOCS)
