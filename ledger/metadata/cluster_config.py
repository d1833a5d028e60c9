"""Cluster-mode settings shared by ``folio bookie`` and ``folio broker``.

Without ``metadata_url`` a process runs as before (a bookie alone, a broker
with its metadata under ``--data-dir`` and ``--bookies``); with it, the
process joins the cluster whose metadata that URL names (``ledger.metadata.stores``:
a ZooKeeper chroot, ``zk://``, or for one process alone ``rocksdb://``) and
registers there under ``advertised_address``. ``ledger.settings`` layers
the fields like every other setting (``--metadata-url``,
``FOLIO_BROKER_METADATA_URL`` / ``FOLIO_BOOKIE_METADATA_URL``, TOML key
``metadata_url``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.metadata.stores import DEFAULT_SESSION_TIMEOUT_MS, check_store_url

__all__ = ["DEFAULT_SESSION_TIMEOUT_MS", "ClusterConfig", "check_address"]

_WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", ""})


def check_address(name: str, address: str) -> None:
    """Raise ``ValueError`` unless ``address`` is ``host:port`` with a port in 1..65535."""
    host, colon, port = address.rpartition(":")
    if not colon or not host or "/" in address or not port.isdigit() \
            or not 0 < int(port) <= 65535:
        raise ValueError(f"{name} {address!r} is not host:port (port in 1..65535)")


@dataclass(frozen=True)
class ClusterConfig:
    """Where the cluster's metadata is, and how this process is known in it.

    Attributes:
        metadata_url: ``zk://HOST:PORT[,HOST:PORT...]/CHROOT`` (or another scheme of
            ``ledger.metadata.stores``); empty: not in a cluster.
        advertised_address: ``host:port`` others reach this process on
            (registered in ZooKeeper); empty: the host and port it listens on.
        metadata_session_timeout_ms: the ZooKeeper session timeout asked for.
    """

    metadata_url: str = ""
    advertised_address: str = ""
    metadata_session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS

    def __post_init__(self) -> None:
        if self.metadata_url:
            check_store_url(self.metadata_url)  # MetadataUrlError is a ValueError
        if self.advertised_address:
            if not self.metadata_url:
                raise ValueError("advertised_address needs metadata_url (it is registered "
                                 "in the cluster's metadata)")
            check_address("advertised_address", self.advertised_address)
        if self.metadata_session_timeout_ms <= 0:
            raise ValueError("metadata_session_timeout_ms must be positive, got "
                             f"{self.metadata_session_timeout_ms}")

    @property
    def enabled(self) -> bool:
        """Whether this process runs in a cluster (a metadata URL is set)."""
        return bool(self.metadata_url)

    def url(self) -> str:
        """The metadata URL in its canonical form (``enabled`` must be true)."""
        return check_store_url(self.metadata_url)

    def check_host(self, host: str) -> None:
        """Raise ``ValueError`` if in a cluster on a wildcard host with no advertised address.

        ``0.0.0.0`` (or ``::``) is where to listen, not where others can connect.
        """
        if self.enabled and not self.advertised_address and host in _WILDCARDS:
            raise ValueError(f"--host {host} listens on every interface: give "
                             "--advertised-address HOST:PORT, the address others reach it on")

    def address(self, host: str, port: int) -> str:
        """The address to register: ``advertised_address``, else ``host:port``."""
        return self.advertised_address or f"{host}:{port}"
