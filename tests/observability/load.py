"""Load for the observability tests: writes, reads, a refused call, transactions, via the SDK."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

import folio

__all__ = ["Exercised", "exercise", "read_all", "write"]


@dataclass(frozen=True)
class Exercised:
    """What ``exercise`` did."""

    topic: str
    events: int
    payload_bytes: int


def write(client: folio.Client, topic: str, events: int, payload_bytes: int = 100) -> None:
    """Write ``events`` events of ``payload_bytes`` over four routing keys; all acknowledged."""
    payload = b"x" * payload_bytes
    with client.writer(topic) as writer:
        for number in range(events):
            writer.write_event(payload, routing_key=f"key-{number % 4}")
        writer.flush()


def read_all(client: folio.Client, topic: str, events: int, timeout_s: float = 60.0) -> int:
    """Read ``topic`` from the start until ``events`` events came; how many came."""
    deadline = time.monotonic() + timeout_s
    got = 0
    with client.reader(topic, start="earliest") as reader:
        while got < events:
            assert time.monotonic() < deadline, f"read {got} of {events} events in time"
            if reader.read_next(timeout=1) is not None:
                got += 1
    return got


def exercise(client: folio.Client, topic: str, events: int = 1000) -> Exercised:
    """Everything the dashboard shows, once: writes, reads, an error, two transactions."""
    client.create_topic(topic, segments=2)
    write(client, topic, events)
    assert read_all(client, topic, events) == events
    with pytest.raises(folio.TopicNotFoundError):
        client.get_topic(f"{topic}-missing")
    with client.transactional_writer(topic) as writer:
        committed = writer.begin()
        committed.write_event(b"kept", routing_key="key-0")
        committed.commit()
        aborted = writer.begin()
        aborted.write_event(b"gone", routing_key="key-0")
        aborted.flush()
        aborted.abort()
    return Exercised(topic, events, 100)
