"""Metadata stores by URL scheme: ``open_store(url)`` picks the ``MetadataStore``.

As BookKeeper's ``MetadataDrivers.getBookieDriver(uri)`` does, the scheme of a
metadata URL chooses the backend, and every caller holds the result as a
``ledger.api.MetadataStore``, never as the concrete class:

=============  ==========================================  ============================
scheme         URL                                         store
=============  ==========================================  ============================
``zk``         ``zk://HOST:PORT[,HOST:PORT...]/CHROOT``    ``ZooKeeperMetadataStore``: a
                                                           cluster's, shared by all its
                                                           processes (needs kazoo, the
                                                           ``cluster`` extra)
``rocksdb``    ``rocksdb:///ABSOLUTE/PATH``                ``RocksDBMetadataStore``: the
                                                           embedded one (standalone);
                                                           one process at a time
=============  ==========================================  ============================

``check_store_url`` validates a URL without opening anything (settings do it at
load, so a bad ``--metadata-url`` is a usage error); a scheme not in the table
raises ``UnknownSchemeError`` naming the known ones. ``open_store`` opens:

- ``create=False`` (a process joining a cluster): the place must exist (the
  ZooKeeper chroot, the RocksDB directory), else ``MetadataError`` saying to
  run ``folio cluster init``; ``create=True`` (``folio cluster init``,
  standalone) makes it;
- ``session_timeout_ms`` is the ZooKeeper session's (the embedded store's
  session is the store's life: ephemeral nodes go when it closes);
- ``connect_timeout_ms`` bounds the first connection (ZooKeeper).

A new backend is one ``StoreScheme`` row in ``SCHEMES``: its URL check and its
opener (imported when opened, so that a process never loads a backend it does
not use: kazoo only for ``zk://``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ledger.api import MetadataStore
from ledger.errors import MetadataError
from ledger.metadata.metadata_url import MetadataUrlError, parse_metadata_url

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "SCHEMES",
    "StoreOptions",
    "StoreScheme",
    "UnknownSchemeError",
    "check_store_url",
    "open_store",
    "scheme_of",
]

#: ZooKeeper session timeout unless the caller gives one: a process that dies is
#: noticed (its ephemeral registration vanishes) this long after its last heartbeat.
DEFAULT_SESSION_TIMEOUT_MS = 6_000
#: How long a first connection may take unless the caller gives a bound.
DEFAULT_CONNECT_TIMEOUT_MS = 30_000


class UnknownSchemeError(MetadataUrlError):
    """A metadata URL whose scheme no store serves (a ``ValueError``: a usage error)."""


@dataclass(frozen=True)
class StoreOptions:
    """How to open a store (each backend uses what applies to it).

    Attributes:
        create: make the place (chroot, directory) if missing; else it must exist.
        session_timeout_ms: the ZooKeeper session timeout asked for.
        connect_timeout_ms: how long to try before giving up on a first connection.
    """

    create: bool = False
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS


@dataclass(frozen=True)
class StoreScheme:
    """One row of the registry.

    Attributes:
        name: the scheme (``zk``), lower case.
        form: the URL's shape, for errors and ``--help``.
        check: validates a URL of this scheme and returns its canonical form;
            raises ``MetadataUrlError`` naming the rule broken.
        open: opens the store at a checked URL.
    """

    name: str
    form: str
    check: Callable[[str], str]
    open: Callable[[str, StoreOptions], Awaitable[MetadataStore]]


def _check_zookeeper(url: str) -> str:
    return str(parse_metadata_url(url))


async def _open_zookeeper(url: str, options: StoreOptions) -> MetadataStore:
    try:
        # Imported here: kazoo (the `cluster` extra) is needed only for zk://.
        from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore  # noqa: PLC0415
    except ImportError as error:
        raise MetadataError(f"{url}: zk:// needs the ZooKeeper client kazoo ({error}): "
                            "pip install 'folio[cluster]'") from None
    return await ZooKeeperMetadataStore.connect(
        url, create_chroot=options.create, session_timeout_ms=options.session_timeout_ms,
        connect_timeout_ms=options.connect_timeout_ms)


_ROCKSDB_FORM = "rocksdb:///ABSOLUTE/PATH"


def _rocksdb_path(url: str) -> str:
    rest = url.strip()[len("rocksdb://"):]
    problem: str | None = None
    if not rest.startswith("/"):
        problem = "the path must be absolute (three slashes: rocksdb:///var/lib/folio/metadata)"
    elif rest.rstrip("/") == "":
        problem = "no directory"
    # No query or fragment: everything after the scheme is the path, as a data
    # directory may name it (a '#' or '?' included).
    if problem is not None:
        raise MetadataUrlError(f"metadata URL {url!r}: {problem} (expected {_ROCKSDB_FORM})")
    return os.path.normpath(rest)


def _check_rocksdb(url: str) -> str:
    return f"rocksdb://{_rocksdb_path(url)}"


async def _open_rocksdb(url: str, options: StoreOptions) -> MetadataStore:
    from ledger.metadata.rocksdb_store import RocksDBMetadataStore  # noqa: PLC0415

    path = _rocksdb_path(url)
    # One stat at open (as the store's own makedirs): not worth a thread.
    if not options.create and not os.path.isdir(path):  # noqa: ASYNC240
        raise MetadataError(f"{url}: no metadata store at {path}: run `folio cluster init "
                            f"--metadata-url {url}` first")
    return RocksDBMetadataStore(path)


#: The registry: scheme -> its row. Order is the order errors and docs list them.
SCHEMES: dict[str, StoreScheme] = {
    scheme.name: scheme for scheme in (
        StoreScheme("zk", "zk://HOST:PORT[,HOST:PORT...]/CHROOT", _check_zookeeper,
                    _open_zookeeper),
        StoreScheme("rocksdb", _ROCKSDB_FORM, _check_rocksdb, _open_rocksdb),
    )
}


def scheme_of(url: str) -> StoreScheme:
    """The registry row for ``url``'s scheme.

    Raises:
        MetadataUrlError: no scheme, or empty.
        UnknownSchemeError: a scheme no store serves (the message names the known ones).
    """
    known = ", ".join(f"{row.name}:// ({row.form})" for row in SCHEMES.values())
    if not isinstance(url, str) or not url.strip():
        raise MetadataUrlError(f"metadata URL {url!r}: empty (known schemes: {known})")
    scheme, separator, _ = url.strip().partition("://")
    if not separator or not scheme:
        raise MetadataUrlError(f"metadata URL {url!r}: no scheme (known schemes: {known})")
    row = SCHEMES.get(scheme.lower())
    if row is None:
        raise UnknownSchemeError(
            f"metadata URL {url!r}: unknown scheme {scheme!r} (known schemes: {known})")
    return row


def check_store_url(url: str) -> str:
    """Validate ``url`` without opening anything; return its canonical form.

    Raises:
        MetadataUrlError: naming the rule the URL breaks (``UnknownSchemeError``
            for an unknown scheme). Both are ``ValueError``s.
    """
    return scheme_of(url).check(url.strip())


async def open_store(url: str, *, create: bool = False,
                     session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                     connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS) -> MetadataStore:
    """Open the metadata store ``url`` names (see the module for the schemes).

    The caller closes it (``await store.close()``).

    Raises:
        MetadataUrlError: a bad URL; ``UnknownSchemeError``: an unknown scheme.
        MetadataUnavailableError: the backend did not answer within ``connect_timeout_ms``.
        MetadataError: the place does not exist (and ``create`` is false), or
            the backend cannot be opened (its message says why).
    """
    row = scheme_of(url)
    canonical = row.check(url.strip())
    return await row.open(canonical, StoreOptions(
        create=create, session_timeout_ms=session_timeout_ms,
        connect_timeout_ms=connect_timeout_ms))
