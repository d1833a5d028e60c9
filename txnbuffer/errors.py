"""The transaction buffer's errors: one small hierarchy, each class says whether a retry helps."""

from __future__ import annotations

__all__ = ["SnapshotFormatError", "TxnBufferError", "TxnBufferNotReadyError"]


class TxnBufferError(Exception):
    """Base of every transaction-buffer error.

    Attributes:
        retriable: whether the same call may succeed later unchanged.
        segment: the segment whose buffer raised, when known.
    """

    retriable = False

    def __init__(self, message: str, *, segment: str | None = None) -> None:
        super().__init__(message)
        self.segment = segment


class TxnBufferNotReadyError(TxnBufferError):
    """The buffer has not finished recovery; wait for ``wait_ready()`` and retry."""

    retriable = True


class SnapshotFormatError(TxnBufferError):
    """A snapshot record is corrupt or of a format version this code does not read."""

    def __init__(self, message: str, *, key: str, segment: str | None = None) -> None:
        super().__init__(f"snapshot record {key!r}: {message}", segment=segment)
        self.key = key
