"""The Kafka listener's security settings and TLS context: refusals at start, reload on rotation."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.broker_config import BrokerConfig, KafkaSecurityProtocol
from broker.kafka.sasl.tls import ListenerTls, certificate_role
from ledger.security.tls import ServerTls, TlsConfigError
from tests.support.certs import Pki


def _config(**values: object) -> BrokerConfig:
    return BrokerConfig(kafka_port=0, **values)  # type: ignore[arg-type]


def test_token_broker_needs_sasl_or_client_certificates(tmp_path: Path) -> None:
    cert = Pki(tmp_path).server()
    tls = {"tls_cert": str(cert.cert), "tls_key": str(cert.key)}
    with pytest.raises(ValueError, match="add --kafka-security-protocol SASL_SSL"):
        _config(auth_token_secret_file="s", **tls)
    with pytest.raises(ValueError, match="add --kafka-security-protocol SASL_SSL"):
        _config(auth_token_secret_file="s", kafka_security_protocol=KafkaSecurityProtocol.SSL,
                **tls)
    _config(auth_token_secret_file="s", kafka_security_protocol=KafkaSecurityProtocol.SSL,
            tls_ca=str(tmp_path / "ca.pem"), **tls)
    _config(auth_token_secret_file="s",
            kafka_security_protocol=KafkaSecurityProtocol.SASL_SSL, **tls)


def test_plain_kafka_beside_a_tls_api_needs_the_flag(tmp_path: Path) -> None:
    cert = Pki(tmp_path).server()
    tls = {"tls_cert": str(cert.cert), "tls_key": str(cert.key)}
    with pytest.raises(ValueError, match="--kafka-allow-plaintext"):
        _config(**tls)
    with pytest.raises(ValueError, match="--kafka-allow-plaintext"):
        _config(kafka_security_protocol=KafkaSecurityProtocol.SASL_PLAINTEXT, **tls)
    assert _config(kafka_allow_plaintext=True, **tls).kafka_allow_plaintext
    # No Kafka port: nothing to refuse.
    BrokerConfig(kafka_port=-1, **tls)  # type: ignore[arg-type]


def test_mechanisms() -> None:
    sasl = KafkaSecurityProtocol.SASL_PLAINTEXT
    assert _config(kafka_security_protocol=sasl).sasl_mechanisms() == (
        "SCRAM-SHA-256", "SCRAM-SHA-512")  # no token key: no token mechanisms
    assert _config(kafka_security_protocol=sasl, auth_token_secret_file="s",
                   kafka_sasl_mechanisms="plain, OAUTHBEARER").sasl_mechanisms() == (
        "PLAIN", "OAUTHBEARER")
    with pytest.raises(ValueError, match="KERBEROS not served"):
        _config(kafka_security_protocol=sasl, kafka_sasl_mechanisms="KERBEROS")
    with pytest.raises(ValueError, match="GSSAPI needs --kafka-sasl-kerberos-keytab"):
        _config(kafka_security_protocol=sasl, kafka_sasl_mechanisms="GSSAPI")
    with pytest.raises(ValueError, match="carry a JWT"):
        _config(kafka_security_protocol=sasl, kafka_sasl_mechanisms="PLAIN")
    with pytest.raises(ValueError, match="needs --tls-cert"):
        _config(kafka_security_protocol=KafkaSecurityProtocol.SASL_SSL)



def test_context_reloads_changed_files_and_keeps_the_old_on_a_bad_pair(tmp_path: Path) -> None:
    pki = Pki(tmp_path)
    cert = pki.server()
    listener = ListenerTls(ServerTls(str(cert.cert), str(cert.key), str(pki.ca)))
    first = listener.context()
    assert first.verify_mode == ssl.CERT_REQUIRED
    assert listener.context() is first  # unchanged files: the same context
    rotated = pki.server("rotated")
    cert.cert.write_bytes(rotated.cert.read_bytes())  # the cert first: a mismatched pair
    assert listener.context() is first and listener.reloads == 0
    cert.key.write_bytes(rotated.key.read_bytes())
    second = listener.context()
    assert second is not first and listener.reloads == 1


def test_unreadable_files_are_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match="cannot read TLS file"):
        ListenerTls(ServerTls(str(tmp_path / "no.crt"), str(tmp_path / "no.key")))


def test_certificate_role_is_the_common_name() -> None:
    assert certificate_role({"subject": ((("organizationName", "o"),),
                                         (("commonName", "orders-app"),))}) == "orders-app"
    assert certificate_role({"subject": ((("organizationName", "o"),),)}) is None
    assert certificate_role(None) is None
