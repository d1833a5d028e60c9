"""How a client of bookies (a broker, an auto-recovery worker) reaches them securely.

``BookieSecurity`` holds the ``--bookie-tls-*`` and ``--bookie-token-file``
settings that ``folio broker`` and ``folio autorecovery`` share;
``connector`` makes the clients through ``remote.bookie_client_factory``.
It lives in the ledger layer so the worker (below the broker) can use it;
``broker.broker_config`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ledger.bookie.remote import GrpcBookieClient, bookie_client_factory
from ledger.security.tls import ClientTls

__all__ = ["BookieSecurity"]


@dataclass(frozen=True)
class BookieSecurity:
    """How a client reaches the bookies securely, however it finds them.

    The same settings with ``--bookies`` (``RemoteBookies``) and in a cluster
    (``--metadata-url``, bookies found in ZooKeeper): both make their clients
    through ``connector``.

    Attributes:
        bookie_tls_ca: PEM CA the bookies' certificates must chain to; set:
            the client talks TLS to the bookies.
        bookie_tls_cert: PEM client certificate presented to bookies that
            require one (mutual TLS).
        bookie_tls_key: its PEM private key.
        bookie_tls_server_name: the name checked in the bookies' certificates
            instead of their host (empty: the host).
        bookie_token_file: a file holding the JWT sent to bookies with token
            authentication (re-read when it changes).
    """

    bookie_tls_ca: str = ""
    bookie_tls_cert: str = ""
    bookie_tls_key: str = ""
    bookie_tls_server_name: str = ""
    bookie_token_file: str = ""

    def __post_init__(self) -> None:
        if (self.bookie_tls_cert or self.bookie_tls_server_name) and not self.bookie_tls_ca:
            raise ValueError("bookie_tls_cert and bookie_tls_server_name need bookie_tls_ca "
                             "(the CA of the bookies' certificates)")
        self.client_tls()

    def client_tls(self) -> ClientTls | None:
        """The TLS towards the bookies; None: plain text."""
        if not self.bookie_tls_ca:
            return None
        return ClientTls(self.bookie_tls_ca, self.bookie_tls_cert, self.bookie_tls_key,
                         self.bookie_tls_server_name)

    def connector(self) -> Callable[[str], GrpcBookieClient]:
        """Makes a client of a bookie by address, with these TLS files and token.

        Raises:
            ValueError: a TLS or token file cannot be read or is not valid.
        """
        return bookie_client_factory(self.client_tls(), self.bookie_token_file)
