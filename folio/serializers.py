"""Serializers: application values to event payloads and back.

A writer calls ``serialize`` once per event and a reader ``deserialize`` once
per event, so both should be cheap; the writer and reader skip the call
altogether for :class:`BytesSerializer` when the value is already ``bytes``.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, TypeVar

__all__ = ["BytesSerializer", "JsonSerializer", "Serializer", "StringSerializer"]

T = TypeVar("T")


class Serializer(Protocol[T]):
    """Turns values of type ``T`` into payload bytes and back.

    ``deserialize(serialize(v))`` must equal ``v``. An error ``serialize``
    raises reaches the caller of ``write_event`` unchanged; one ``deserialize``
    raises (any ``Exception``) becomes the reader's ``DeserializationError``
    naming the event (topic, segment, offset, raw bytes), its ``__cause__``.
    """

    def serialize(self, value: T) -> bytes:
        """The payload for ``value``."""
        ...

    def deserialize(self, data: bytes) -> T:
        """The value a payload holds."""
        ...


class BytesSerializer:
    """Payloads as they are: ``bytes`` in, ``bytes`` out.

    ``serialize`` also takes a ``bytearray`` or ``memoryview`` and copies it to
    ``bytes`` (the writer keeps the payload until it is acknowledged, so a
    buffer the caller reuses must not be kept).
    """

    def serialize(self, value: bytes | bytearray | memoryview) -> bytes:
        """``value`` as ``bytes``."""
        if type(value) is bytes:
            return value
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"BytesSerializer takes bytes, bytearray or memoryview, "
                        f"not {type(value).__name__}")

    def deserialize(self, data: bytes) -> bytes:
        """``data`` itself."""
        return data

    def __repr__(self) -> str:
        return "BytesSerializer()"


class StringSerializer:
    """Text payloads in one encoding (UTF-8 by default)."""

    def __init__(self, encoding: str = "utf-8") -> None:
        """Args:
        encoding: a Python codec name.
        """
        "".encode(encoding)  # an unknown codec fails here, not at the first event
        self.encoding = encoding

    def serialize(self, value: str) -> bytes:
        """``value`` encoded."""
        return value.encode(self.encoding)

    def deserialize(self, data: bytes) -> str:
        """``data`` decoded."""
        return data.decode(self.encoding)

    def __repr__(self) -> str:
        return f"StringSerializer({self.encoding!r})"


class JsonSerializer:
    """JSON values as compact UTF-8 JSON (``json.dumps`` with ``(",", ":")`` separators)."""

    _encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    _decoder = json.JSONDecoder()

    def serialize(self, value: Any) -> bytes:
        """``value`` as compact JSON, UTF-8."""
        return self._encoder.encode(value).encode("utf-8")

    def deserialize(self, data: bytes) -> Any:
        """The JSON value ``data`` holds."""
        return self._decoder.decode(data.decode("utf-8"))

    def __repr__(self) -> str:
        return "JsonSerializer()"
