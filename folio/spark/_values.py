"""The ``value`` column: payloads decoded as text or JSON, and what an undecodable one does.

With ``valueFormat`` ``string`` (UTF-8) or ``json`` (UTF-8 text that parses as
JSON; the column holds the text, for ``from_json`` with the application's
schema) the rows gain ``value`` and ``value_error`` columns. A payload that
does not decode is, by ``onDeserializationError``:

- ``fail`` (the default): the task fails with ``DeserializationError`` naming
  the topic, segment and offset (Spark retries it, then fails the query: the
  same bytes fail every time; nothing after the event is read past it);
- ``skip``: its row is left out, logged at WARNING on the executor;
- ``raw``: its row is kept with ``value`` null and ``value_error`` saying why
  (``payload`` always holds the bytes).

``binary`` (the default) decodes nothing and adds no column.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Final, Literal

from folio.errors import DeserializationError

__all__ = ["ERROR_POLICIES", "VALUE_COLUMNS_DDL", "VALUE_FORMATS", "ErrorPolicy",
           "ValueDecoder", "ValueFormat"]

log = logging.getLogger(__name__)

ValueFormat = Literal["binary", "string", "json"]
ErrorPolicy = Literal["fail", "skip", "raw"]
VALUE_FORMATS: Final = ("binary", "string", "json")
ERROR_POLICIES: Final = ("fail", "skip", "raw")
#: The columns a ``valueFormat`` other than ``binary`` adds.
VALUE_COLUMNS_DDL: Final = "value string, value_error string"


class ValueDecoder:
    """Decodes one segment's payloads into the ``value`` column, by format and policy."""

    def __init__(self, topic: str, segment: str, value_format: ValueFormat,
                 policy: ErrorPolicy) -> None:
        self._topic = topic
        self._segment = segment
        self._json = value_format == "json"
        self._policy = policy

    def decode(self, payloads: Sequence[bytes], first_offset: int,
               ) -> tuple[list[str | None], list[str | None], list[int] | None]:
        """Values and errors of ``payloads`` (offsets from ``first_offset``), and which
        of them to keep (None: all).

        Raises:
            DeserializationError: a payload does not decode and the policy is ``fail``.
        """
        values: list[str | None] = []
        errors: list[str | None] = []
        dropped: list[int] = []
        for index, payload in enumerate(payloads):
            try:
                text = payload.decode("utf-8")
                if self._json:
                    json.loads(text)
            except ValueError as cause:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                error = self._error(first_offset + index, payload, cause)
                if self._policy == "fail":
                    raise error from cause
                if self._policy == "skip":
                    log.warning("skipped an event that does not decode: %s", error)
                    dropped.append(index)
                values.append(None)
                errors.append(str(error))
                continue
            values.append(text)
            errors.append(None)
        if not dropped:
            return values, errors, None
        gone = set(dropped)
        return values, errors, [i for i in range(len(payloads)) if i not in gone]

    def _error(self, offset: int, payload: bytes, cause: ValueError) -> DeserializationError:
        what = "JSON in UTF-8" if self._json else "UTF-8 text"
        return DeserializationError(
            f"segment {self._segment} offset {offset}: the payload ({len(payload)} bytes) is "
            f"not {what}: {type(cause).__name__}: {cause}", topic=self._topic,
            segment=self._segment, offset=offset, payload=payload, cause=cause)
