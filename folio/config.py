"""A client's settings as one frozen, checked record: ``ClientConfig``.

Layered: the defaults below < the environment (``$FOLIO_ENDPOINT``) < the
arguments given (``ClientConfig.resolve``, which ``folio.Client`` uses).
Values are checked once, in ``__post_init__``, with ``InvalidArgumentError``
naming the field. The CLI and the Spark connector resolve the endpoint from
the same two constants.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from folio._transport.pool import DEFAULT_MAX_CONNECTIONS
from folio.errors import InvalidArgumentError

__all__ = ["DEFAULT_ENDPOINT", "DEFAULT_TIMEOUT_S", "ENDPOINT_ENV", "ClientConfig"]

#: Where a client connects when given no endpoint and ``$FOLIO_ENDPOINT`` is unset.
DEFAULT_ENDPOINT: Final = "localhost:7070"
#: The environment variable naming the default endpoint.
ENDPOINT_ENV: Final = "FOLIO_ENDPOINT"
#: Deadline of each admin call, in seconds, unless given.
DEFAULT_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What a :class:`folio.Client` is made with.

    Attributes:
        endpoint: the broker, ``"host:port"``.
        timeout_s: deadline of each admin call, in seconds (> 0).
        max_connections_per_endpoint: most channels (TCP connections) to the
            broker, shared by every writer and reader of the client (>= 1).
    """

    endpoint: str = DEFAULT_ENDPOINT
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_connections_per_endpoint: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        if not self.endpoint:
            raise InvalidArgumentError("endpoint must not be empty")
        if self.timeout_s <= 0:
            raise InvalidArgumentError(f"timeout_s must be > 0, not {self.timeout_s}")
        if self.max_connections_per_endpoint < 1:
            raise InvalidArgumentError(f"max_connections_per_endpoint must be >= 1, "
                                       f"not {self.max_connections_per_endpoint}")

    @classmethod
    def resolve(cls, endpoint: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                max_connections_per_endpoint: int = DEFAULT_MAX_CONNECTIONS,
                environ: Mapping[str, str] | None = None) -> ClientConfig:
        """The config from the arguments; no ``endpoint``: ``$FOLIO_ENDPOINT``, else the default.

        Raises:
            InvalidArgumentError: a value out of range (the message names it).
        """
        env = os.environ if environ is None else environ
        return cls(endpoint=endpoint or env.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT,
                   timeout_s=timeout_s,
                   max_connections_per_endpoint=max_connections_per_endpoint)
