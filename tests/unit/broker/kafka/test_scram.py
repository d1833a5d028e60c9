"""SCRAM (RFC 5802/7677) server side: RFC 7677's test vector, kafka-python's client, refusals."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient

from broker.kafka.sasl.credentials import decode_table, encode_table
from broker.kafka.sasl.scram import (
    ScramError,
    ScramServer,
    credential_from_salted,
    make_credential,
    salted_password,
)


def test_rfc7677_vector() -> None:
    """RFC 7677 section 3: user 'user', password 'pencil', its nonces and salt."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_salted(
        "SCRAM-SHA-256", salted_password("SCRAM-SHA-256", b"pencil", salt, 4096), salt, 4096)
    server = ScramServer("SCRAM-SHA-256")
    assert server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == "user"
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"  # the RFC's
    assert server.use(credential) == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                      b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.final(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_client_authenticates(mechanism: str) -> None:
    client = ScramClient("alice", "secret", mechanism)
    server = ScramServer(mechanism)
    assert server.first(client.first_message()) == "alice"
    client.process_server_first_message(server.use(make_credential(mechanism, "secret")))
    client.process_server_final_message(server.final(client.final_message()))


@pytest.mark.parametrize("password", ["wrong", ""])
def test_wrong_password_is_refused(password: str) -> None:
    client = ScramClient("alice", password or "x", "SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256")
    server.first(client.first_message())
    client.process_server_first_message(
        server.use(make_credential("SCRAM-SHA-256", "secret")))
    with pytest.raises(ScramError, match="authentication failed"):
        server.final(client.final_message())


def test_unknown_user_fails_at_the_proof_only() -> None:
    client = ScramClient("nobody", "secret", "SCRAM-SHA-512")
    server = ScramServer("SCRAM-SHA-512")
    server.first(client.first_message())
    first = server.use(None)
    assert b",s=" in first and b",i=4096" in first
    client.process_server_first_message(first)
    with pytest.raises(ScramError, match="authentication failed"):
        server.final(client.final_message())


@pytest.mark.parametrize("message", [b"p=tls-unique,,n=a,r=x", b"n,,r=x", b"n,,n=a=b,r=x",
                                     b"garbage"])
def test_malformed_client_first_is_refused(message: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256").first(message)


def test_table_round_trips_without_passwords() -> None:
    table = {"alice": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "secret", 8192)}}
    data = encode_table(table)
    assert b"secret" not in data
    assert decode_table(data) == table
    assert decode_table(b"") == {}
    with pytest.raises(ValueError, match="not a SCRAM credential table"):
        decode_table(b'{"users": 3}')
