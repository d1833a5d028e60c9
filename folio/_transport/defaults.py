"""Defaults of the client's settings that others name too, in a module that imports nothing.

Apart from ``pool`` (gRPC) and from ``folio.config`` (its TOML parser and
dataclass) so that the CLI's ``folio --help`` and option defaults load neither.
``folio.config`` re-exports them.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CONFIG_ENV", "DEFAULT_ENDPOINT", "DEFAULT_MAX_CONNECTIONS", "ENDPOINT_ENV"]

#: Channels per broker endpoint unless the client says otherwise.
DEFAULT_MAX_CONNECTIONS: Final = 2
#: Where a client connects when given no endpoint and no variable names one.
DEFAULT_ENDPOINT: Final = "localhost:7070"
#: The older environment variable naming the endpoint (alias of ``FOLIO_CLIENT_ENDPOINT``).
ENDPOINT_ENV: Final = "FOLIO_ENDPOINT"
#: The environment variable naming the TOML file, when ``--config`` is not given.
CONFIG_ENV: Final = "FOLIO_CLIENT_CONFIG"
