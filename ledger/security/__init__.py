"""Security shared by every Folio server process: TLS credentials and JWT tokens.

Both the bookie (``ledger.bookie``) and the broker (``broker.auth``,
``broker.app``) use this one package, so the cluster paths (broker to bookie
through the registry, broker to broker) get the same seams:

- ``tls``: server credentials that reload their certificate files when they
  change (no restart on rotation), client credentials for the broker's
  channels to bookies (reloaded too), and the HTTPS settings of a metrics port.
- ``tokens``: JWT verification (HS256 with a secret, RS256/ES256 with a
  public key; ``sub`` is the role; expiry enforced) and creation for
  ``folio token create``.
- ``interceptor``: the aio server interceptor that authenticates a call
  once (its ``authorization: Bearer`` metadata) before any handler runs;
  health checks and reflection stay open.
"""

from ledger.security.tls import ClientTls, ReloadingChannelCredentials, ServerTls

__all__ = ["ClientTls", "ReloadingChannelCredentials", "ServerTls"]
