"""A Kerberos client of the Kafka listener, run in a process of its own; prints one JSON line.

The Kerberos library reads ``KRB5_CONFIG`` and ``KRB5CCNAME`` from the
environment, so each client runs in a subprocess with the test realm's
(``tests.support.kdc.Kdc.env``), never in the test process. Modes:

- ``round-trip BOOTSTRAP TOPIC COUNT [CAFILE]``: kafka-python (GSSAPI, service
  ``kafka``, domain ``localhost``; SASL_SSL with CAFILE) produces COUNT
  records and reads them back: ``{"values": [...]}``, or ``{"error": class,
  "message": text}``.
- ``raw BOOTSTRAP SERVICE [ROUNDS [LAYER]]``: the exchange by hand over a socket, for
  a ticket of ``SERVICE@localhost``: SaslHandshake v1, then SaslAuthenticate
  v1 with each GSS token and RFC 4752's security-layer answer, ROUNDS times
  on the same connection (more than 1: re-authentication, KIP-368), then a
  Metadata request (LAYER: the security layer the client chooses, instead of
  the one offered): ``{"error_code": n, "error_message": text,
  "session_lifetime_ms": n, "rounds": n, "closed": bool, "metadata": bool}``.
- ``late BOOTSTRAP``: the first token of an exchange, made while the ticket
  is valid and sent after it ended (a short ``kinit -l``): ``{"error_code":
  n, "error_message": text, "closed": bool}``.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import uuid
from typing import Any

_DEADLINE_S = 60.0


def _settings(bootstrap: str, cafile: str) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap_servers": bootstrap, "sasl_mechanism": "GSSAPI",
        "sasl_kerberos_service_name": "kafka", "sasl_kerberos_domain_name": "localhost",
        "security_protocol": "SASL_SSL" if cafile else "SASL_PLAINTEXT"}
    if cafile:
        settings["ssl_cafile"] = cafile
        settings["ssl_check_hostname"] = False  # bootstrapped by address
    return settings


def round_trip(bootstrap: str, topic: str, count: int, cafile: str = "") -> dict[str, Any]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: PLC0415

    settings = _settings(bootstrap, cafile)
    values = [uuid.uuid4().hex for _ in range(count)]
    try:
        producer = KafkaProducer(**settings, linger_ms=0, max_block_ms=30_000)
        try:
            for value in values:
                producer.send(topic, value.encode()).get(timeout=_DEADLINE_S)
        finally:
            producer.close(timeout=10)
        consumer = KafkaConsumer(**settings, enable_auto_commit=False,
                                 consumer_timeout_ms=int(_DEADLINE_S * 1000))
        try:
            partition = TopicPartition(topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            # values first: zip stops there, before waiting for a record more
            read = [record.value.decode() for _, record in zip(values, consumer, strict=False)]
        finally:
            consumer.close()
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error)}
    return {"values": read, "sent": values}


def _call(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any:
    from kio.index import load_request_schema  # noqa: PLC0415

    from tests.support.kafka import raw_request, read_response  # noqa: PLC0415

    sock.sendall(raw_request(api_key, version, 1, load_request_schema(api_key, version)(**fields)))
    return read_response(sock, api_key, version)[1]


def _authenticate(sock: socket.socket, service: str, layer: int | None = None) -> Any:
    """One GSSAPI exchange on ``sock``; the last SaslAuthenticate answer.

    ``layer``: the security layer chosen (None: the one offered).
    """
    import gssapi  # noqa: PLC0415

    name = gssapi.Name(f"{service}@localhost", gssapi.NameType.hostbased_service)
    context = gssapi.SecurityContext(name=name.canonicalize(gssapi.MechType.kerberos),
                                     usage="initiate")
    assert _call(sock, 17, 1, mechanism="GSSAPI").error_code.value == 0
    answer = _call(sock, 36, 1, auth_bytes=context.step(None) or b"")
    while answer.error_code.value == 0 and not context.complete:
        token = context.step(answer.auth_bytes)
        if token:
            answer = _call(sock, 36, 1, auth_bytes=token)
    if answer.error_code.value == 0:  # established: an empty message asks for the offer
        answer = _call(sock, 36, 1, auth_bytes=b"")
    if answer.error_code.value == 0:  # the offer: no layer, the same size, an authzid
        offer = context.unwrap(answer.auth_bytes).message
        answer = _call(sock, 36, 1, auth_bytes=context.wrap(
                struct.pack(">B", offer[0] & 1 if layer is None else layer) + offer[1:4]
                + b"authz-ignored", False).message)
    return answer


def raw(bootstrap: str, service: str, rounds: int = 1,
        layer: int | None = None) -> dict[str, Any]:
    from tests.support.kafka import read_frame  # noqa: PLC0415

    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=_DEADLINE_S) as sock:
        done = 0
        while True:
            answer = _authenticate(sock, service, layer)
            done += 1
            if answer.error_code.value != 0 or done == rounds:
                break
        out: dict[str, Any] = {"rounds": done,
            "error_code": answer.error_code.value, "error_message": answer.error_message,
            "session_lifetime_ms": int(answer.session_lifetime.total_seconds() * 1000)}
        if answer.error_code.value == 0:
            out["metadata"] = bool(_call(sock, 3, 1, topics=None).brokers)
        else:
            try:
                out["closed"] = read_frame(sock) is None
            except ConnectionResetError:
                out["closed"] = True
    return out


def late(bootstrap: str) -> dict[str, Any]:
    """The first GSS token made while the ticket is valid, sent once it has ended."""
    import time  # noqa: PLC0415

    import gssapi  # noqa: PLC0415

    from tests.support.kafka import read_frame  # noqa: PLC0415

    name = gssapi.Name("kafka@localhost", gssapi.NameType.hostbased_service)
    context = gssapi.SecurityContext(name=name.canonicalize(gssapi.MechType.kerberos),
                                     usage="initiate")
    token = context.step(None)
    # The ticket ends with the TGT it came from; past it by the realm's 1 s of skew, and 1 more.
    ends = time.monotonic() + gssapi.Credentials(usage="initiate").lifetime + 2.0
    deadline = ends + _DEADLINE_S
    while time.monotonic() < ends:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=_DEADLINE_S) as sock:
        assert _call(sock, 17, 1, mechanism="GSSAPI").error_code.value == 0
        answer = _call(sock, 36, 1, auth_bytes=token or b"")
        out: dict[str, Any] = {"error_code": answer.error_code.value,
                               "error_message": answer.error_message}
        try:
            out["closed"] = read_frame(sock) is None
        except ConnectionResetError:
            out["closed"] = True
    return out


def main(argv: list[str]) -> int:
    mode, *rest = argv
    if mode == "round-trip":
        result = round_trip(rest[0], rest[1], int(rest[2]), *rest[3:])
    elif mode == "late":
        result = late(rest[0])
    elif mode == "raw":
        result = raw(rest[0], rest[1], *(int(rounds) for rounds in rest[2:]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
