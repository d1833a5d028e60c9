"""Proving a reader has nothing more to give: a positive event, never silence.

"``read_next(timeout=0.2)`` is None" passes by itself on a loaded machine
(the reader may simply be late). ``read_to_sentinels`` instead writes one
sentinel event to each active segment of the topic and reads until every
sentinel has arrived: whatever else was read on the way is what the reader
still had, and a "nothing more" check asserts that it is empty.
"""

from __future__ import annotations

import time
from typing import Any

import folio
from folio.api.v1.routing import routing_point

__all__ = ["read_to_sentinels"]


def _key_in(segment: folio.SegmentRange) -> str:
    """A routing key whose point falls in ``segment``'s key range."""
    for n in range(100_000):
        key = f"sentinel-{n}"
        if segment.key_low <= routing_point(key) < segment.key_high:
            return key
    raise AssertionError(f"no routing key found for {segment.name}")


def read_to_sentinels(client: folio.Client, topic: str, reader: folio.EventReader[Any],
                      sentinel: Any, serializer: folio.Serializer[Any] | None = None,
                      timeout_s: float = 30.0) -> list[folio.Event[Any]]:
    """Writes ``sentinel`` once per active segment of ``topic``, reads them all back.

    Returns:
        The events other than the sentinels that ``reader`` returned before the
        last sentinel (events after a sentinel in the same segment are not read).
    """
    segments = client.get_segments(topic)
    with (client.writer(topic) if serializer is None
          else client.writer(topic, serializer)) as writer:
        for segment in segments:
            writer.write_event(sentinel, routing_key=_key_in(segment)).result(timeout_s)
    missing = {segment.name for segment in segments}
    others: list[folio.Event[Any]] = []
    deadline = time.monotonic() + timeout_s
    while missing:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"sentinels of {sorted(missing)} not read within {timeout_s} s"
        event = reader.read_next(timeout=remaining)
        if event is None:
            continue
        if event.payload == sentinel and event.segment in missing:
            missing.discard(event.segment)
        else:
            others.append(event)
    return others
