"""The Kafka listeners of a broker as its settings name them (stdlib only: read by the settings).

A broker serves one Kafka listener (``--kafka-port``, its protocol
``--kafka-security-protocol``) or several, named as Kafka names them
(``--kafka-listeners NAME://HOST:PORT,...``, ``--kafka-advertised-listeners``,
``--kafka-listener-security-protocol-map NAME:PROTOCOL,...``): docs/kafka.md,
"Listeners". ``KafkaSecurityProtocol`` is what a listener asks of a
connection (Kafka's ``security.protocol``), ``KafkaListenerSpec`` one
listener, ``parse_listeners`` the named ones from the three settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["KafkaListenerSpec", "KafkaSecurityProtocol", "check_listener_security",
           "parse_listeners"]


class KafkaSecurityProtocol(StrEnum):
    """What the Kafka listener asks of a connection (Kafka's ``security.protocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        """Whether connections are TLS."""
        return self in (KafkaSecurityProtocol.SSL, KafkaSecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        """Whether connections authenticate with SASL."""
        return self in (KafkaSecurityProtocol.SASL_PLAINTEXT, KafkaSecurityProtocol.SASL_SSL)


#: Bind hosts that are not an address a client can connect to.
_META_HOSTS = frozenset({"0.0.0.0", "::", ""})
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True, slots=True)
class KafkaListenerSpec:
    """One Kafka listener: its name, protocol, where it binds and what clients are told.

    Attributes:
        name: the listener name (Kafka's, upper case), the key of its
            advertised address in the cluster's records.
        protocol: what a connection must do (TLS, SASL, both or neither).
        host: the address it binds ("" never: ``--host`` filled in).
        port: the port it binds (0: any free one).
        advertised_host: the host Kafka clients are told (Metadata).
        advertised_port: the port they are told; 0: the bound port.
    """

    name: str
    protocol: KafkaSecurityProtocol
    host: str
    port: int
    advertised_host: str
    advertised_port: int = 0


def _endpoint(text: str, flag: str) -> tuple[str, str, int]:
    """``NAME://host:port`` as (NAME upper case, host, port); ``ValueError`` naming ``flag``."""
    name, sep, address = text.partition("://")
    name = name.strip().upper()
    if not sep or not name:
        raise ValueError(f"{flag}: {text!r} is not NAME://HOST:PORT")
    if not set(name) <= _NAME_CHARS:
        raise ValueError(f"{flag}: listener name {name!r} may hold only letters, digits, "
                         "'_' and '-'")
    host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{flag}: {text!r} has no port (NAME://HOST:PORT, the port in "
                         "0..65535; 0: any free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{flag}: {text!r}: an IPv6 host goes in brackets, [::1]:9092")
    return name, host, int(port)


def _entries(text: str, flag: str) -> list[tuple[str, str, int]]:
    found: list[tuple[str, str, int]] = []
    for part in text.split(","):
        if not part.strip():
            continue
        entry = _endpoint(part.strip(), flag)
        if any(entry[0] == seen[0] for seen in found):
            raise ValueError(f"{flag}: listener {entry[0]} is named twice")
        found.append(entry)
    return found


def _protocols(text: str) -> dict[str, KafkaSecurityProtocol]:
    """``NAME:PROTOCOL,...``; each protocol's own name maps to it unless given otherwise."""
    flag = "--kafka-listener-security-protocol-map"
    protocols = {protocol.value: protocol for protocol in KafkaSecurityProtocol}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.strip().partition(":")
        name, value = name.strip().upper(), value.strip().upper()
        if not sep or not name or value not in {p.value for p in KafkaSecurityProtocol}:
            raise ValueError(f"{flag}: {part.strip()!r} is not NAME:PROTOCOL, PROTOCOL one "
                             f"of {', '.join(p.value for p in KafkaSecurityProtocol)}")
        protocols[name] = KafkaSecurityProtocol(value)
    return protocols


def parse_listeners(listeners: str, advertised: str, protocol_map: str,
                    default_host: str) -> tuple[KafkaListenerSpec, ...]:
    """The listeners of ``--kafka-listeners`` (Kafka's syntax), in the order given.

    ``advertised`` (``--kafka-advertised-listeners``) names some of them again
    with the address clients are told (the others advertise their own);
    ``protocol_map`` gives each name its protocol (a name that is a protocol
    needs none). An empty bind host is ``default_host`` (``--host``).
    Raises ``ValueError`` naming the flag and the listener at fault.
    """
    bound = _entries(listeners, "--kafka-listeners")
    if not bound:
        raise ValueError("--kafka-listeners names no listener: NAME://HOST:PORT, "
                         "comma-separated")
    told = {name: (host, port) for name, host, port in
            _entries(advertised, "--kafka-advertised-listeners")}
    unknown = sorted(set(told) - {name for name, _, _ in bound})
    if unknown:
        raise ValueError(f"--kafka-advertised-listeners names {', '.join(unknown)}, not in "
                         "--kafka-listeners")
    protocols = _protocols(protocol_map)
    ports = [port for _, _, port in bound if port]
    if len(set(ports)) != len(ports):
        raise ValueError("--kafka-listeners: two listeners on one port; give each its own "
                         "(0: any free port)")
    specs = []
    for name, given_host, port in bound:
        protocol = protocols.get(name)
        if protocol is None:
            raise ValueError(f"listener {name} has no security protocol: add {name}:PROTOCOL "
                             "(PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL) to "
                             "--kafka-listener-security-protocol-map")
        host = given_host or default_host
        told_host, told_port = told.get(name, (host, 0))
        told_host = told_host or host
        if told_host in _META_HOSTS:
            raise ValueError(f"listener {name} would advertise {told_host or 'no host'}, which "
                             "no client can connect to: give --kafka-advertised-listeners "
                             f"{name}://HOST:PORT")
        specs.append(KafkaListenerSpec(name, protocol, host, port, told_host, told_port))
    return tuple(specs)


def check_listener_security(spec: KafkaListenerSpec, *, named: bool, tls_cert: str, tls_ca: str,
                            mechanisms: tuple[str, ...], token_auth: bool, anonymous: bool,
                            allow_plaintext: bool) -> None:
    """Refuse a listener less safe than the API port (docs/security.md, "Kafka").

    ``named``: from ``--kafka-listeners`` (the messages name the listener);
    ``token_auth``: the grants apply (a listener authenticating no one is
    refused unless ``anonymous``, i.e. named in
    ``--kafka-unauthenticated-listeners``); ``allow_plaintext``: a listener
    without TLS beside a TLS API is accepted.
    """
    protocol = spec.protocol
    where = (f"listener {spec.name} ({protocol.value})" if named
             else f"--kafka-security-protocol {protocol.value}")
    if protocol.tls and not tls_cert:
        raise ValueError(f"{where} needs --tls-cert and --tls-key (the Kafka listener "
                         "serves the API's certificate)")
    if protocol.sasl and not mechanisms:
        raise ValueError("--kafka-sasl-mechanisms names only OAUTHBEARER/PLAIN, which "
                         "carry a JWT: give --auth-token-secret-file (or "
                         "--auth-token-public-key-file), or add SCRAM-SHA-256/512")
    authenticated = protocol.sasl or (protocol.tls and bool(tls_ca))
    if token_auth and not authenticated and not anonymous:
        if named:
            raise ValueError(
                f"token authentication is on but {where} would let anyone in: map it to "
                "SASL_SSL or SASL_PLAINTEXT (or SSL with --tls-ca, client certificates) in "
                "--kafka-listener-security-protocol-map, or name it in "
                "--kafka-unauthenticated-listeners to accept clients with no role (the "
                "grants then allow them nothing)")
        raise ValueError(
            "token authentication is on but the Kafka listener would let anyone in: add "
            "--kafka-security-protocol SASL_SSL (or SASL_PLAINTEXT with "
            "--kafka-allow-plaintext; or SSL with --tls-ca, client certificates)")
    if tls_cert and not protocol.tls and not allow_plaintext:
        raise ValueError(
            f"the API serves TLS but {where} is plain text: use SSL or SASL_SSL, or add "
            "--kafka-allow-plaintext to accept it")
