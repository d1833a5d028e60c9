"""The dispatch table: api_key -> handler, with the versions this listener supports.

A row (``Api``) names one Kafka API, the version range served and the
handler. ApiVersions answers from the table, so adding a row is all it takes
to serve a new API (``broker.kafka.apis`` gathers the rows of each handler
module). A handler gets the ``KafkaContext`` and the decoded ``Call`` and
returns the response entity of the call's version, None to send no
response at all (Produce with acks=0), or a ``Deferred``: the connection
then reads the next request while this one completes, and still answers in
request order (Produce: see ``broker.kafka.connection``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.kafka.context import KafkaContext
from ledger.security.tokens import Principal

__all__ = ["Api", "Call", "Deferred", "DispatchTable", "Handler"]


@dataclass(frozen=True, slots=True)
class Call:
    """One decoded request.

    Attributes:
        api_key: the API (0 Produce, 1 Fetch, ...).
        version: the API version the client used.
        correlation_id: echoed in the response header.
        client_id: the client's id (may be None).
        request: the kio request entity of that API and version.
        principal: who the connection authenticated as (SASL or a TLS client
            certificate); None while the listener authenticates no one.
        client_host: the client's address as Kafka shows it ("/127.0.0.1"),
            "" when unknown.
    """

    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Any
    principal: Principal | None = None
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class Deferred:
    """A response that completes later: ``result`` gives the entity (or None: no response).

    A handler returns one once everything whose order matters is done (a
    Produce has called its appends), so the next request may start.
    """

    result: Awaitable[Any | None]


Handler = Callable[[KafkaContext, Call], Awaitable[Any | None]]


@dataclass(frozen=True, slots=True)
class Api:
    """One row of the table: an API, the versions served, its handler."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler

    def supports(self, version: int) -> bool:
        """Whether ``version`` of this API is served."""
        return self.min_version <= version <= self.max_version


class DispatchTable:
    """The served APIs by key. ``ValueError`` for two rows of one key."""

    def __init__(self, rows: Iterable[Api]) -> None:
        self._rows: dict[int, Api] = {}
        for row in rows:
            if row.key in self._rows:
                raise ValueError(f"api_key {row.key} ({row.name}) has two rows")
            if not 0 <= row.min_version <= row.max_version:
                raise ValueError(f"{row.name}: bad version range "
                                 f"[{row.min_version}, {row.max_version}]")
            self._rows[row.key] = row

    def get(self, api_key: int) -> Api | None:
        """The row of ``api_key``, None if it is not served."""
        return self._rows.get(api_key)

    def rows(self) -> list[Api]:
        """Every row, by api_key (what ApiVersions lists)."""
        return [self._rows[key] for key in sorted(self._rows)]
