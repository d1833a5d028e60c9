"""How ``folio consume`` writes one event: the payload, chosen fields before it, or JSON.

- default: the payload's raw bytes and a newline.
- ``--print key,segment,offset,timestamp,headers`` (any of them, in the
  order given; like kcat ``-f`` or kafka-console-consumer's ``print.key``):
  those fields, each followed by a tab, then the payload. A missing key
  prints ``null`` and no headers ``NO_HEADERS`` (as Kafka's console
  consumer prints them); the segment is its number; the timestamp is ms
  since the epoch; headers are ``name=value`` sorted by name, joined by
  commas (the wire keeps no order among headers).
- ``--json``: one JSON object per line with ``key`` (or null), ``segment``
  (its name), ``offset``, ``timestamp`` (ms, or null), ``headers`` (name ->
  string) and ``payload`` with ``encoding``: ``"utf-8"`` when the payload
  is valid UTF-8 (the text itself), else ``"base64"``. Header values that
  are not UTF-8 are kept with surrogate escapes (``\\udcXX``), which
  ``folio produce --json`` turns back into the same bytes.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

import folio

__all__ = ["PRINT_FIELDS", "event_json", "formatter", "print_fields"]

PRINT_FIELDS = ("key", "segment", "offset", "timestamp", "headers")


def print_fields(text: str) -> list[str]:
    """``--print``: a comma-separated list of ``PRINT_FIELDS`` (argparse type)."""
    fields = [field.strip() for field in text.split(",")]
    unknown = [field for field in fields if field not in PRINT_FIELDS]
    if unknown or not fields:
        raise argparse.ArgumentTypeError(
            f"unknown field(s) {', '.join(map(repr, unknown))}; choose from "
            f"{','.join(PRINT_FIELDS)}")
    return fields


def _text(value: bytes) -> str:
    return value.decode("utf-8", "surrogateescape")


def _field(event: folio.Event[bytes], field: str) -> str:
    if field == "key":
        return "null" if event.routing_key is None else event.routing_key
    if field == "segment":
        return event.segment.rpartition("/")[2]
    if field == "offset":
        return str(event.offset)
    if field == "timestamp":
        return "null" if event.timestamp is None else str(event.timestamp)
    return ",".join(f"{name}={_text(value)}" for name, value in sorted(event.headers.items())) \
        or "NO_HEADERS"


def event_json(event: folio.Event[bytes]) -> dict[str, Any]:
    """The JSON object ``--json`` prints for ``event``."""
    try:
        payload, encoding = event.payload.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        payload, encoding = base64.b64encode(event.payload).decode("ascii"), "base64"
    return {
        "key": event.routing_key,
        "segment": event.segment,
        "offset": event.offset,
        "timestamp": event.timestamp,
        "headers": {name: _text(value) for name, value in sorted(event.headers.items())},
        "payload": payload,
        "encoding": encoding,
    }


def formatter(fields: Sequence[str] | None, as_json: bool
              ) -> Callable[[folio.Event[bytes]], bytes] | None:
    """The bytes to write per event (newline included); None for the raw payload fast path."""
    if as_json:
        return lambda event: json.dumps(event_json(event)).encode("utf-8",
                                                                  "surrogateescape") + b"\n"
    if not fields:
        return None

    def line(event: folio.Event[bytes]) -> bytes:
        prefix = "".join(_field(event, field) + "\t" for field in fields)
        return prefix.encode("utf-8", "surrogateescape") + event.payload + b"\n"

    return line
