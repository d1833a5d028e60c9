"""A client's settings as one frozen, checked record: ``ClientConfig``.

Layered as the server commands' settings (``ledger/settings.py``), the later
winning:

1. the defaults below;
2. the ``[client]`` table of a TOML file given by ``--config FILE`` (or
   ``$FOLIO_CLIENT_CONFIG``), keys named as the fields. The file may also hold
   ``[broker]``, ``[bookie]`` and ``[standalone]`` (one file for a local
   cluster): the client reads its own table, refuses keys it does not know in
   it, and ignores the others;
3. the environment, ``FOLIO_CLIENT_<FIELD>`` (``FOLIO_CLIENT_TIMEOUT_S``; an
   empty value counts as unset). ``$FOLIO_ENDPOINT``, the older name, is kept
   as an alias of ``FOLIO_CLIENT_ENDPOINT``, which wins when both are set
   (the specific name over the general one); both beat the file, as every
   variable does;
4. the arguments given (``ClientConfig.load(**given)``; the CLI's flags).

``to_toml`` prints the ``[client]`` table that the loader reads back
unchanged (``folio --print-config``). ``ClientConfig.resolve`` (what
``folio.Client(...)`` uses) reads no file: only the endpoint variables.

Why a second, small resolver rather than ``ledger.settings``: the SDK stands
apart from the server packages (import-linter lets ``folio`` import only
itself), so it cannot import the server's resolver. It follows the same rules
and error wording, for three fields, in stdlib ``tomllib`` only. Values are
checked once, in ``__post_init__``; every bad value raises
``InvalidArgumentError`` naming where it came from.
``tests/unit/test_config_resolvers_agree.py`` runs both resolvers on the same
input and checks they agree (CONTRIBUTING.md, "Two settings resolvers").
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from folio._transport.addresses import parse_endpoints
from folio._transport.defaults import (
    CONFIG_ENV,
    DEFAULT_ENDPOINT,
    DEFAULT_MAX_CONNECTIONS,
    ENDPOINT_ENV,
)
from folio.errors import InvalidArgumentError

if TYPE_CHECKING:  # folio.security loads gRPC: imported where a channel is made
    from folio.security import TLS, ChannelSecurity

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_ENDPOINT",
    "DEFAULT_TIMEOUT_S",
    "ENDPOINT_ENV",
    "TABLE",
    "TOKEN_ENV",
    "ClientConfig",
    "env_name",
]

#: Deadline of each admin call, in seconds, unless given.
DEFAULT_TIMEOUT_S: Final = 30.0
#: Longest wait for the first connection to a broker, in seconds, unless given
#: (``folio._transport.connect``): a wrong endpoint fails in this long, not in
#: ``timeout_s``.
DEFAULT_CONNECT_TIMEOUT_S: Final = 3.0
#: The environment variable holding a token (alias of ``FOLIO_CLIENT_TOKEN``).
TOKEN_ENV: Final = "FOLIO_TOKEN"
#: The TOML table of the client's settings.
TABLE: Final = "client"


def env_name(field: str) -> str:
    """``FOLIO_CLIENT_TIMEOUT_S`` for field ``timeout_s``."""
    return f"FOLIO_{TABLE.upper()}_{field.upper()}"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What a :class:`folio.Client` is made with.

    Attributes:
        endpoint: the broker, ``"host:port"``, or a comma-separated list of
            brokers of one cluster (the client bootstraps from the first that
            answers; see ``folio._transport.brokers``).
        timeout_s: deadline of each admin call, in seconds (> 0).
        max_connections_per_endpoint: most channels (TCP connections) to each
            broker, shared by every writer and reader of the client (>= 1).
        connect_timeout_s: longest wait for the first connection to a broker
            (and to each endpoint bootstrapped from), in seconds (> 0; at
            most ``timeout_s`` counts). Nothing listening, another service
            (HTTP, Kafka) or a TLS refusal fails within it, with the reason.
        tls_ca: PEM CA the broker's certificate must chain to; set (or any
            ``tls_*``): the client speaks TLS. Empty: plain text, unless a
            ``tls_cert`` is given (then the system's roots are trusted).
        tls_cert: PEM client certificate (mutual TLS); needs ``tls_key``.
        tls_key: its private key.
        tls_server_name: the name the broker's certificate is checked for
            instead of the endpoint's host.
        token: the JWT sent as ``authorization: Bearer`` (``$FOLIO_TOKEN``
            too); never printed by ``to_toml``.
        token_file: a file holding the JWT, re-read when it changes.
    """

    endpoint: str = DEFAULT_ENDPOINT
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_connections_per_endpoint: int = DEFAULT_MAX_CONNECTIONS
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_server_name: str = ""
    token: str = ""
    token_file: str = ""

    def __post_init__(self) -> None:
        if not self.endpoint:
            raise InvalidArgumentError("endpoint must not be empty")
        parse_endpoints(self.endpoint)  # raises on a list naming no endpoint
        if self.timeout_s <= 0:
            raise InvalidArgumentError(f"timeout_s must be > 0, not {self.timeout_s}")
        if self.connect_timeout_s <= 0:
            raise InvalidArgumentError(
                f"connect_timeout_s must be > 0, not {self.connect_timeout_s}")
        if self.max_connections_per_endpoint < 1:
            raise InvalidArgumentError(f"max_connections_per_endpoint must be >= 1, "
                                       f"not {self.max_connections_per_endpoint}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise InvalidArgumentError("tls_cert and tls_key go together: give both or neither")
        if self.token and self.token_file:
            raise InvalidArgumentError("give either token or token_file, not both")

    def tls(self) -> TLS | None:
        """The TLS settings, None for plain text."""
        from folio.security import TLS  # noqa: PLC0415

        if not (self.tls_ca or self.tls_cert or self.tls_server_name):
            return None
        return TLS(ca=self.tls_ca or None, cert=self.tls_cert or None,
                   key=self.tls_key or None, server_name=self.tls_server_name or None)

    def security(self) -> ChannelSecurity:
        """How the client's channels open (files read now).

        Raises:
            InvalidArgumentError: a TLS or token file cannot be read.
        """
        from folio.security import ChannelSecurity, TokenSource  # noqa: PLC0415

        token = (TokenSource(self.token or None, self.token_file or None)
                 if self.token or self.token_file else None)
        return ChannelSecurity(self.tls(), token)

    @classmethod
    def resolve(cls, endpoint: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                max_connections_per_endpoint: int = DEFAULT_MAX_CONNECTIONS,
                environ: Mapping[str, str] | None = None, tls: TLS | None = None,
                token: str | None = None, token_file: str | None = None) -> ClientConfig:
        """The config from the arguments; no ``endpoint``: the environment's, else the default.

        The environment's endpoint is ``FOLIO_CLIENT_ENDPOINT``, else
        ``$FOLIO_ENDPOINT``. No file is read (``load`` reads one), and no
        token from the environment: a program passes its own.

        Raises:
            InvalidArgumentError: a value out of range (the message names it).
        """
        env = os.environ if environ is None else environ
        return cls(endpoint=endpoint or _env_endpoint(env) or DEFAULT_ENDPOINT,
                   timeout_s=timeout_s, connect_timeout_s=connect_timeout_s,
                   max_connections_per_endpoint=max_connections_per_endpoint,
                   tls_ca=(tls.ca or "") if tls else "",
                   tls_cert=(tls.cert or "") if tls else "",
                   tls_key=(tls.key or "") if tls else "",
                   tls_server_name=(tls.server_name or "") if tls else "",
                   token=token or "", token_file=token_file or "")

    @classmethod
    def load(cls, config_file: str | None = None, environ: Mapping[str, str] | None = None,
             **given: object) -> ClientConfig:
        """The config layered: defaults < file's ``[client]`` < environment < ``given``.

        Args:
            config_file: a TOML file (``--config``); None for
                ``$FOLIO_CLIENT_CONFIG`` if set, else no file.
            environ: the environment (``os.environ`` when None).
            given: field values from arguments or flags; None means not given.

        Raises:
            InvalidArgumentError: the file cannot be read, is not TOML, has no
                ``[client]`` table or an unknown key in it; or a value is of the
                wrong type or out of range (the message names its source).
        """
        env = os.environ if environ is None else environ
        types = {field.name: _KINDS[field.name] for field in dataclasses.fields(cls)}
        for name in given:
            if name not in types:
                raise InvalidArgumentError(f"ClientConfig has no setting {name!r}; "
                                           f"known: {', '.join(sorted(types))}")
        path = config_file or env.get(CONFIG_ENV) or None
        table = _read_table(path, types) if path else {}
        values: dict[str, object] = {}
        for name, kind in types.items():
            if given.get(name) is not None:
                values[name] = given[name]
                continue
            variable, raw = _env_value(env, name)
            if raw:
                try:
                    values[name] = _from_text(kind, raw)
                except ValueError as error:
                    raise InvalidArgumentError(f"{variable}={raw!r}: {error}") from None
            elif name in table:
                try:
                    values[name] = _from_toml(kind, table[name])
                except ValueError as error:
                    raise InvalidArgumentError(f"--config {path}: [{TABLE}] {name} = "
                                               f"{table[name]!r}: {error}") from None
        return cls(**values)  # type: ignore[arg-type]

    def to_toml(self) -> str:
        """This config as the ``[client]`` table that ``load`` (``--config``) reads back."""
        lines = ["# folio client settings: defaults < this file (--config) < "
                 "FOLIO_CLIENT_* (FOLIO_ENDPOINT) < flags", f"[{TABLE}]"]
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "token" and value:
                lines.append("# token is set (not shown: it is a secret)")
                continue
            # A JSON string is a TOML basic string, but for DEL, which TOML wants escaped.
            text = (repr(value) if isinstance(value, int | float)
                    else json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f"))
            lines.append(f"{field.name} = {text}")
        return "\n".join(lines) + "\n"


#: Each field's type (the dataclass's annotations are strings, by ``__future__``).
_KINDS: Final[dict[str, type]] = {
    "endpoint": str, "timeout_s": float, "max_connections_per_endpoint": int,
    "connect_timeout_s": float,
    "tls_ca": str, "tls_cert": str, "tls_key": str, "tls_server_name": str,
    "token": str, "token_file": str}

#: Older or shorter variable names of some fields (the specific name wins).
_ALIASES: Final[dict[str, str]] = {"endpoint": ENDPOINT_ENV, "token": TOKEN_ENV}


def _env_endpoint(env: Mapping[str, str]) -> str | None:
    return env.get(env_name("endpoint")) or env.get(ENDPOINT_ENV) or None


def _env_value(env: Mapping[str, str], name: str) -> tuple[str, str | None]:
    """``(variable, raw value)`` of a field from the environment (or its alias)."""
    variable = env_name(name)
    alias = _ALIASES.get(name)
    if alias is not None and not env.get(variable) and env.get(alias):
        return alias, env.get(alias)
    return variable, env.get(variable)


def _from_text(kind: type, raw: str) -> object:
    return kind(raw)


def _from_toml(kind: type, value: object) -> object:
    """A value of ``kind`` from a TOML value, refusing the wrong TOML type."""
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is str and isinstance(value, str):
        return value
    wanted = {int: "an integer", float: "a number"}.get(kind, "a string")
    raise ValueError(f"expected {wanted}")


def _read_table(path: str, types: Mapping[str, type]) -> dict[str, object]:
    """The ``[client]`` table of the TOML file at ``path``, its keys checked."""
    import tomllib  # noqa: PLC0415 (only with a file: not on every CLI command's start)

    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as error:
        raise InvalidArgumentError(f"--config {path}: cannot read it: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise InvalidArgumentError(f"--config {path}: not valid TOML: {error}") from None
    loose = [key for key, value in document.items() if not isinstance(value, dict)]
    if loose:
        raise InvalidArgumentError(f"--config {path}: settings go in a [{TABLE}] table, "
                                   f"found {loose[0]!r} outside any table")
    table = document.get(TABLE)
    if table is None:
        found = ", ".join(f"[{name}]" for name in document) or "no table"
        raise InvalidArgumentError(f"--config {path}: no [{TABLE}] table (found {found})")
    for key in table:
        if key not in types:
            raise InvalidArgumentError(
                f"--config {path}: [{TABLE}] has no setting {key!r}; "
                f"known: {', '.join(sorted(types))}")
    return dict(table)
