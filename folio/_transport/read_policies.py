"""What a reader may do with a payload its serializer cannot decode: the values, checked."""

from __future__ import annotations

from typing import Final

from folio.errors import InvalidArgumentError

__all__ = ["POLICIES", "check_policy"]

#: The values of ``on_deserialization_error``.
POLICIES: Final = ("raise", "skip", "raw")


def check_policy(policy: object) -> None:
    """``InvalidArgumentError`` unless ``policy`` is one of ``POLICIES``."""
    if policy not in POLICIES:
        raise InvalidArgumentError(
            f"on_deserialization_error must be 'raise', 'skip' or 'raw', not {policy!r}")
