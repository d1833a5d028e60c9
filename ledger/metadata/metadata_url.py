"""The ``--metadata-url`` of a cluster: ``zk://HOST:PORT[,HOST:PORT...]/CHROOT``.

A cluster's metadata lives in a ZooKeeper ensemble under one chroot, so that
several clusters (or other applications) can share an ensemble. The URL names
the ensemble's servers and that chroot::

    zk://zk1:2181,zk2:2181,zk3:2181/folio/prod
    zk://127.0.0.1:2181/folio
    zk://[::1]:2181/folio          (IPv6 literal in brackets)

Rules (``parse_metadata_url`` says which one a bad URL breaks): the scheme is
``zk``; at least one server; each ``HOST[:PORT]`` with a port in 1..65535
(2181 when left out, ZooKeeper's client port); no user, query or fragment;
the chroot is required (not ``/`` alone: a cluster's nodes never sit at the
root of an ensemble) and follows the metadata path rules of ``paths``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.errors import InvalidArgumentError
from ledger.metadata.paths import validate_path

__all__ = ["DEFAULT_ZOOKEEPER_PORT", "MetadataUrl", "MetadataUrlError", "parse_metadata_url"]

#: ZooKeeper's client port, used when a server is given without one.
DEFAULT_ZOOKEEPER_PORT = 2181
_SCHEME = "zk://"
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,62})?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62})?)*$")
_IPV6 = re.compile(r"^[0-9A-Fa-f:.]+$")


class MetadataUrlError(InvalidArgumentError, ValueError):
    """A ``--metadata-url`` that is not ``zk://HOST:PORT[,HOST:PORT...]/CHROOT``.

    Also a ``ValueError``, so the settings layer reports it as a usage error.
    """


@dataclass(frozen=True)
class MetadataUrl:
    """A parsed metadata URL.

    Attributes:
        servers: ``(host, port)`` of each ZooKeeper server, in the order given.
        chroot: the cluster's root path in the ensemble (``/folio``).
    """

    servers: tuple[tuple[str, int], ...]
    chroot: str

    @property
    def connect_string(self) -> str:
        """``host:port,host:port`` without the chroot (kazoo's and ZooKeeper's ``hosts``)."""
        return ",".join(f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
                        for host, port in self.servers)

    def __str__(self) -> str:
        return f"{_SCHEME}{self.connect_string}{self.chroot}"


def _error(url: str, problem: str) -> MetadataUrlError:
    return MetadataUrlError(
        f"metadata URL {url!r}: {problem} (expected zk://HOST:PORT[,HOST:PORT...]/CHROOT, "
        "e.g. zk://127.0.0.1:2181/folio)")


def _parse_server(url: str, server: str) -> tuple[str, int]:
    if not server:
        raise _error(url, "empty server in the server list")
    if server.startswith("["):
        host, bracket, rest = server[1:].partition("]")
        if not bracket or not host or not _IPV6.match(host):
            raise _error(url, f"bad IPv6 server {server!r} (write [ADDRESS]:PORT)")
        if rest and not rest.startswith(":"):
            raise _error(url, f"unexpected {rest!r} after the IPv6 address in {server!r}")
        port_text = rest[1:] if rest else None
    else:
        host, colon, port_text_or_empty = server.partition(":")
        port_text = port_text_or_empty if colon else None
        if ":" in port_text_or_empty:
            raise _error(url, f"server {server!r} has more than one ':' "
                              "(put an IPv6 address in brackets)")
        if not host:
            raise _error(url, f"server {server!r} has no host")
        if not _HOSTNAME.match(host):
            raise _error(url, f"server {server!r}: {host!r} is not a host name or address")
    if port_text is None:
        return host, DEFAULT_ZOOKEEPER_PORT
    if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
        raise _error(url, f"server {server!r}: port {port_text!r} is not in 1..65535")
    return host, int(port_text)


def parse_metadata_url(url: str) -> MetadataUrl:
    """Parse ``zk://HOST:PORT[,HOST:PORT...]/CHROOT``.

    Raises:
        MetadataUrlError: naming the rule the URL breaks.
    """
    if not isinstance(url, str) or not url.strip():
        raise _error(str(url), "empty")
    text = url.strip()
    scheme, separator, _ = text.partition("://")
    if not separator:
        raise _error(url, "no scheme")
    if scheme.lower() != "zk":
        raise _error(url, f"unknown scheme {scheme!r}; only zk:// (ZooKeeper) is supported")
    rest = text[len(scheme) + 3:]
    for mark, what in (("?", "query"), ("#", "fragment"), ("@", "user")):
        if mark in rest:
            raise _error(url, f"a {what} ({mark!r}) is not allowed")
    servers_text, slash, chroot_text = rest.partition("/")
    if not servers_text:
        raise _error(url, "no ZooKeeper server")
    servers = tuple(_parse_server(url, server.strip()) for server in servers_text.split(","))
    if len(set(servers)) != len(servers):
        raise _error(url, "a server is named twice")
    chroot = "/" + chroot_text
    if not slash or chroot == "/":
        raise _error(url, "no chroot: add the cluster's root path, e.g. /folio")
    try:
        validate_path(chroot)
    except InvalidArgumentError as error:
        raise _error(url, f"bad chroot: {error}") from None
    return MetadataUrl(servers=servers, chroot=chroot)
