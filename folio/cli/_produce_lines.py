"""How ``folio produce`` turns one line of stdin into an event: raw, key-separated or JSON.

- raw (default): the line's bytes are the payload; ``--key`` is every event's key.
- ``--key-separator SEP`` (Kafka's ``parse.key=true`` + ``key.separator``):
  the line is ``KEY SEP PAYLOAD``, split at the first SEP; a line without SEP
  is refused, as Kafka's console producer refuses it.
- ``--json``: the line is one JSON object ``{"key": ..., "headers": {...},
  "payload": "..."}``, with ``"payload_base64"`` instead of ``"payload"`` (or
  ``"encoding": "base64"`` beside it) for binary payloads: the shape ``folio
  consume --json`` prints, whose other fields (``segment``, ``offset``,
  ``timestamp``) are ignored.

``--header K=V`` headers go on every event; a JSON line's own headers win
over them. An empty key means no key (events spread over segments).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["LineError", "LineFormat", "header_pair", "parse_line"]


class LineError(ValueError):
    """A line of stdin that cannot be made into an event; the message says why."""


@dataclasses.dataclass(frozen=True)
class LineFormat:
    """How lines are read: ``key_separator`` or ``json`` (not both), defaults for every event."""

    key: str | None = None
    key_separator: bytes | None = None
    json: bool = False
    headers: Mapping[str, bytes] = dataclasses.field(default_factory=dict)


def header_pair(text: str) -> tuple[str, bytes]:
    """``--header K=V``: (K, V as UTF-8), split at the first ``=`` (argparse type)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value.encode()


def _json_event(line: bytes, form: LineFormat) -> tuple[bytes, str | None, Mapping[str, bytes]]:
    try:
        item: Any = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        raise LineError(f"not a JSON object: {error}") from None
    if not isinstance(item, dict):
        raise LineError(f"not a JSON object but a {type(item).__name__}")
    if ("payload" in item) == ("payload_base64" in item):
        raise LineError('needs exactly one of "payload" (a string) and "payload_base64"')
    encoding = item.get("encoding", "utf-8")
    if "payload_base64" in item:
        text, encoding = item["payload_base64"], "base64"
    else:
        text = item["payload"]
    if not isinstance(text, str):
        raise LineError("the payload must be a JSON string")
    if encoding == "base64":
        try:
            payload = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise LineError("the payload is not valid base64") from None
    elif encoding == "utf-8":
        payload = text.encode("utf-8", "surrogateescape")
    else:
        raise LineError(f'"encoding" must be "utf-8" or "base64", not {encoding!r}')
    key = item.get("key", form.key)
    if key is not None and not isinstance(key, str):
        raise LineError('"key" must be a string or null')
    raw_headers = item.get("headers") or {}
    if not isinstance(raw_headers, dict) or not all(
            isinstance(value, str) for value in raw_headers.values()):
        raise LineError('"headers" must be an object of strings')
    headers = {**form.headers, **{name: value.encode("utf-8", "surrogateescape")
                                  for name, value in raw_headers.items()}}
    return payload, key or None, headers


def parse_line(line: bytes, form: LineFormat) -> tuple[bytes, str | None, Mapping[str, bytes]]:
    """``(payload, routing_key, headers)`` of one line (without its newline).

    Raises:
        LineError: the line does not fit ``form``.
    """
    if form.json:
        return _json_event(line, form)
    if form.key_separator is not None:
        key, sep, payload = line.partition(form.key_separator)
        if not sep:
            raise LineError(f"no key separator {form.key_separator.decode(errors='replace')!r}")
        try:
            return payload, key.decode() or None, form.headers
        except UnicodeDecodeError:
            raise LineError("the key is not valid UTF-8") from None
    return line, form.key, form.headers
