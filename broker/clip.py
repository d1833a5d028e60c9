"""Bounding what an error echoes back: a client's value is quoted by a short prefix only.

A refusal names what was refused ("topic 'x' does not exist"), and the value
comes from the client: a 10 MB topic name would come back as a 10 MB status
message (and a 20,000-character one already breaks gRPC's 8 KiB limit on
received metadata, turning a NOT_FOUND into RESOURCE_EXHAUSTED). Everything
that leaves the broker as a status message or as the ``folio-error-context``
trailing metadata passes through here, so no error class has to remember it.
"""

from __future__ import annotations

import json
import re
from typing import Final

__all__ = [
    "MAX_ECHO_CHARS",
    "MAX_MESSAGE_CHARS",
    "clip",
    "clip_context",
    "clip_context_json",
    "clip_message",
]

#: How much of an echoed value an error quotes.
MAX_ECHO_CHARS: Final = 64
#: The longest status message the broker sends (a last resort: values are clipped first).
MAX_MESSAGE_CHARS: Final = 1024

# A quoted value (repr of a str) or an unbroken run too long to be prose. A quoted
# value is taken only without whitespace: prose between two short quoted names
# ("topic '_txnlog' ... start with '_'") is no value; a long value with spaces that
# is not in the error's context is still bounded by MAX_MESSAGE_CHARS.
_QUOTED_MIN = MAX_ECHO_CHARS + 1
_LONG_QUOTED = re.compile(f"'([^'\\s]{{{_QUOTED_MIN},}})'|\"([^\"\\s]{{{_QUOTED_MIN},}})\"")
_LONG_RUN = re.compile(rf"\S{{{4 * MAX_ECHO_CHARS + 1},}}")


def clip(value: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``value``, or its first ``limit`` characters and how long it was."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}…({len(value)} chars)"


_CLIPPED = re.compile(rf".{{{MAX_ECHO_CHARS}}}…\(\d+ chars\)", re.DOTALL)


def _clip_quoted(match: re.Match[str]) -> str:
    quote = match.group(0)[0]
    inner = match.group(1) if match.group(1) is not None else match.group(2)
    if _CLIPPED.fullmatch(inner):
        return match.group(0)
    return f"{quote}{clip(inner)}{quote}"


def clip_message(message: str, context: dict[str, object] | None = None) -> str:
    """``message`` with every long echoed value cut to a short prefix, and bounded in all.

    Values of ``context`` (the error's typed context) are found verbatim;
    other long quoted strings and long unbroken runs are cut too.
    """
    for value in (context or {}).values():
        if isinstance(value, str) and len(value) > MAX_ECHO_CHARS and value in message:
            message = message.replace(value, clip(value))
    if len(message) <= MAX_ECHO_CHARS:
        return message
    message = _LONG_QUOTED.sub(_clip_quoted, message)
    message = _LONG_RUN.sub(
        lambda match: match.group(0) if "…(" in match.group(0) else clip(match.group(0)), message)
    return clip(message, MAX_MESSAGE_CHARS)


def _clip_value(value: object) -> object:
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, list | tuple):
        items = [_clip_value(item) for item in value[:MAX_ECHO_CHARS]]
        if len(value) > MAX_ECHO_CHARS:
            items.append(f"…({len(value)} items)")
        return items
    if isinstance(value, dict):
        return clip_context(value)
    return value


def clip_context(context: dict[str, object]) -> dict[str, object]:
    """``context`` with every string value (and list) cut to a short prefix."""
    return {clip(str(key)): _clip_value(value) for key, value in context.items()}


def clip_context_json(text: str) -> str:
    """A ``folio-error-context`` JSON object with its values clipped (unchanged if short)."""
    if len(text) <= MAX_ECHO_CHARS:
        return text
    try:
        parsed = json.loads(text)
    except ValueError:
        return json.dumps({"unparsable_context": clip(text)}, separators=(",", ":"))
    if not isinstance(parsed, dict):
        return json.dumps({"context": _clip_value(parsed)}, separators=(",", ":"))
    return json.dumps(clip_context(parsed), separators=(",", ":"))
