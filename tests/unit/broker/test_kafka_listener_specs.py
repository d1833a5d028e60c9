"""``--kafka-listeners`` and its companions: Kafka's syntax, and each bad spec's message."""

from __future__ import annotations

import pytest

from broker.broker_config import BrokerConfig
from broker.kafka_listener_specs import KafkaListenerSpec, KafkaSecurityProtocol

PLAINTEXT, SSL = KafkaSecurityProtocol.PLAINTEXT, KafkaSecurityProtocol.SSL
SASL_PLAINTEXT = KafkaSecurityProtocol.SASL_PLAINTEXT


def _config(**values: object) -> BrokerConfig:
    return BrokerConfig(**values)  # type: ignore[arg-type]


def test_the_single_port_is_one_listener_named_after_its_protocol() -> None:
    assert _config().kafka_listener_specs() == ()
    assert not _config().serves_kafka
    config = _config(kafka_port=9092, kafka_advertised_host="pub", kafka_advertised_port=19092)
    assert config.kafka_listener_specs() == (
        KafkaListenerSpec("PLAINTEXT", PLAINTEXT, "127.0.0.1", 9092, "pub", 19092),)


def test_named_listeners_in_kafkas_syntax() -> None:
    config = _config(
        host="10.0.0.5",
        kafka_listeners="inside://:9092, OUTSIDE://0.0.0.0:9093,tls://[::1]:0",
        kafka_advertised_listeners="OUTSIDE://pub.example:19093",
        kafka_listener_security_protocol_map="INSIDE:PLAINTEXT,outside:sasl_plaintext,TLS:SSL",
        kafka_sasl_mechanisms="SCRAM-SHA-256", kafka_allow_plaintext=True,
        tls_cert="c.pem", tls_key="k.pem")
    assert config.serves_kafka
    assert config.kafka_listener_specs() == (
        KafkaListenerSpec("INSIDE", PLAINTEXT, "10.0.0.5", 9092, "10.0.0.5", 0),
        KafkaListenerSpec("OUTSIDE", SASL_PLAINTEXT, "0.0.0.0", 9093, "pub.example", 19093),
        KafkaListenerSpec("TLS", KafkaSecurityProtocol.SSL, "::1", 0, "::1", 0))


@pytest.mark.parametrize(("values", "message"), [
    ({"kafka_listeners": "A:9092"}, r"'A:9092' is not NAME://HOST:PORT"),
    ({"kafka_listeners": "A://h"}, r"'A://h' has no port"),
    ({"kafka_listeners": "A://h:70000"}, r"has no port"),
    ({"kafka_listeners": "A B://h:1"}, r"listener name 'A B' may hold only"),
    ({"kafka_listeners": "A://::1:9092"}, r"an IPv6 host goes in brackets"),
    ({"kafka_listeners": ","}, r"--kafka-listeners names no listener"),
    ({"kafka_listeners": "PLAINTEXT://:1,plaintext://:2"}, r"listener PLAINTEXT is named twice"),
    ({"kafka_listeners": "PLAINTEXT://:1,SSL://:1"}, r"two listeners on one port"),
    ({"kafka_listeners": "INSIDE://:1"},
     r"listener INSIDE has no security protocol: add INSIDE:PROTOCOL"),
    ({"kafka_listeners": "A://:1", "kafka_listener_security_protocol_map": "A:TLS"},
     r"'A:TLS' is not NAME:PROTOCOL"),
    ({"kafka_listeners": "PLAINTEXT://:1", "kafka_advertised_listeners": "B://h:1"},
     r"--kafka-advertised-listeners names B, not in --kafka-listeners"),
    ({"kafka_listeners": "PLAINTEXT://0.0.0.0:1"},
     r"listener PLAINTEXT would advertise 0.0.0.0, which no client can connect to"),
    ({"kafka_listeners": "PLAINTEXT://:1", "kafka_port": 9092},
     r"--kafka-listeners replaces --kafka-port"),
    ({"kafka_listeners": "PLAINTEXT://:1", "kafka_security_protocol": SSL},
     r"--kafka-listeners replaces --kafka-security-protocol"),
    ({"kafka_port": 9092, "kafka_advertised_listeners": "A://h:1"},
     r"--kafka-advertised-listeners needs --kafka-listeners"),
    ({"kafka_listeners": "SSL://:1"}, r"listener SSL \(SSL\) needs --tls-cert"),
    ({"kafka_listeners": "PLAINTEXT://:1", "kafka_unauthenticated_listeners": "B"},
     r"--kafka-unauthenticated-listeners names B, not in --kafka-listeners"),
])
def test_bad_specs_are_refused_with_what_to_fix(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _config(**values)


def test_a_token_broker_refuses_a_listener_that_lets_anyone_in() -> None:
    """No unauthenticated back door: named in --kafka-unauthenticated-listeners, or refused."""
    listeners = {"kafka_listeners": "INTERNAL://:0,SASL_PLAINTEXT://:0",
                 "kafka_listener_security_protocol_map": "INTERNAL:PLAINTEXT",
                 "auth_token_secret_file": "s"}
    with pytest.raises(ValueError, match=r"token authentication is on but listener INTERNAL "
                       r"\(PLAINTEXT\) would let anyone in"):
        _config(**listeners)
    allowed = _config(**listeners, kafka_unauthenticated_listeners="internal")
    assert [spec.name for spec in allowed.kafka_listener_specs()] == [
        "INTERNAL", "SASL_PLAINTEXT"]
    # And beside a TLS API, plain text still needs --kafka-allow-plaintext.
    tls = {"tls_cert": "c.pem", "tls_key": "k.pem"}
    with pytest.raises(ValueError, match=r"the API serves TLS but listener INTERNAL "
                       r"\(PLAINTEXT\) is plain text"):
        _config(**listeners, **tls, kafka_unauthenticated_listeners="INTERNAL")
