"""The SDK's errors: one small hierarchy, each class says whether a retry can help.

Callers catch :class:`FolioError` for anything the SDK raises on purpose; a
retry loop reads ``retriable`` instead of matching classes.
"""

from __future__ import annotations


class FolioError(Exception):
    """Base of every error the Folio SDK raises.

    Attributes:
        retriable: whether the same call may succeed later unchanged.
    """

    retriable = False


class InvalidBlockError(FolioError):
    """Bytes that are not a valid event block, or events that cannot make one.

    Raised when decoding garbage or truncated bytes, a block of a format
    version this SDK does not know, or a block whose columns disagree in
    length; and when encoding columns of different lengths or values the
    format cannot hold. See ``proto/folio/v1/events.proto``. Never retriable:
    the same bytes are as invalid the next time.
    """
