"""What every client command of the ``folio`` CLI shares.

The broker endpoint (``--endpoint``, else ``$FOLIO_ENDPOINT``, else
``localhost:7070``), argparse value types, and :func:`run_with_client`, which
turns every :class:`folio.FolioError` into one line ``folio CMD: error: ...``
on stderr and exit code 1 (argparse keeps exit code 2 for bad usage).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping

import folio
from folio.errors import FolioError, FolioUnavailableError, LedgerUnavailableError

__all__ = [
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "add_endpoint_option",
    "describe_error",
    "fail",
    "limit_or_unlimited",
    "non_negative_float",
    "non_negative_int",
    "positive_int",
    "resolve_endpoint",
    "run_with_client",
]

DEFAULT_ENDPOINT = "localhost:7070"
ENDPOINT_ENV = "FOLIO_ENDPOINT"

#: How to start a broker, quoted when there is none at the endpoint.
START_HINT = "start one with `make run` or `folio standalone`"


def add_endpoint_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--endpoint HOST:PORT`` to a client command."""
    parser.add_argument(
        "--endpoint", metavar="HOST:PORT", default=None,
        help=f"the broker's gRPC address (default ${ENDPOINT_ENV}, else {DEFAULT_ENDPOINT})",
    )


def resolve_endpoint(args: argparse.Namespace,
                     environ: Mapping[str, str] | None = None) -> str:
    """``--endpoint`` if given, else ``$FOLIO_ENDPOINT`` if set and not empty, else the default."""
    flag: str | None = getattr(args, "endpoint", None)
    if flag:
        return flag
    env = (os.environ if environ is None else environ).get(ENDPOINT_ENV)
    return env or DEFAULT_ENDPOINT


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
    if isinstance(error, LedgerUnavailableError):
        return f"the broker at {endpoint} is up but its ledger service is unavailable: {text}"
    if isinstance(error, FolioUnavailableError):
        return f"no broker at {endpoint} ({text}); {START_HINT}"
    return text


def run_with_client(prog: str, args: argparse.Namespace,
                    body: Callable[[folio.Client], int]) -> int:
    """Run ``body`` with a client of the resolved endpoint, mapping SDK errors to exit 1.

    Args:
        prog: the command, e.g. ``"folio topic create"``, prefixed to messages.
        args: parsed arguments (for ``--endpoint``).
        body: does the work; returns the exit code.
    """
    endpoint = resolve_endpoint(args)
    try:
        with folio.Client(endpoint) as client:
            return body(client)
    except FolioError as error:
        return fail(prog, describe_error(error, endpoint))
