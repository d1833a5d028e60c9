"""What every client command of the ``folio`` CLI shares.

The client settings (``folio.config``: defaults < the ``[client]`` table of
``--config FILE`` or ``$FOLIO_CLIENT_CONFIG`` < ``FOLIO_CLIENT_<KEY>`` (and
``$FOLIO_ENDPOINT``) < ``--endpoint``), ``--config`` and ``--endpoint`` (alias
``--bootstrap``) given before or after the sub-command; a comma-separated
endpoint list goes to ``folio.Client`` whole, which bootstraps from the first
broker that answers and fails over to the others; the options themselves are
added by :mod:`folio.cli._options`, re-exported here), argparse value types, and
:func:`run_with_client`, which
turns every :class:`folio.FolioError` into one line ``folio CMD: error: ...``
on stderr and exit code 1 (argparse keeps exit code 2 for bad usage).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Mapping

import folio
from folio.cli._options import SECURITY_FLAGS, add_endpoint_option, add_global_endpoint_option
from folio.config import DEFAULT_ENDPOINT, ENDPOINT_ENV, ClientConfig
from folio.errors import (
    DeliveryTimeoutError,
    FolioError,
    FolioUnavailableError,
    LedgerUnavailableError,
    NoBrokerAvailableError,
    TlsError,
    WrongEndpointError,
)

__all__ = [
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "add_endpoint_option",
    "add_global_endpoint_option",
    "client_config",
    "connect",
    "describe_error",
    "endpoint_list",
    "fail",
    "limit_or_unlimited",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "resolve_endpoint",
    "run_with_client",
]


#: How to start a broker, quoted when there is none at the endpoint.
START_HINT = "start one with `make run` or `folio standalone`"


def endpoint_list(text: str) -> str:
    """The comma-separated endpoint list, stripped and without repeats (the SDK's reading).

    An empty list gives the default endpoint.
    """
    endpoints = [item.strip() for item in text.split(",") if item.strip()]
    return ",".join(dict.fromkeys(endpoints)) if endpoints else DEFAULT_ENDPOINT


def client_config(args: argparse.Namespace,
                  environ: Mapping[str, str] | None = None) -> ClientConfig:
    """The client settings: defaults < ``--config`` file < environment < ``--endpoint``.

    The endpoint is kept as given (a comma-separated list is not yet picked).

    Raises:
        InvalidArgumentError: a bad file, key or value (the message names it).
    """
    security = {dest: getattr(args, dest, None) or None for _flag, dest, _help in SECURITY_FLAGS}
    return ClientConfig.load(getattr(args, "client_config", None),
                             os.environ if environ is None else environ,
                             endpoint=getattr(args, "endpoint", None) or None, **security)


def resolve_endpoint(args: argparse.Namespace,
                     environ: Mapping[str, str] | None = None) -> str:
    """``--endpoint`` if given, else the environment's, else the ``--config`` file's, else
    the default (:func:`client_config`).

    A comma-separated list is kept whole (:func:`endpoint_list`): the client
    bootstraps from it.
    """
    return endpoint_list(client_config(args, environ).endpoint)


def _number(text: str, kind: Callable[[str], int | float], low: float, what: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid {what}: {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return int(_number(text, int, 1, "a positive integer"))


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return int(_number(text, int, 0, "a non-negative integer"))


def limit_or_unlimited(text: str) -> int:
    """An argparse type: an integer >= 0, or -1 for no limit."""
    return int(_number(text, int, -1, "a non-negative integer or -1"))


def positive_float(text: str) -> float:
    """An argparse type: a number > 0."""
    value = float(_number(text, float, 0, "a positive number"))
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """An argparse type: a number >= 0."""
    return float(_number(text, float, 0, "a non-negative number"))


def fail(prog: str, message: str) -> int:
    """Print ``PROG: error: MESSAGE`` to stderr; returns exit code 1."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 1


def describe_error(error: BaseException, endpoint: str) -> str:
    """A one-line message for ``error``; an unreachable broker gets a how-to-start hint."""
    text = " ".join(str(error).split()) or type(error).__name__
    if isinstance(error, DeliveryTimeoutError) and \
            isinstance(error.__cause__, LedgerUnavailableError):
        error = error.__cause__  # what the writer retried until it gave up
    if isinstance(error, LedgerUnavailableError):
        return f"the broker at {endpoint} is up but its ledger service is unavailable: {text}"
    if isinstance(error, TlsError | WrongEndpointError):
        return text if endpoint in text else f"{endpoint}: {text}"
    if isinstance(error, NoBrokerAvailableError):
        return f"{text}; {START_HINT}"
    if isinstance(error, FolioUnavailableError):
        if error.context.get("reason"):  # the connect probe said why
            return f"no broker at {endpoint}: {text}; {START_HINT}"
        return f"no broker at {endpoint} ({text}); {START_HINT}"
    return text


def connect(args: argparse.Namespace, endpoint: str) -> folio.Client:
    """A client of ``endpoint`` with the other settings of :func:`client_config`.

    Raises:
        InvalidArgumentError: a bad ``--config`` file or variable (``main`` has
            already refused those as usage errors).
    """
    config = client_config(args)
    return folio.Client(config=dataclasses.replace(config, endpoint=endpoint))


def run_with_client(prog: str, args: argparse.Namespace,
                    body: Callable[[folio.Client], int]) -> int:
    """Run ``body`` with a client of the resolved endpoint, mapping SDK errors to exit 1.

    Args:
        prog: the command, e.g. ``"folio topic create"``, prefixed to messages.
        args: parsed arguments (for ``--endpoint``).
        body: does the work; returns the exit code.
    """
    try:
        config = client_config(args)
    except FolioError as error:
        return fail(prog, str(error))
    endpoint = endpoint_list(config.endpoint)
    try:
        with folio.Client(config=dataclasses.replace(config, endpoint=endpoint)) as client:
            return body(client)
    except FolioError as error:
        return fail(prog, describe_error(error, endpoint))
