"""The client options of the ``folio`` CLI: ``--endpoint``, ``--config`` and the security flags.

Apart from :mod:`folio.cli._common` (which reads the settings and makes the
client) so that ``folio --help`` adds the global ones loading nothing but
``argparse``: no ``folio.config``, no gRPC.
"""

from __future__ import annotations

import argparse

from folio._transport.defaults import CONFIG_ENV, DEFAULT_ENDPOINT, ENDPOINT_ENV

__all__ = ["SECURITY_FLAGS", "add_endpoint_option", "add_global_endpoint_option"]


_ENDPOINT_HELP = (f"the broker's gRPC address; a comma-separated list of brokers of one "
                  f"cluster (as Kafka's bootstrap servers) starts from the first that "
                  f"answers and fails over to the others "
                  f"(default $FOLIO_CLIENT_ENDPOINT, else ${ENDPOINT_ENV}, else the "
                  f"--config file's, else {DEFAULT_ENDPOINT})")

_CONFIG_HELP = (f"read the client settings from the [client] table of this TOML file "
                f"(keys endpoint, timeout_s, max_connections_per_endpoint; other tables "
                f"are ignored; what --print-config prints); FOLIO_CLIENT_* variables and "
                f"flags override it (also ${CONFIG_ENV})")


#: The security flags of every client command: (flag, ClientConfig field, help).
SECURITY_FLAGS = (
    ("--tls-ca", "tls_ca", "PEM CA the broker's certificate must chain to: connect over TLS "
     "(also $FOLIO_CLIENT_TLS_CA)"),
    ("--tls-cert", "tls_cert", "PEM client certificate for a broker that requires one "
     "(mutual TLS; also $FOLIO_CLIENT_TLS_CERT)"),
    ("--tls-key", "tls_key", "PEM private key of --tls-cert (also $FOLIO_CLIENT_TLS_KEY)"),
    ("--tls-server-name", "tls_server_name", "name to check the broker's certificate for "
     "instead of the endpoint's host"),
    ("--token", "token", "JWT sent as 'authorization: Bearer' (also $FOLIO_TOKEN or "
     "$FOLIO_CLIENT_TOKEN; prefer --token-file: a flag shows in the process list)"),
    ("--token-file", "token_file", "file holding the JWT, re-read when it changes "
     "(also $FOLIO_CLIENT_TOKEN_FILE)"),
)


def _add_security_flags(parser: argparse.ArgumentParser, default: object) -> None:
    for flag, dest, text in SECURITY_FLAGS:
        parser.add_argument(flag, dest=dest, metavar=dest.split("_")[-1].upper(),
                            default=default, help=text)


def add_global_endpoint_option(parser: argparse.ArgumentParser) -> None:
    """``--endpoint``/``--bootstrap``, ``--config`` and ``--print-config`` before the sub-command.

    ``folio --endpoint X topic list``; ``folio --config f.toml --print-config``.
    The file's dest is ``client_config``, apart from the server commands' own
    ``--config`` (given after ``folio broker``).
    """
    parser.add_argument("--endpoint", "--bootstrap", dest="endpoint",
                        metavar="HOST:PORT[,HOST:PORT...]", default=None, help=_ENDPOINT_HELP)
    parser.add_argument("--config", dest="client_config", metavar="FILE", default=None,
                        help=_CONFIG_HELP)
    parser.add_argument("--print-config", dest="print_client_config", action="store_true",
                        help="print the resolved client settings as TOML (what --config "
                        "reads back) and exit")
    _add_security_flags(parser, None)


def add_endpoint_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--endpoint HOST:PORT`` (alias ``--bootstrap``) to a client command.

    Its default is "not given" (``SUPPRESS``), so that a value given before
    the sub-command is kept when none is given after it.
    """
    parser.add_argument("--endpoint", "--bootstrap", dest="endpoint",
                        metavar="HOST:PORT[,HOST:PORT...]", default=argparse.SUPPRESS,
                        help=_ENDPOINT_HELP)
    parser.add_argument("--config", dest="client_config", metavar="FILE",
                        default=argparse.SUPPRESS, help=_CONFIG_HELP)
    _add_security_flags(parser, argparse.SUPPRESS)
    # main() checks the client settings up front (a usage error) for these commands.
    parser.set_defaults(uses_client_config=True)
