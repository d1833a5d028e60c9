"""How a broker reaches the processes beside it: ``folio bookie``s and the other brokers.

``RemoteBookies``: the ledger service of ``folio bookie`` processes named by
``--bookies``; ``PeerSettings``: how a cluster broker calls the other brokers
(the internal protocol). ``ledger.settings`` layers them from defaults, a TOML
file, the environment and flags, beside ``BrokerConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.cluster.peers import PeerSecurity
from ledger.bookie.client_security import BookieSecurity
from ledger.client.directory import BookieDirectory
from ledger.config import check_quorums
from ledger.security.tls import ClientTls

if TYPE_CHECKING:
    from broker.broker_config import BrokerConfig

__all__ = ["PeerSettings", "RemoteBookies"]


@dataclass(frozen=True)
class RemoteBookies:
    """Bookies reached over gRPC (``--bookies``), and how a ledger is placed on them.

    Attributes:
        bookies: ``host:port`` of each bookie, comma-separated.
        ensemble_size: bookies a ledger is striped over (E).
        write_quorum: copies of each entry (Qw).
        ack_quorum: copies that must be durable before an add is confirmed (Qa).
    """

    bookies: str = ""
    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1

    def __post_init__(self) -> None:
        addresses = self.addresses()
        if not addresses:
            raise ValueError("bookies must name at least one bookie (host:port, comma-separated)")
        for address in addresses:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ValueError(f"bookie address {address!r} is not host:port")
        if len(set(addresses)) != len(addresses):
            raise ValueError(f"bookies names a bookie twice: {self.bookies}")
        check_quorums(self.ensemble_size, self.write_quorum, self.ack_quorum)
        if self.ensemble_size > len(addresses):
            raise ValueError(f"ensemble_size {self.ensemble_size} needs as many bookies, "
                             f"got {len(addresses)}")

    def addresses(self) -> list[str]:
        """The bookie addresses, in the order given."""
        return [part.strip() for part in self.bookies.split(",") if part.strip()]

    def directory(self, security: BookieSecurity) -> BookieDirectory:
        """A directory of gRPC clients of the bookies (closed by ``LedgerClient.close``).

        Raises:
            ValueError: a TLS or token file cannot be read or is not valid.
        """
        connect = security.connector()
        return BookieDirectory([connect(address) for address in self.addresses()],
                               connect=connect)


@dataclass(frozen=True)
class PeerSettings:
    """How a cluster broker calls the other brokers (``proto/broker/v1/internal.proto``).

    The internal calls go to the other brokers' normal port, so they take the
    same TLS as clients: when this broker serves TLS (``tls_cert``) it calls
    its peers over TLS, trusting ``peer_tls_ca`` (default: its own
    ``tls_ca``, else the system's roots) and presenting its own certificate
    when it has a ``tls_ca`` (the brokers then require client certificates).

    Attributes:
        peer_tls_ca: PEM CA of the other brokers' certificates.
        peer_tls_server_name: the name checked in their certificates instead
            of their host (empty: the host).
        peer_token_file: a file holding the JWT sent to the other brokers
            when they check tokens: its role must be in their ``super_users``
            (re-read when it changes).
    """

    peer_tls_ca: str = ""
    peer_tls_server_name: str = ""
    peer_token_file: str = ""

    def security(self, config: BrokerConfig) -> PeerSecurity:
        """The TLS and token towards the peers, given this broker's own ``config``."""
        if not config.tls_cert:
            if self.peer_tls_ca or self.peer_tls_server_name:
                raise ValueError("peer_tls_ca and peer_tls_server_name need tls_cert: the "
                                 "brokers of a cluster serve their peers on the TLS port")
            return PeerSecurity(None, self.peer_token_file)
        mutual = bool(config.tls_ca)
        tls = ClientTls(self.peer_tls_ca or config.tls_ca,
                        config.tls_cert if mutual else "", config.tls_key if mutual else "",
                        self.peer_tls_server_name)
        return PeerSecurity(tls, self.peer_token_file)
