"""Kafka messages through kio: request and response classes by API and version.

kio (Aiven's ``kio``) generates one frozen dataclass per message, version
and nested struct from Kafka's JSON schemas, with the header versions and the
flexible (compact, tagged) encodings right. Handlers build answers with
``build``: it takes the union of the fields any version has and keeps those
the class of this version has, so one handler serves every version.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import sys
from typing import Any, cast

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import Entity

__all__ = [
    "build",
    "decode_entity",
    "encode_entity",
    "has_field",
    "nested",
    "request_class",
    "response_class",
]


@functools.cache
def request_class(api_key: int, version: int) -> type[Entity]:
    """The kio request class of ``api_key`` at ``version`` (``KioIndexError`` if none)."""
    return cast(type[Entity], load_request_schema(api_key, version))


@functools.cache
def response_class(api_key: int, version: int) -> type[Entity]:
    """The kio response class of ``api_key`` at ``version`` (``KioIndexError`` if none)."""
    return cast(type[Entity], load_response_schema(api_key, version))


def nested(cls: type[Entity], name: str) -> type[Entity]:
    """The struct ``name`` of the same message version as ``cls`` (e.g. a response's topic)."""
    return cast(type[Entity], getattr(sys.modules[cls.__module__], name))


def build(cls: type[Entity], **values: Any) -> Any:
    """An instance of ``cls`` from the ``values`` its version has (others are dropped)."""
    names = _field_names(cls)
    return cls(**{name: value for name, value in values.items() if name in names})


def has_field(cls: type[Entity], name: str) -> bool:
    """Whether ``cls`` (this version) has the field ``name``."""
    return name in _field_names(cls)


_NAMES: dict[type, frozenset[str]] = {}


def _field_names(cls: type) -> frozenset[str]:
    names = _NAMES.get(cls)
    if names is None:
        names = frozenset(field.name for field in dataclasses.fields(cls))
        _NAMES[cls] = names
    return names


def decode_entity(cls: type[Entity], data: bytes, offset: int) -> tuple[Any, int]:
    """The entity at ``offset`` of ``data`` and its size; kio's ``SerialError`` if malformed."""
    value, size = entity_reader(cls)(data, offset)
    return value, size


def encode_entity(cls: type[Entity], value: Any, out: io.BytesIO) -> None:
    """Append ``value`` (an instance of ``cls``) to ``out``."""
    entity_writer(cls)(out, value)
