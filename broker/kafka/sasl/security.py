"""What the Kafka listener asks of a connection: ``KafkaSecurity``, built from the settings.

``tls``: connections are TLS (SSL, SASL_SSL); ``authenticator``: they must
authenticate with SASL first (SASL_PLAINTEXT, SASL_SSL); ``certificate_roles``:
SSL with client certificates and no SASL, the certificate's CN is the role.
Neither of the last two: the listener authenticates no one (principal None).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.kafka.sasl.credentials import ScramCredentialStore
from broker.kafka.sasl.delegation import DelegationTokens
from broker.kafka.sasl.mechanisms import Authenticator
from broker.kafka.sasl.refusals import Refusals
from broker.kafka.sasl.tls import ListenerTls
from ledger.security.jwks import JwksSettings

__all__ = ["KafkaSecurity", "KerberosSettings"]


@dataclass(frozen=True)
class KerberosSettings:
    """What GSSAPI was started with, as DescribeConfigs reports it (Kafka's names).

    ``service_name``: ``sasl.kerberos.service.name``; ``rules``:
    ``sasl.kerberos.principal.to.local.rules`` as given.
    """

    service_name: str = "kafka"
    rules: str = "DEFAULT"


@dataclass
class KafkaSecurity:
    """One listener's security (see the module docstring).

    Attributes:
        credentials: the cluster's SCRAM credentials (AlterUserScramCredentials
            changes them whatever the listener's protocol).
        tls: the listener's TLS, None: plain text.
        authenticator: the SASL mechanisms, None: no SASL.
        certificate_roles: a client certificate's CN is the role (SSL
            with ``tls_ca``, no SASL).
        super_users: roles that may manage SCRAM credentials when the
            listener authenticates.
        refusals: counts and logs refused connections.
        oauth: the identity provider's key set OAUTHBEARER also accepts
            (``--kafka-oauth-jwks-url``), None: Folio's tokens only.
        tokens: the cluster's Kafka delegation tokens (None: off, no secret).
        kerberos: GSSAPI's settings when it is served (None: it is not).
    """

    credentials: ScramCredentialStore
    tls: ListenerTls | None = None
    authenticator: Authenticator | None = None
    certificate_roles: bool = False
    super_users: frozenset[str] = frozenset()
    refusals: Refusals = field(default_factory=Refusals)
    oauth: JwksSettings | None = None
    tokens: DelegationTokens | None = None
    kerberos: KerberosSettings | None = None

    @property
    def authenticates(self) -> bool:
        """Whether every connection must authenticate before any other request."""
        return self.authenticator is not None or self.certificate_roles
