"""The SDK's side of a cluster, without a cluster: bootstrap, owners, WrongHost.

A real ``folio standalone`` (the module's ``server``) holds the data; a
:class:`tests.support.redirector.Redirector` in front of it plays a broker
that owns no segment and sends clients to the standalone with real WrongHost
answers (on the Append stream, and as UNAVAILABLE + folio-error-code 18 on
Read and GetSegmentInfo), and a real TCP proxy plays an owner that dies. Each
test checks that every acknowledged event is stored exactly once, in order,
and that readers read every event once, in order.

To run these against real brokers (branches ``zk``/``own``): replace the
redirector by a broker that does not own the test topic's segment and the
standalone by its owner; the assertions hold unchanged (marker
``cluster_client``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import folio
from tests.support.bookies import BookieProcess
from tests.support.catch_up import read_to_sentinels
from tests.support.proxy import TcpProxy
from tests.support.redirector import Redirector
from tests.support.wait import wait_for
from tests.support.zookeeper import free_port

pytestmark = pytest.mark.cluster_client

#: Deadline of flushes, reads and waits for a condition.
DEADLINE_S = 30.0
EVENTS = 300


@pytest.fixture
def redirector(server: BookieProcess) -> Iterator[Redirector]:
    with Redirector(server.address) as made:
        yield made


def dead_endpoint() -> str:
    """A loopback port nobody listens on (scripts/free_ports.py: none a port-0 server takes)."""
    return f"127.0.0.1:{free_port()}"


def payloads(first: int, count: int) -> list[bytes]:
    return [f"event-{n:05d}".encode() + b"x" * 90 for n in range(first, first + count)]


def write_all(client: folio.Client, topic: str, events: list[bytes]) -> None:
    """Writes ``events`` (many small blocks), flushes, and checks every future succeeded."""
    with client.writer(topic, batch_size_bytes=1024, linger_ms=1,
                       delivery_timeout_ms=int(DEADLINE_S * 1000)) as writer:
        futures = [writer.write_event(event) for event in events]
        writer.flush()
    for future in futures:
        future.result(timeout=DEADLINE_S)


def stored(server: BookieProcess, topic: str) -> list[bytes]:
    """Every event of ``topic``'s one segment, as the standalone itself serves them."""
    with folio.Client(server.address) as direct:
        end = direct.get_topic(topic).segments[0].end_offset
        with direct.reader(topic) as reader:
            return read_n(reader, end)


def read_n(reader: folio.EventReader[bytes], count: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < count:
        event = reader.read_next(timeout=DEADLINE_S)
        assert event is not None, f"only {len(got)} of {count} events came"
        got.append(event.payload)
    return got


@pytest.mark.parametrize("list_both", [False, True], ids=["one-endpoint", "endpoint-list"])
def test_a_writer_follows_wrong_host_mid_stream_exactly_once(
        server: BookieProcess, redirector: Redirector, list_both: bool) -> None:
    # The redirector stores 4 blocks at the owner, then says WrongHost (owner
    # named): acknowledgements of blocks in doubt are settled by AppendSetup
    # at the owner, and nothing is written twice.
    topic = f"wrong-host-writer-{int(list_both)}"
    redirector.forward_blocks = 4
    endpoint = f"{redirector.address},{server.address}" if list_both else redirector.address
    with folio.Client(endpoint, timeout_s=DEADLINE_S) as client:
        client.create_topic(topic)
        write_all(client, topic, payloads(0, EVENTS))
        pools = client.broker_pool_stats()
    assert redirector.forwarded_blocks == 4
    assert redirector.wrong_hosts >= 1
    assert stored(server, topic) == payloads(0, EVENTS)
    assert server.address in pools


def test_a_writer_looks_the_owner_up_when_wrong_host_names_none(
        server: BookieProcess, redirector: Redirector) -> None:
    topic = "wrong-host-lookup"
    redirector.forward_blocks = 2
    redirector.wrong_host_owner = ""
    redirector.empty_lookups = 3  # "no owner now": a failover in progress
    with folio.Client(redirector.address, timeout_s=DEADLINE_S) as client:
        client.create_topic(topic)
        write_all(client, topic, payloads(0, EVENTS))
    assert redirector.lookups >= 4
    assert stored(server, topic) == payloads(0, EVENTS)


def test_a_writer_whose_owner_cannot_be_found_fails_its_events_in_time_then_recovers(
        server: BookieProcess, redirector: Redirector) -> None:
    # No broker owns the segment for longer than delivery_timeout_ms: the
    # events fail with the typed error (no hang); once an owner is known
    # again the same writer's later events are written, once.
    topic = "owner-not-found"
    redirector.wrong_host_owner = ""
    redirector.empty_lookups = 1_000_000
    with folio.Client(redirector.address, timeout_s=DEADLINE_S) as client:
        client.create_topic(topic)
        with client.writer(topic, linger_ms=1, delivery_timeout_ms=1500) as writer:
            lost = [writer.write_event(event) for event in payloads(0, 10)]
            for future in lost:
                with pytest.raises(folio.DeliveryTimeoutError):
                    future.result(timeout=DEADLINE_S)
            with pytest.raises(folio.DeliveryTimeoutError):
                writer.flush()  # reports the first failure since the last flush
            redirector.empty_lookups = 0
            kept = [writer.write_event(event) for event in payloads(10, 10)]
            writer.flush()
            for future in kept:
                future.result(timeout=DEADLINE_S)
    assert stored(server, topic) == payloads(10, 10)


@pytest.mark.parametrize("named", [True, False], ids=["owner-named", "owner-looked-up"])
def test_a_reader_follows_wrong_host(server: BookieProcess, redirector: Redirector,
                                     named: bool) -> None:
    topic = f"wrong-host-reader-{int(named)}"
    if not named:
        redirector.wrong_host_owner = ""
        redirector.empty_lookups = 2
    with folio.Client(server.address) as direct:
        direct.create_topic(topic)
        write_all(direct, topic, payloads(0, EVENTS))
    with folio.Client(redirector.address, timeout_s=DEADLINE_S) as client, \
            client.reader(topic) as reader:
        assert read_n(reader, EVENTS) == payloads(0, EVENTS)
        assert read_to_sentinels(client, topic, reader, b"sentinel") == []  # nothing twice
    assert redirector.wrong_hosts >= 1
    assert redirector.lookups >= (0 if named else 3)


def test_transactions_follow_wrong_host(server: BookieProcess, redirector: Redirector) -> None:
    # Both kinds: a single-routing-key transaction (one atomic block) and a
    # full one (blocks in place, then CommitTxn through any broker).
    topic = "wrong-host-txn"
    redirector.wrong_host_owner = ""  # and look the owner up
    with folio.Client(redirector.address, timeout_s=DEADLINE_S) as client:
        client.create_topic(topic)
        with client.single_routing_key_txn_writer(topic, "key") as writer:
            txn = writer.begin()
            for payload in payloads(0, 50):
                txn.write_event(payload)
            assert txn.commit(timeout=DEADLINE_S).event_count == 50
        with client.transactional_writer(topic) as full:
            transaction = full.begin()
            for payload in payloads(50, 50):
                transaction.write_event(payload, routing_key="key")
            transaction.commit(timeout=DEADLINE_S)
    assert redirector.wrong_hosts >= 2
    assert stored(server, topic) == payloads(0, 100)


def test_admin_calls_on_a_segment_follow_wrong_host(server: BookieProcess,
                                                    redirector: Redirector) -> None:
    topic = "wrong-host-info"
    with folio.Client(redirector.address, timeout_s=DEADLINE_S) as client:
        client.create_topic(topic)
        write_all(client, topic, payloads(0, 10))
        info = client.get_segment_info(f"{topic}/0")
        seen = redirector.wrong_hosts
        truncated = client.truncate_segment(f"{topic}/0", 0)
    assert info.segment.end_offset == 10
    assert truncated.segment.start_offset == 0 and truncated.segment.end_offset == 10
    assert seen >= 1 and redirector.wrong_hosts > seen


def test_when_the_owner_dies_writers_and_readers_go_on_at_the_new_owner(
        server: BookieProcess, redirector: Redirector) -> None:
    # The owner is reached through a proxy; it dies (the proxy cut and
    # closed: UNAVAILABLE without a code); LookupSegment now names the
    # standalone itself, as a cluster would name the broker that took over.
    topic = "owner-dies"
    proxy = TcpProxy(server.host, server.port)
    try:
        redirector.listed_owner = proxy.address
        redirector.owner = proxy.address
        with folio.Client(f"{redirector.address},{server.address}",
                          timeout_s=DEADLINE_S) as client:
            client.create_topic(topic)
            with client.reader(topic) as reader:
                write_all(client, topic, payloads(0, 100))
                assert read_n(reader, 50) == payloads(0, 50)
                assert proxy.accepted >= 1
                redirector.owner = server.address
                proxy.close()
                write_all(client, topic, payloads(100, 100))
                assert read_n(reader, 150) == payloads(50, 150)
                assert read_to_sentinels(client, topic, reader, b"sentinel") == []
    finally:
        proxy.close()
    assert stored(server, topic) == [*payloads(0, 200), b"sentinel"]


def test_bootstrap_skips_dead_endpoints(server: BookieProcess) -> None:
    dead = dead_endpoint()
    with TcpProxy("127.0.0.1", int(dead.rsplit(":", 1)[1])) as refusing:
        # The proxy accepts and then resets: its target refuses.
        endpoint = f"{dead},{refusing.address},{server.address}"
        with folio.Client(endpoint, timeout_s=DEADLINE_S) as client:
            topic = "bootstrap-dead-first"
            client.create_topic(topic)
            write_all(client, topic, payloads(0, 20))
            with client.reader(topic) as reader:
                assert read_n(reader, 20) == payloads(0, 20)
            pools = client.broker_pool_stats()
    # A standalone listed alone is the endpoint it was reached at: one pool.
    assert list(pools) == [server.address]


def test_admin_calls_fail_over_to_the_next_endpoint(server: BookieProcess) -> None:
    # The first endpoint reaches the standalone through a proxy that then dies.
    with TcpProxy(server.host, server.port) as proxy, \
            folio.Client(f"{proxy.address},{server.address}", timeout_s=DEADLINE_S) as client:
        client.create_topic("failover-1")
        assert client.admin_endpoint == proxy.address
        proxy.close()
        assert "failover-1" in [topic.name for topic in client.list_topics()]
        assert client.admin_endpoint == server.address
        client.create_topic("failover-2")
        write_all(client, "failover-2", payloads(0, 10))
    assert stored(server, "failover-2") == payloads(0, 10)


def test_no_broker_answering_is_one_typed_error_naming_every_endpoint() -> None:
    first, second = dead_endpoint(), dead_endpoint()
    with folio.Client(f"{first}, {second}", timeout_s=5) as client, \
            pytest.raises(folio.NoBrokerAvailableError) as caught:
        client.list_topics()
    error = caught.value
    assert error.endpoints == [first, second]
    assert first in str(error) and second in str(error)
    assert error.retriable
    assert isinstance(error, folio.FolioUnavailableError)


def test_one_endpoint_against_a_standalone_uses_one_pool(server: BookieProcess) -> None:
    # The standalone advertises 127.0.0.1:<port>; the client was given
    # localhost:<port>: one broker, one pool, no lookups.
    endpoint = f"localhost:{server.port}"
    with folio.Client(endpoint, timeout_s=DEADLINE_S) as client:
        topic = "one-endpoint-one-pool"
        info = client.create_topic(topic, segments=2)
        assert all(segment.owner == f"127.0.0.1:{server.port}" for segment in info.segments)
        write_all(client, topic, payloads(0, 50))
        with client.reader(topic) as reader:
            assert sorted(read_n(reader, 50)) == payloads(0, 50)
        wait_for(lambda: len(client.broker_pool_stats()) == 1, "one pool")
        assert list(client.broker_pool_stats()) == [endpoint]
