"""``/metrics`` of a real ``folio standalone`` reflects what clients did, metric by metric.

Each test works on its own topic of the module's server and reads exact
per-topic counters, or deltas of server-wide ones. State gauges (streams,
flows, transactions) change when the server has handled a call, which may be
a moment after the client returned: those are waited for, with a deadline.
"""

from __future__ import annotations

import grpc
import pytest

import folio
from tests.observability.load import exercise, read_all, write
from tests.observability.scrape import Scrape, scrape, wait_for
from tests.support.bookies import BookieProcess


def test_appends_and_reads_are_counted_per_topic(client: folio.Client, url: str) -> None:
    before = scrape(url)
    client.create_topic("counted", segments=2)

    write(client, "counted", 1000, payload_bytes=100)
    assert read_all(client, "counted", 1000) == 1000

    page = wait_for(url, lambda p: p.value("folio_read_events_total", topic="counted") >= 1000,
                    what="1000 read events counted")
    assert page.value("folio_appended_events_total", topic="counted") == 1000
    # Blocks carry each event's framing besides its payload.
    appended_bytes = page.value("folio_appended_bytes_total", topic="counted")
    assert 100 * 1000 < appended_bytes < 200 * 1000
    assert page.value("folio_read_events_total", topic="counted") == 1000
    assert page.value("folio_read_bytes_total", topic="counted") == appended_bytes
    appends = (page.value("folio_append_seconds_count")
               - before.value("folio_append_seconds_count"))
    assert 1 <= appends <= 1000  # one observation per block, blocks of many events
    assert page.value("folio_append_seconds_bucket", le="+Inf") == page.value(
        "folio_append_seconds_count")


def test_the_bookie_reports_group_commits_fsyncs_and_adds(client: folio.Client, url: str) -> None:
    before = scrape(url)
    client.create_topic("bookie-load")

    write(client, "bookie-load", 500)

    # The bookie's writer thread counts a commit's stages one after another (its
    # queue wait as it begins, entries and adds as it ends, the hand-over after):
    # a scrape in between (the broker's own background appends go on) sees a
    # commit half counted, so take the first scrape between commits.
    def settled(page: Scrape) -> bool:
        def delta(name: str) -> float:
            return page.value(name) - before.value(name)
        commits = delta("folio_bookie_group_commit_entries_count")
        return (delta("folio_bookie_group_commit_entries_sum")
                == delta("folio_bookie_added_entries_total")
                and delta("folio_bookie_journal_wait_seconds_count") <= commits
                and delta("folio_bookie_ack_seconds_count")
                <= delta("folio_bookie_fsync_seconds_count"))

    page = wait_for(url, settled, what="a scrape between two group commits")

    def delta(name: str) -> float:
        return page.value(name) - before.value(name)

    commits = delta("folio_bookie_group_commit_entries_count")
    entries = delta("folio_bookie_group_commit_entries_sum")
    assert commits >= 1
    assert entries == delta("folio_bookie_added_entries_total") >= 1
    assert delta("folio_bookie_added_bytes_total") >= 500 * 100
    assert delta("folio_bookie_fsync_seconds_count") >= 1  # sync durability: every commit
    assert delta("folio_ledger_add_seconds_count") >= 1
    # The latency budget's bookie stages: once per group commit with adds, and one
    # hand-over to the broker's event loop per group commit (never per add request).
    assert 1 <= delta("folio_bookie_journal_wait_seconds_count") <= commits
    assert 1 <= delta("folio_bookie_ack_seconds_count") <= delta(
        "folio_bookie_fsync_seconds_count")
    assert page.value("folio_bookie_ledgers") >= 1
    assert page.value("folio_ledger_open_ledgers") >= 1


def test_errors_are_counted_by_status_code(client: folio.Client, url: str) -> None:
    before = scrape(url).value("folio_errors_total", code="NOT_FOUND")

    for _ in range(3):
        try:
            client.get_topic("never-created")
        except folio.TopicNotFoundError:
            pass
        else:
            raise AssertionError("a missing topic was found")

    assert scrape(url).value("folio_errors_total", code="NOT_FOUND") == before + 3


def test_undecodable_requests_count_as_invalid_argument(server: BookieProcess, url: str) -> None:
    before = scrape(url).value("folio_errors_total", code="INVALID_ARGUMENT")
    with grpc.insecure_channel(server.address) as channel:
        raw_create = channel.unary_unary("/folio.v1.Admin/CreateTopic",
                                         request_serializer=lambda data: data,
                                         response_deserializer=lambda data: data)
        raw_append = channel.stream_stream("/folio.v1.Append/Append",
                                           request_serializer=lambda data: data,
                                           response_deserializer=lambda data: data)
        for call in (lambda: raw_create(b"\xff\xff\xff\xff\x0f", timeout=30),
                     lambda: list(raw_append(iter([b"\x0a\xff\xff\xff\xff\xff"]), timeout=30))):
            with pytest.raises(grpc.RpcError) as caught:
                call()
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    assert scrape(url).value("folio_errors_total", code="INVALID_ARGUMENT") == before + 2


def test_streams_connections_and_flows_are_gauged_while_open(
        server: BookieProcess, url: str) -> None:
    # A client of its own: its pooled Append stream (and the flows bound on
    # it) lives until the client closes, not just the writer.
    wait_for(url, lambda p: p.value("folio_append_flows") == 0
             and p.value("folio_active_streams") == 0
             and p.value("folio_active_connections") == 0,
             what="no streams, flows or connections before the test")
    with folio.Client(server.address) as client:
        client.create_topic("streams", segments=2)
        writer = client.writer("streams")
        reader = client.reader("streams")
        writer.write_event(b"a", routing_key="one")
        writer.write_event(b"b", routing_key="two")
        writer.flush()
        assert reader.read_next(timeout=10) is not None

        def busy(page: Scrape) -> bool:
            return (page.value("folio_append_flows") >= 1
                    and page.value("folio_active_streams", rpc="Read") >= 2  # one per segment
                    and page.value("folio_active_streams", rpc="Append") >= 1
                    and page.value("folio_active_connections") >= 1)

        wait_for(url, busy, what="flows, streams and connections gauged")
        reader.close()
        writer.close()
    wait_for(url, lambda p: p.value("folio_append_flows") == 0
             and p.value("folio_active_streams") == 0
             and p.value("folio_active_connections") == 0,
             what="streams, flows and connections back to zero once the client closed")


def test_transactions_by_state_and_the_aborted_set(client: folio.Client, url: str) -> None:
    before = scrape(url)

    exercise(client, "txns", events=10)

    def done(page: Scrape) -> bool:
        return (page.value("folio_transactions", state="committed")
                >= before.value("folio_transactions", state="committed") + 1
                and page.value("folio_transactions", state="aborted")
                >= before.value("folio_transactions", state="aborted") + 1
                and page.value("folio_txn_buffer_aborted_txns", topic="txns") == 1)

    page = wait_for(url, done, what="one committed and one aborted transaction")
    # Every state is reported, zero or not, so dashboards always have the series.
    assert {labels["state"] for labels, _ in page.samples["folio_transactions"]} == {
        "open", "committing", "committed", "aborting", "aborted", "timed_out"}
    assert page.value("folio_txn_buffer_recovery_seconds_count") >= 2  # one per segment loaded
    # The server snapshots after every change, at its next maintenance round.
    wait_for(url, lambda p: p.value("folio_txn_buffer_snapshot_write_seconds_count") >= 1,
             what="a transaction buffer snapshot written")


def test_segments_are_gauged_by_state(client: folio.Client, url: str) -> None:
    before = scrape(url).value("folio_segments", state="open")
    client.create_topic("three", segments=3)

    # Segments load on first use: 30 routing keys reach all three.
    with client.writer("three") as writer:
        for number in range(30):
            writer.write_event(b"e", routing_key=f"k{number}")
        writer.flush()
    assert {s.end_offset > 0 for s in client.get_segments("three")} == {True}

    page = wait_for(url, lambda p: p.value("folio_segments", state="open") >= before + 3,
                    what="three more open segments")
    assert page.has("folio_segments")
    assert {labels["state"] for labels, _ in page.samples["folio_segments"]} == {
        "open", "sealed"}


def test_reader_group_backlog_follows_the_tail(client: folio.Client, url: str) -> None:
    client.create_topic("backlogged", segments=2)
    write(client, "backlogged", 100)

    client.reader_group("lagging", ["backlogged"])  # at the earliest, no reader yet

    # The maintenance round (every 0.2 s here) sets the gauge.
    wait_for(url, lambda p: p.value("folio_reader_group_backlog_events", group="lagging") == 100,
             what="a backlog of 100 events")
    write(client, "backlogged", 20)
    wait_for(url, lambda p: p.value("folio_reader_group_backlog_events", group="lagging") == 120,
             what="a backlog of 120 events")
    client.delete_reader_group("lagging")
    wait_for(url, lambda p: not any(labels.get("group") == "lagging" for labels, _ in
                                    p.samples.get("folio_reader_group_backlog_events", ())),
             what="the deleted group's series dropped")
