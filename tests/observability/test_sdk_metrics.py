"""The SDK's metrics land in the application's registry (or the default one), per topic."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

import folio
from folio.metrics import client_metrics
from tests.observability.load import read_all, write
from tests.support.bookies import BookieProcess


def test_writes_and_reads_are_counted_in_the_given_registry(server: BookieProcess) -> None:
    registry = CollectorRegistry()
    with folio.Client(server.address, registry=registry) as client:
        client.create_topic("sdk-counted", segments=2)
        write(client, "sdk-counted", 300)
        assert read_all(client, "sdk-counted", 300) == 300

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert sample("folio_client_written_events_total", topic="sdk-counted") == 300
    assert sample("folio_client_read_events_total", topic="sdk-counted") == 300
    written_bytes = sample("folio_client_written_bytes_total", topic="sdk-counted")
    assert written_bytes is not None and written_bytes > 300 * 100
    # Read bytes are the blocks as received, with their responses' few bytes of
    # framing (responses are parsed in one pass: folio._transport.read_view).
    read_bytes = sample("folio_client_read_bytes_total", topic="sdk-counted")
    assert read_bytes is not None and written_bytes <= read_bytes <= written_bytes * 1.01 + 256
    blocks = sample("folio_client_write_seconds_count")
    assert blocks is not None and 1 <= blocks <= 300
    assert sample("folio_client_write_seconds_bucket", le="+Inf") == blocks
    assert sample("folio_client_batch_wait_seconds_count") == blocks  # one per block cut
    # Nothing of it in the default registry.
    assert REGISTRY.get_sample_value("folio_client_written_events_total",
                                     {"topic": "sdk-counted"}) is None


def test_clients_share_the_collectors_of_a_registry(server: BookieProcess) -> None:
    registry = CollectorRegistry()
    with folio.Client(server.address, registry=registry) as first, \
            folio.Client(server.address, registry=registry) as second:
        first.create_topic("sdk-shared")
        write(first, "sdk-shared", 10)
        write(second, "sdk-shared", 5)

    assert client_metrics(registry) is client_metrics(registry)
    assert registry.get_sample_value("folio_client_written_events_total",
                                     {"topic": "sdk-shared"}) == 15
    assert generate_latest(registry).count(b"# TYPE folio_client_written_events_total") == 1


def test_the_default_registry_is_used_without_one(server: BookieProcess) -> None:
    before = REGISTRY.get_sample_value("folio_client_written_events_total",
                                       {"topic": "sdk-default"}) or 0.0
    with folio.Client(server.address) as client:
        client.create_topic("sdk-default")
        write(client, "sdk-default", 7)

    assert REGISTRY.get_sample_value("folio_client_written_events_total",
                                     {"topic": "sdk-default"}) == before + 7


def test_failed_blocks_are_counted_by_error(server: BookieProcess) -> None:
    registry = CollectorRegistry()
    with folio.Client(server.address, registry=registry) as client:
        client.create_topic("sdk-doomed")
        writer = client.writer("sdk-doomed")
        write(client, "sdk-doomed", 1)
        client.delete_topic("sdk-doomed")
        future = writer.write_event(b"late")
        with pytest.raises(folio.FolioError) as raised:
            future.result(timeout=60)
        with pytest.raises(folio.FolioError):
            writer.close()  # closing reports the writer's first error

    assert registry.get_sample_value("folio_client_errors_total",
                                     {"error": type(raised.value).__name__}) == 1
