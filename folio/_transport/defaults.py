"""Defaults of the client's transport that its settings (``folio.config``) name too.

Apart from ``pool`` so that reading the settings (``folio --help``, the CLI's
option defaults) loads no gRPC.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_MAX_CONNECTIONS"]

#: Channels per broker endpoint unless the client says otherwise.
DEFAULT_MAX_CONNECTIONS: Final = 2
