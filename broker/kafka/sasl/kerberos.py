"""GSSAPI (Kerberos V5) on the Kafka listener: the acceptor's keys and one exchange (RFC 4752).

What Kafka's broker does through Java's SASL GSSAPI server
(``GssKrb5Server``), over SaslAuthenticate frames:

1. **Context.** Each client message is a GSS token (the first the Kerberos
   AP-REQ with the service ticket) given to ``gss_accept_sec_context`` with
   the broker's keys (``--kafka-sasl-kerberos-keytab``); its answer (the
   AP-REP of mutual authentication) goes back. Once the context is
   established, the ticket's service must be ``--kafka-sasl-kerberos-service-name``
   (the first component of the broker's principal, ``kafka/host@REALM``) and
   the client's principal must map to a user name by the rules.
2. **Security layer.** The client answers with an empty message; the broker
   sends, wrapped (integrity only), 4 bytes: the layers it offers (``0x01``:
   none, the only one Kafka offers) and the largest message it takes
   (3 bytes, 65536 as Java's default). The client answers, wrapped, with
   the layer it chose (must be ``0x01``), its own size and an
   authorization id, which is ignored: the principal is always the
   authenticated one, as Kafka's ``SaslServerCallbackHandler`` decides.

The role is the mapped user name (Kafka's ``User:<name>``); the session
lasts until the service ticket ends (KIP-368: the client re-authenticates,
or reconnects, with a fresh ticket). GSS calls read the keytab and decrypt:
they run in a worker thread, not on the event loop. Every failure refuses
with SASL_AUTHENTICATION_FAILED and the GSS message (never a token or key).

Needs the Python package ``gssapi`` (the ``gssapi`` extra, built against
MIT Kerberos' ``libkrb5-dev``); ``broker.app.kafka_listener`` imports this
module only when GSSAPI is served.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Final

import gssapi
import gssapi.raw.exceptions as gss_errors
from gssapi.raw.misc import GSSError

from broker.kafka.sasl.kerberos_names import KerberosRules, NoMatchingRuleError
from broker.kafka.sasl.mechanisms import SaslRefusedError
from ledger.security.tokens import Principal

__all__ = ["MAX_MESSAGE_BYTES", "NO_SECURITY_LAYER", "KerberosAcceptor"]

log = logging.getLogger(__name__)

#: RFC 4752's bit of "no security layer": the only one Kafka offers.
NO_SECURITY_LAYER: Final = 0x01
#: The largest wrapped message the broker says it takes (Java's default maxbuffer).
MAX_MESSAGE_BYTES: Final = 65536


def _gss_message(error: GSSError) -> str:
    """The library's words, without its codes and the filler "see the minor code"."""
    try:
        text = error.gen_message()
    except Exception:
        return f"GSS error (major {error.maj_code:#x}, minor {error.min_code})"
    text = _FILLER.sub("", text).replace(", Minor (0): Unknown error", "")
    return _CODES.sub("", text).strip(" ,.") or text


_CODES: Final = re.compile(r"(Major|Minor) \(\d+\): ")
_FILLER: Final = re.compile(r"(Major \(\d+\): )?Unspecified GSS failure\.\s+Minor code may "
                            r"provide more information,?\s*")


def _reason(error: GSSError) -> str:
    if isinstance(error, gss_errors.ExpiredCredentialsError | gss_errors.ExpiredContextError
                  | gss_errors.ExpiredTokenError) or "expired" in _gss_message(error).lower():
        return "expired_token"
    if isinstance(error, gss_errors.InvalidTokenError | gss_errors.BadMechanismError):
        return "bad_message"
    return "bad_credentials"


class KerberosAcceptor:
    """The broker's Kerberos keys and rules; ``start`` begins one connection's exchange.

    Args:
        keytab: the keytab with the broker's service key(s) (JAAS ``keyTab``).
        principal: the broker's principal in it (JAAS ``principal``,
            ``kafka/host@REALM``); empty: any principal of the keytab whose
            first component is ``service_name``.
        service_name: Kafka's ``sasl.kerberos.service.name``.
        rules: Kafka's ``sasl.kerberos.principal.to.local.rules``.

    Raises ``ValueError`` when the keytab cannot be read or holds no key of
    ``principal``.
    """

    def __init__(self, keytab: str, principal: str, service_name: str,
                 rules: KerberosRules) -> None:
        self.service_name = service_name
        self.rules = rules
        if principal and _service(principal) != service_name:
            raise ValueError(f"--kafka-sasl-kerberos-principal {principal} is not of the service "
                             f"{service_name!r} (--kafka-sasl-kerberos-service-name)")
        try:
            name = (gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal
                    else None)
            self._credentials = gssapi.Credentials(
                name=name, usage="accept", mechs=[gssapi.MechType.kerberos],
                store={"keytab": keytab})
        except GSSError as error:
            raise ValueError(f"--kafka-sasl-kerberos-keytab {keytab}: cannot take the key of "
                             f"{principal or 'any principal'} from it: "
                             f"{_gss_message(error)}") from None
        self.default_realm = _default_realm()

    def start(self) -> GssapiExchange:
        """A new exchange on this acceptor's keys."""
        return GssapiExchange(self)

    def accept_context(self) -> gssapi.SecurityContext:
        """A fresh acceptor security context."""
        return gssapi.SecurityContext(creds=self._credentials, usage="accept")


def _service(principal: str) -> str:
    """The first component of ``principal`` (``kafka`` of ``kafka/host@REALM``)."""
    return principal.split("@", maxsplit=1)[0].split("/", maxsplit=1)[0]


def _default_realm() -> str:
    """krb5.conf's ``default_realm`` (empty: none configured)."""
    try:
        probe = gssapi.Name("folio-probe", gssapi.NameType.kerberos_principal)
        return str(probe.canonicalize(gssapi.MechType.kerberos)).rpartition("@")[2]
    except GSSError:
        return ""


class GssapiExchange:
    """One connection's GSSAPI exchange (``broker.kafka.sasl.mechanisms.Exchange``)."""

    def __init__(self, acceptor: KerberosAcceptor) -> None:
        self._acceptor = acceptor
        self._context = acceptor.accept_context()
        self._stage = "context"
        self._user = ""
        self._client = ""
        self.principal: Principal | None = None

    async def step(self, message: bytes) -> bytes:
        try:
            if self._stage == "context":
                return await self._establish(message)
            if self._stage == "offer":
                return await self._offer(message)
            if self._stage == "layer":
                return await self._choose(message)
        except GSSError as error:
            self._stage = "done"
            raise SaslRefusedError(_reason(error), "authentication failed (GSSAPI): "
                                   f"{_gss_message(error)}") from None
        raise SaslRefusedError("bad_message", "GSSAPI: the exchange is already complete")

    async def _establish(self, token: bytes) -> bytes:
        if not token:  # (the library would take it as "no token yet" and start SPNEGO)
            self._stage = "done"
            raise SaslRefusedError("bad_message", "authentication failed (GSSAPI): an empty "
                                   "token; expected a Kerberos AP-REQ")
        answer = await asyncio.to_thread(self._context.step, token)
        if not self._context.complete:
            return answer or b""
        client = str(self._context.initiator_name)
        target = str(self._context.target_name)
        service = _service(target)
        if service != self._acceptor.service_name:
            self._stage = "done"
            raise SaslRefusedError("bad_credentials", "authentication failed (GSSAPI): the "
                                   f"ticket is for {target}, not a {self._acceptor.service_name!r}"
                                   " service principal (sasl.kerberos.service.name)")
        try:
            self._user = self._acceptor.rules.short_name(client, self._acceptor.default_realm)
        except NoMatchingRuleError as error:
            self._stage = "done"
            raise SaslRefusedError("bad_credentials",
                                   f"authentication failed (GSSAPI): {error}") from None
        self._client = client
        self._stage = "offer"
        return answer or b""

    async def _offer(self, message: bytes) -> bytes:
        if message:
            self._stage = "done"
            raise SaslRefusedError("bad_message", "GSSAPI: expected an empty message once the "
                                   "security context is established")
        offer = bytes([NO_SECURITY_LAYER]) + MAX_MESSAGE_BYTES.to_bytes(3, "big")
        wrapped = await asyncio.to_thread(self._context.wrap, offer, False)
        self._stage = "layer"
        return wrapped.message

    async def _choose(self, message: bytes) -> bytes:
        self._stage = "done"
        chosen = (await asyncio.to_thread(self._context.unwrap, message)).message
        if len(chosen) < 4:
            raise SaslRefusedError("bad_message", "GSSAPI: the security layer answer is shorter "
                                   "than 4 bytes")
        if chosen[0] != NO_SECURITY_LAYER:
            raise SaslRefusedError("bad_message", f"GSSAPI: the client chose security layer "
                                   f"{chosen[0]:#04x}; only 0x01 (none) is offered")
        authorization_id = chosen[4:].decode("utf-8", "replace")
        log.debug("kafka GSSAPI: %s authenticated as %r (authorization id %r ignored)",
                  self._client, self._user, authorization_id)
        lifetime_s = self._context.lifetime
        indefinite = lifetime_s is None or lifetime_s >= 0xFFFFFFFF  # GSS_C_INDEFINITE
        expires_at = None if indefinite else time.time() + lifetime_s
        self.principal = Principal(self._user, expires_at)
        return b""
