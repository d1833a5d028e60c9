"""The broker's ``folio standalone`` command (``folio broker`` is in ``broker.app.broker_cli``).

``folio.cli`` loads ``standalone_command`` through the ``folio.commands``
entry-point group. Settings (``StandaloneConfig``) are layered by
``ledger.settings``: defaults < ``--config FILE`` (its ``[standalone]`` table)
< environment (``FOLIO_STANDALONE_<OPTION>``, e.g.
``FOLIO_STANDALONE_DATA_DIR``) < flags; ``--print-config`` prints the result
as TOML that ``--config`` reads back.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from broker.standalone_config import StandaloneConfig
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from ledger.cli import setup_logging
from ledger.settings import Layers, add_arguments, to_toml

__all__ = ["resolve_standalone_config", "run_standalone_command", "standalone_command"]

COMPONENT = "standalone"
ENV_PREFIX = "FOLIO_STANDALONE_"

_HELP = {
    "data_dir": "directory of all data, created if missing (default ./folio-data)",
    "host": "address the API and metrics listen on (default 127.0.0.1)",
    "port": "port of the gRPC API, 0 for any free one (default 7070)",
    "metrics_port": "port of Prometheus metrics (/metrics), 0 for any free one (default 7071)",
    "durability": "sync: acknowledge appends once fsynced (default); async: once in the "
    "write-ahead log (a machine crash may lose acknowledged events)",
    "gc": "run the in-process bookie's garbage collector: it deletes ledgers whose metadata "
    "is gone (a delete the bookie failed); default on, --no-gc turns it off "
    "(docs/ledger.md, Garbage collection)",
    "gc_interval_ms": "time between two garbage collection passes; a ledger is deleted on the "
    "second pass that finds its metadata gone (default 900000: 15 minutes)",
    "stop_grace_s": "seconds in-flight calls get to finish on SIGTERM (default 10)",
    "retention_interval_s": "how often retention, ledger rollover by age, writer expiry and "
    "auto-scaling run (default 30)",
    "writer_expiry_ms": "segments forget the last event number of writers idle longer than "
    "this (default 604800000, 7 days)",
    "max_held_bytes": "bytes of uncommitted transaction blocks held over all streams "
    "(default 268435456, 256 MiB)",
    "max_held_ms": "how long a transaction's blocks may be held before its commit "
    "(default 120000)",
    "txn_snapshot_every_changes": "a segment's transaction buffer snapshots its aborted "
    "transactions after this many changes (default 1000)",
    "txn_snapshot_every_ms": "... or this long after its last snapshot (default 60000)",
    "txn_snapshot_chunk_bytes": "largest transaction buffer snapshot chunk (record of "
    "_txnbuffer_snapshots); 0 = the record limit (default 0)",
    "tls_cert": "PEM certificate of the gRPC API: with --tls-key it serves TLS; the files "
    "are reloaded when they change (docs/security.md)",
    "tls_key": "PEM private key of --tls-cert",
    "tls_ca": "PEM CA: clients must present a certificate it signed (mutual TLS)",
    "metrics_tls": "serve /metrics over HTTPS with --tls-cert/--tls-key (and --tls-ca); "
    "read at start only",
    "auth_token_secret_file": "HS256 secret: every gRPC call but health and reflection "
    "needs a JWT signed with it (authorization: Bearer), and per-topic permissions apply; "
    "a Kafka port then needs SASL (--kafka-security-protocol SASL_SSL)",
    "auth_token_public_key_file": "RSA or EC public key (RS256, ES256): as "
    "--auth-token-secret-file, for tokens signed with the private key",
    "super_users": "roles allowed everything, comma-separated (e.g. admin,ops)",
    "kafka_port": "serve the Kafka wire protocol on this port too, so Kafka clients use "
    "the same topics (docs/kafka.md); -1 = no Kafka listener (default), 0 = any free port",
    "kafka_advertised_host": "host Kafka clients are told to connect to in Metadata "
    "answers (default: --host)",
    "kafka_advertised_port": "port Kafka clients are told to connect to, when they reach "
    "the broker through a proxy or NAT (default 0: the Kafka port itself)",
    "kafka_security_protocol": "what a Kafka client must do on --kafka-port: PLAINTEXT "
    "(nothing; default), SSL (TLS with --tls-cert/--tls-key; with --tls-ca a client "
    "certificate, its CN the role), SASL_PLAINTEXT or SASL_SSL (authenticate with one of "
    "--kafka-sasl-mechanisms). With token authentication the Kafka port needs SASL (or SSL "
    "with --tls-ca); see docs/security.md",
    "kafka_sasl_mechanisms": "SASL mechanisms served, comma-separated (default "
    "OAUTHBEARER,PLAIN,SCRAM-SHA-256,SCRAM-SHA-512): OAUTHBEARER and PLAIN (JWT as the "
    "password) carry a Folio token; SCRAM users are made with `folio kafka-user add`; "
    "GSSAPI (Kerberos, named explicitly) needs --kafka-sasl-kerberos-keytab and the gssapi "
    "extra",
    "kafka_sasl_kerberos_keytab": "keytab holding the broker's Kerberos key (Kafka's JAAS "
    "keyTab), for GSSAPI; checked at start (docs/kafka.md, Security)",
    "kafka_sasl_kerberos_principal": "the broker's principal in --kafka-sasl-kerberos-keytab "
    "(Kafka's JAAS principal, e.g. kafka/broker1.example.com@EXAMPLE.COM); default: any of "
    "its principals of --kafka-sasl-kerberos-service-name",
    "kafka_sasl_kerberos_service_name": "Kafka's sasl.kerberos.service.name: the first "
    "component of the principal GSSAPI clients get tickets for (default kafka)",
    "kafka_sasl_kerberos_principal_to_local_rules": "Kafka's "
    "sasl.kerberos.principal.to.local.rules: how a client's principal becomes its role, "
    "comma-separated; DEFAULT (the default) maps user@DEFAULT_REALM and user/host@DEFAULT_REALM "
    "to user; RULE:[n:format](match)s/pattern/replacement/g/L as in Kafka",
    "kafka_delegation_token_secret_file": "file holding Kafka's delegation.token.secret.key, "
    "the key of delegation tokens' HMACs (the same on every broker of a cluster; changing it "
    "invalidates every token). Kafka clients may then make delegation tokens and "
    "authenticate with them over SCRAM (docs/kafka.md); default: none, delegation tokens "
    "are off (DELEGATION_TOKEN_AUTH_DISABLED)",
    "kafka_delegation_token_max_lifetime_ms": "Kafka's delegation.token.max.lifetime.ms: the "
    "longest a delegation token lives, renewals included (default 604800000, 7 days)",
    "kafka_delegation_token_expiry_time_ms": "Kafka's delegation.token.expiry.time.ms: a "
    "delegation token expires this long after its creation or last renewal (default "
    "86400000, 24 hours)",
    "kafka_delegation_token_expiry_check_interval_ms": "Kafka's "
    "delegation.token.expiry.check.interval.ms: how often expired delegation tokens are "
    "deleted from the metadata store; they stop authenticating at their expiry regardless "
    "(default 3600000, 1 hour)",
    "kafka_allow_plaintext": "accept a Kafka listener without TLS (PLAINTEXT or "
    "SASL_PLAINTEXT) while the gRPC API serves TLS (refused otherwise)",
    "kafka_listeners": "several Kafka listeners instead of --kafka-port, as Kafka's "
    "listeners: NAME://HOST:PORT comma-separated (e.g. INTERNAL://:9092,EXTERNAL://:9093; "
    "an empty HOST is --host, port 0 any free one). Each client is answered (Metadata, "
    "FindCoordinator, DescribeCluster) with the addresses of the listener it connected on, "
    "on every broker; replaces --kafka-port, --kafka-advertised-host/-port and "
    "--kafka-security-protocol (docs/kafka.md, Listeners)",
    "kafka_advertised_listeners": "Kafka's advertised.listeners: NAME://HOST:PORT "
    "comma-separated, what the clients of each listener named are told (default: the "
    "listener's own address; port 0: its bound port)",
    "kafka_listener_security_protocol_map": "Kafka's listener.security.protocol.map: "
    "NAME:PROTOCOL comma-separated, PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
    "SASL_SSL (a listener named after a protocol needs no entry)",
    "kafka_unauthenticated_listeners": "listeners (names, comma-separated) allowed to "
    "authenticate no one while token authentication is on: their clients have no role, so "
    "the grants allow them nothing (refused at start otherwise)",
    "kafka_auto_create_topics": "Kafka's auto.create.topics.enable: a Kafka client's Metadata "
    "request (a producer's, a consumer's with allow.auto.create.topics) creates a missing "
    "topic with --kafka-num-partitions segments (default on, as in Kafka); "
    "--no-kafka-auto-create-topics: a missing topic is UNKNOWN_TOPIC_OR_PARTITION at once",
    "kafka_num_partitions": "Kafka's num.partitions: segments of auto-created topics and of "
    "CreateTopics without a partition count (default 1, 1 to 1024)",
    "kafka_max_connections": "Kafka's max.connections: at this many open Kafka connections, "
    "a new one waits, unread, until another closes (default 2147483647: no limit)",
    "kafka_max_connections_per_ip": "Kafka's max.connections.per.ip: a Kafka connection more "
    "than this from one address is closed at once (default 2147483647: no limit)",
    "kafka_max_connections_per_ip_overrides": "Kafka's max.connections.per.ip.overrides: "
    "address:count pairs, comma-separated, e.g. 10.0.0.5:50,::1:200 (IP addresses only)",
    "kafka_group_migration_policy": "Kafka's group.consumer.migration.policy: bidirectional "
    "(default, as in Kafka 4.0): a classic consumer group with members becomes a KIP-848 "
    "consumer group when a group.protocol=consumer member joins, and classic again when its "
    "last such member leaves; upgrade or downgrade: only that way; disabled: neither (the "
    "joining member gets GROUP_ID_NOT_FOUND)",
    "kafka_offsets_retention_minutes": "Kafka's offsets.retention.minutes: the committed "
    "offsets of a Kafka consumer group expire once it has been empty this long (a group "
    "with members keeps the offsets of the topics it subscribes to); a fraction is allowed "
    "(default 10080, 7 days; docs/kafka.md, Offset retention)",
    "kafka_offsets_retention_check_interval_ms": "Kafka's offsets.retention.check.interval.ms: "
    "how often expired offsets are looked for and removed (default 600000, 10 minutes)",
    "kafka_transactional_id_expiration_ms": "Kafka's transactional.id.expiration.ms: a "
    "transactional id with no transaction activity this long is forgotten (its producer id "
    "and epoch); an ongoing transaction never expires (default 604800000, 7 days)",
    "kafka_transaction_remove_expired_transaction_cleanup_interval_ms": "Kafka's "
    "transaction.remove.expired.transaction.cleanup.interval.ms: how often expired "
    "transactional ids are looked for (default 3600000, 1 hour)",
    "kafka_oauth_jwks_url": "an OpenID Connect provider's JWKS (Kafka's "
    "sasl.oauthbearer.jwks.endpoint.url): OAUTHBEARER and the gRPC port accept its JWTs "
    "(signed RS*/PS*/ES*, with a kid) beside Folio's, and every gRPC call then needs a "
    "token; https://, http:// on a loopback host only, or file:/path (docs/kafka.md, "
    "Security)",
    "kafka_oauth_expected_audience": "accepted 'aud' values of the provider's tokens, "
    "comma-separated (default: not checked)",
    "kafka_oauth_expected_issuer": "the required 'iss' of the provider's tokens (default: "
    "not checked)",
    "kafka_oauth_sub_claim": "the claim of the provider's tokens that names the role "
    "(default sub)",
    "kafka_oauth_clock_skew_s": "seconds of leeway on the provider's tokens' exp, nbf and "
    "iat (default 30)",
    "kafka_oauth_jwks_refresh_ms": "the provider's key set is fetched again this often; a "
    "token with an unknown kid refetches it at once, at most once a second (default "
    "3600000)",
    "kafka_oauth_scope_claim": "the claim of the provider's tokens that holds their scopes, "
    "a space-delimited string or a list (Kafka's sasl.oauthbearer.scope.claim.name; default "
    "scope)",
    "kafka_oauth_required_scopes": "scopes a provider token must all carry, comma-separated; "
    "one lacking any is refused on both ports (default: none checked, as in Kafka)",
    "kafka_oauth_jwks_ca_file": "PEM CA bundle the https JWKS endpoint's certificate must "
    "chain to, instead of the system's CAs (a private CA); read again at each fetch "
    "(default: the system's CAs)",
}


def resolve_standalone_config(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> StandaloneConfig:
    """Defaults < ``--config`` < ``environ`` < ``args``. ``ValueError`` names a bad one."""
    layers = Layers.from_args(COMPONENT, args, environ)
    layers.check_file_keys([StandaloneConfig])
    return layers.build(StandaloneConfig)


def _run(args: argparse.Namespace) -> int:
    return run_standalone_command(args)


def run_standalone_command(args: argparse.Namespace, *,
                           txn_faults: TxnFaults = NO_TXN_FAULTS) -> int:
    """Run ``folio standalone`` with its parsed ``args``; the exit code.

    ``txn_faults``: hooks into the coordinator's crash windows, which only a
    test's own launcher passes (``tests/support/crash_after_committing.py``).
    """
    try:
        config = resolve_standalone_config(args, os.environ)
    except ValueError as error:
        print(f"folio standalone: error: {error}", file=sys.stderr, flush=True)
        return 2
    if args.print_config:
        print(to_toml(COMPONENT, config), end="")
        return 0
    # Imported here so `folio --help` stays fast and works without the server's deps.
    from broker.app.standalone import run_standalone  # noqa: PLC0415

    setup_logging()
    return run_standalone(config, txn_faults=txn_faults)


def standalone_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio standalone``: metadata, one bookie, the broker and metrics in one process."""
    parser = subparsers.add_parser(
        "standalone",
        help="run all of Folio in one process (what `make run` starts)",
        description="Run Folio in one process with its data under one directory: the "
        "metadata store, one bookie of the ledger service, the broker serving the public "
        "gRPC API (Admin, Append, Produce, Read, with health checking and reflection) and "
        "Prometheus metrics. Once it serves it prints one line 'folio standalone listening "
        "on HOST:PORT (...)' to stdout. SIGTERM or SIGINT stop it gracefully (in-flight "
        "appends finish, ledgers close). Every option can also be set by an environment "
        f"variable {ENV_PREFIX}<OPTION> (e.g. {ENV_PREFIX}DATA_DIR) or in the [standalone] "
        "table of a --config TOML file; flags win over the environment, which wins over "
        "the file.",
    )
    add_arguments(parser, [StandaloneConfig], component=COMPONENT, help=_HELP)
    parser.set_defaults(func=_run)
