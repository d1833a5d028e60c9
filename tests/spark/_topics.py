"""What a topic holds, read segment by segment with ``folio.spark._read.read_slice``.

Each segment is read from its start to its end offset now; the read ends even
where the segment ends in events of aborted transactions (``next_offset``).
``read_committed_now`` reads with a deadline, to show no open transaction
holds a read_committed reader.
"""

from __future__ import annotations

import time
from typing import Any

import folio
from folio.read.reader import Isolation
from folio.spark._plan import Slice
from folio.spark._read import open_channel, read_slice


def rows(client: folio.Client, topic: str,
         isolation: Isolation = "read_committed") -> list[dict[str, Any]]:
    """Every event of every segment (sealed ones too), as row dicts, by segment and offset."""
    out: list[dict[str, Any]] = []
    channel = open_channel(client.config)
    try:
        for segment in client.get_segments(topic, include_sealed=True):
            piece = Slice(segment.name, segment.start_offset, segment.end_offset)
            for batch in read_slice(channel, topic, piece, isolation):
                out += batch.to_pylist()
    finally:
        channel.close()
    return out


def payloads(client: folio.Client, topic: str,
             isolation: Isolation = "read_committed") -> list[bytes]:
    """The payloads of ``rows``, sorted."""
    return sorted(row["payload"] for row in rows(client, topic, isolation))


def read_committed_now(client: folio.Client, topic: str, want: int,
                       timeout_s: float = 30.0) -> list[bytes]:
    """The first ``want`` payloads a read_committed reader gets, sorted.

    Fails (instead of waiting for a transaction's timeout) when they do not
    come within ``timeout_s``: an open transaction holds the reader.
    """
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    with client.reader(topic, isolation="read_committed") as reader:
        while len(got) < want:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"read_committed held: {len(got)} of {want} events came"
            event = reader.read_next(timeout=remaining)
            if event is not None:
                got.append(event.payload)
    return sorted(got)
