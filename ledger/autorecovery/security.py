"""How the auto-recovery worker inside ``folio bookie`` reaches the other bookies.

A secured cluster's bookies refuse a plain client, so the worker takes the
bookie's own TLS files: it trusts ``--tls-ca`` (the system's roots if the
bookie has none) and presents ``--tls-cert``/``--tls-key`` as its client
certificate, so bookies that require mutual TLS accept it (they all trust
the same CA). Tokens cannot be derived from the bookie's verifying key, so
``--auto-recovery-token-file`` names the token to send (a role in the other
bookies' ``--super-users``). A bookie that checks tokens but has no such file
still starts (it serves fine) and logs a WARNING: its worker would be refused.
``folio autorecovery`` takes the broker's ``--bookie-tls-*`` and
``--bookie-token-file`` instead (``ledger.bookie.client_security``).
"""

from __future__ import annotations

from collections.abc import Callable

from ledger.autorecovery.config import AutoRecoveryConfig
from ledger.bookie.remote import GrpcBookieClient, bookie_client_factory
from ledger.config import BookieListenConfig
from ledger.security.tls import ClientTls

__all__ = ["in_bookie_connector", "in_bookie_warnings"]


def in_bookie_connector(listen: BookieListenConfig, config: AutoRecoveryConfig,
                        ) -> Callable[[str], GrpcBookieClient]:
    """Makes the in-bookie worker's clients of the other bookies.

    Raises:
        ValueError: a TLS or token file cannot be read or is not valid.
    """
    tls = ClientTls(listen.tls_ca, listen.tls_cert, listen.tls_key) if listen.tls_cert else None
    return bookie_client_factory(tls, config.auto_recovery_token_file)


def in_bookie_warnings(listen: BookieListenConfig, config: AutoRecoveryConfig) -> list[str]:
    """What would make the in-bookie worker be refused by the other bookies."""
    if listen.token_auth and not config.auto_recovery_token_file:
        return ["this bookie checks tokens but --auto-recovery-token-file is not set: its "
                "auto-recovery worker sends none, so bookies that check tokens refuse it and "
                "it re-replicates nothing; give it a token whose role is in their "
                "--super-users (or run `folio autorecovery` with --bookie-token-file)"]
    return []
