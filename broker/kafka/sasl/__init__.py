"""Authentication on the Kafka listener: TLS, SASL mechanisms and SCRAM credentials.

What a connection must do is the listener's ``kafka_security_protocol``
(docs/security.md, "Kafka"): nothing (PLAINTEXT), TLS (SSL; with the API's
``tls_ca`` a client certificate whose CN is the role), or SASL over plain
text or TLS, by one of the mechanisms served:

- ``OAUTHBEARER`` carrying a Folio JWT (its ``sub`` is the role);
- ``PLAIN`` with the JWT as the password (as KoP does; the user name, when
  given, must be the token's role);
- ``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (RFC 5802/7677, no channel
  binding) against credentials kept salted and hashed in the metadata store
  (``credentials.ScramCredentialStore``); the user name is the role. Or a
  Kafka delegation token (KIP-48): the token id as the user name, its HMAC
  as the password, the role its owner (``delegation``, ``token_login``);
- ``GSSAPI`` (Kerberos V5, RFC 4752) with the broker's keytab, when named;
  the client's principal mapped by Kafka's principal-to-local rules is the
  role (``kerberos``, ``kerberos_names``; the ``gssapi`` extra).

Modules: ``scram`` (the RFC's arithmetic and the server side of one
exchange), ``mechanisms`` (one exchange per mechanism, the ``Authenticator``
that starts them), ``credentials`` (the store), ``tls`` (the listener's
reloading ``ssl.SSLContext`` and a client certificate's role), ``refusals``
(the metric and the rate-limited log of refused connections), ``delegation``
(delegation tokens: the store, the HMAC, the sweep), ``token_login`` (which
credential a SCRAM exchange checks: a user's or a token's). The connection
(``broker.kafka.connection``) runs the exchange and sets its ``principal``.
"""
