"""The bookie gRPC service on a loopback port: GrpcBookieClient, raw stubs, garbage, health.

A real ``Bookie`` on RocksDB in a temporary dir is served by
``start_bookie_server`` on port 0 in the test's own event loop. Every refusal
is checked for its exact status code (raw stubs) or error type (client), and
the server is checked to still serve after each.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from ledger._proto.v1 import bookie_pb2, bookie_pb2_grpc
from ledger.api import NO_ENTRY, AddRequest, LedgerTail
from ledger.bookie.bookie import Bookie
from ledger.bookie.remote import GrpcBookieClient
from ledger.bookie.service import SERVICE_NAME, start_bookie_server
from ledger.config import BookieConfig
from ledger.errors import (
    BookieUnavailableError,
    EntryTooLargeError,
    InvalidArgumentError,
    LedgerFencedError,
    NoSuchLedgerError,
)
from ledger.status import ERROR_CODE_KEY, ERROR_KEY
from tests.support.zookeeper import free_port

MAX_ENTRY_BYTES = 64 * 1024
Code = grpc.StatusCode


@dataclass
class Served:
    """A bookie served on a loopback port, a client of it and a raw stub."""

    bookie: Bookie
    server: grpc.aio.Server
    port: int
    client: GrpcBookieClient
    stub: bookie_pb2_grpc.BookieAsyncStub
    channel: grpc.aio.Channel

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    config = BookieConfig(data_dir=str(tmp_path / "bookie"), max_entry_bytes=MAX_ENTRY_BYTES)
    bookie = Bookie(config, bookie_id="test-bookie")
    server, port = await start_bookie_server(bookie, "127.0.0.1", 0)
    address = f"127.0.0.1:{port}"
    client = GrpcBookieClient(address, add_timeout_ms=10_000, read_timeout_ms=10_000)
    channel = grpc.aio.insecure_channel(address)
    try:
        yield Served(bookie, server, port, client, bookie_pb2_grpc.BookieStub(channel), channel)
    finally:
        await client.close()
        await channel.close(None)
        await server.stop(None)
        bookie.shutdown()


def _add(ledger_id: int, datas: list[bytes], *, first_entry_id: int = 0,
         last_add_confirmed: int = NO_ENTRY, length_before: int = 0,
         recovery: bool = False) -> AddRequest:
    lengths: list[int] = []
    total = length_before
    for data in datas:
        total += len(data)
        lengths.append(total)
    entry_ids = range(first_entry_id, first_entry_id + len(datas))
    return AddRequest(ledger_id, entry_ids, lengths, datas, last_add_confirmed, recovery)


def _entries(*entry_ids: int, data: bytes = b"x") -> list[bookie_pb2.Entry]:
    return [bookie_pb2.Entry(entry_id=i, length=(i + 1) * len(data), data=data)
            for i in entry_ids]


def _error_name(error: grpc.aio.AioRpcError) -> object:
    """The error class the server named in the trailing metadata."""
    # grpc-stubs types trailing metadata as _Metadatum objects; grpc.aio gives pairs.
    metadata: Any = error.trailing_metadata() or ()
    return dict(metadata).get(ERROR_KEY)


_probe_ledger = iter(range(1_000_000, 2_000_000))


async def assert_serves(served: Served) -> None:
    """A fresh ledger takes an add and reads it back: the server is still fine."""
    ledger_id = next(_probe_ledger)
    await served.client.add_entries(_add(ledger_id, [b"probe"]))
    result = await served.client.read_entries(ledger_id, 0, 0)
    assert result.datas == [b"probe"]


# --------------------------------------------------------------- client path


async def test_add_read_round_trip(served: Served) -> None:
    client = served.client
    datas = [bytes([i]) * i for i in range(10)] + [b"", b"\x00" * 1000]
    await client.add_entries(_add(1, datas))

    result = await client.read_entries(1, 0, len(datas) - 1)

    assert result.entry_ids == list(range(len(datas)))
    assert result.datas == datas
    assert result.lengths == [sum(map(len, datas[: i + 1])) for i in range(len(datas))]
    assert (result.last_add_confirmed, result.last_entry_id) == (NO_ENTRY, len(datas) - 1)
    assert client.bookie_id == served.address


async def test_add_larger_than_grpc_default_message_limit(served: Served) -> None:
    # 80 entries just under the entry limit: ~5 MiB in one request, above
    # gRPC's 4 MiB default in both directions.
    rng = random.Random(3)
    datas = [rng.randbytes(MAX_ENTRY_BYTES - 1) for _ in range(80)]
    await served.client.add_entries(_add(2, datas))

    result = await served.client.read_entries(2, 0, 79, max_bytes=100 * MAX_ENTRY_BYTES)

    assert result.datas == datas


async def test_read_ranges_and_max_bytes(served: Served) -> None:
    client = served.client
    datas = [i.to_bytes(1, "big") * 1000 for i in range(20)]
    await client.add_entries(_add(3, datas))

    assert (await client.read_entries(3, 5, 7)).entry_ids == [5, 6, 7]
    assert (await client.read_entries(3, 5, 7)).datas == datas[5:8]
    # Beyond what is held: what is held.
    assert (await client.read_entries(3, 15, 10_000)).entry_ids == list(range(15, 20))
    assert (await client.read_entries(3, 20, 30)).entry_ids == []
    # The budget is spent per entry and the entry that exhausts it is included.
    assert (await client.read_entries(3, 0, 19, max_bytes=2500)).entry_ids == [0, 1, 2]
    assert (await client.read_entries(3, 0, 19, max_bytes=3000)).entry_ids == [0, 1, 2]
    assert (await client.read_entries(3, 4, 19, max_bytes=1)).entry_ids == [4]


async def test_sparse_entries_are_skipped(served: Served) -> None:
    # With striping a bookie holds only the entries of its write sets.
    request = AddRequest(4, [0, 3, 6], [1, 4, 7], [b"a", b"b", b"c"], NO_ENTRY)
    await served.client.add_entries(request)

    result = await served.client.read_entries(4, 0, 6)

    assert (result.entry_ids, result.lengths, result.datas) == ([0, 3, 6], [1, 4, 7],
                                                                 [b"a", b"b", b"c"])


async def test_last_add_confirmed_and_last_entry_id(served: Served) -> None:
    client = served.client
    await client.add_entries(_add(5, [b"a"] * 5))
    assert await client.read_last_add_confirmed(5) == LedgerTail(NO_ENTRY, 4, False)

    await client.add_entries(_add(5, [b"b"] * 5, first_entry_id=5, last_add_confirmed=4,
                                  length_before=5))
    assert await client.read_last_add_confirmed(5) == LedgerTail(4, 9, False)
    result = await client.read_entries(5, 9, 9)
    assert (result.last_add_confirmed, result.last_entry_id) == (4, 9)


async def test_fence_refuses_adds_but_not_recovery_adds(served: Served) -> None:
    client = served.client
    await client.add_entries(_add(6, [b"a", b"b"], last_add_confirmed=0))

    assert await client.fence(6) == LedgerTail(0, 1, True)
    with pytest.raises(LedgerFencedError) as refused:
        await client.add_entries(_add(6, [b"c"], first_entry_id=2, length_before=2))
    assert refused.value.ledger_id == 6
    assert not refused.value.retriable

    await client.add_entries(_add(6, [b"c"], first_entry_id=2, length_before=2,
                                  last_add_confirmed=1, recovery=True))
    assert await client.read_last_add_confirmed(6) == LedgerTail(1, 2, True)
    assert (await client.read_entries(6, 0, 2)).datas == [b"a", b"b", b"c"]


async def test_fencing_read_fences(served: Served) -> None:
    client = served.client
    await client.add_entries(_add(7, [b"a"]))

    result = await client.read_entries(7, 0, 0, fence=True)

    assert result.datas == [b"a"]
    with pytest.raises(LedgerFencedError):
        await client.add_entries(_add(7, [b"b"], first_entry_id=1, length_before=1))


async def test_client_raises_typed_errors_with_context(served: Served) -> None:
    client = served.client
    with pytest.raises(EntryTooLargeError) as too_large:
        await client.add_entries(_add(9, [b"x" * (MAX_ENTRY_BYTES + 1)]))
    assert (too_large.value.size, too_large.value.limit) == (MAX_ENTRY_BYTES + 1,
                                                             MAX_ENTRY_BYTES)
    assert too_large.value.ledger_id == 9

    with pytest.raises(InvalidArgumentError):
        await client.read_entries(9, 5, 4)
    with pytest.raises(NoSuchLedgerError):
        await client.read_last_add_confirmed(424242)
    await assert_serves(served)


# ------------------------------------------------------------ unreachable


async def test_refused_connection_is_retriable_unavailability() -> None:
    port = free_port()  # free a moment ago, below the range port-0 servers take: nobody listens
    client = GrpcBookieClient(f"127.0.0.1:{port}", add_timeout_ms=5_000, read_timeout_ms=5_000)
    try:
        with pytest.raises(BookieUnavailableError) as unavailable:
            await client.read_last_add_confirmed(1)
        assert unavailable.value.retriable
        assert unavailable.value.ledger_id == 1
        assert f"127.0.0.1:{port}" in str(unavailable.value)
    finally:
        await client.close()


async def test_silent_peer_is_unavailable_after_the_deadline() -> None:
    # A listener that accepts and never speaks HTTP/2: the call hits its deadline.
    connections: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)

    listener = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = GrpcBookieClient(f"127.0.0.1:{port}", add_timeout_ms=300, read_timeout_ms=300)
    try:
        with pytest.raises(BookieUnavailableError):
            await client.add_entries(_add(1, [b"a"]))
        with pytest.raises(BookieUnavailableError):
            await client.read_entries(1, 0, 0)
    finally:
        await client.close()
        for writer in connections:
            writer.close()
        listener.close()
        await listener.wait_closed()


async def test_closed_client_refuses_calls(served: Served) -> None:
    client = GrpcBookieClient(served.address)
    await client.add_entries(_add(10, [b"a"]))
    await client.close()
    await client.close()  # idempotent
    with pytest.raises(BookieUnavailableError):
        await client.read_entries(10, 0, 0)


# ----------------------------------------------------------- raw bad input


RawCall = Callable[["bookie_pb2_grpc.BookieAsyncStub"], Awaitable[object]]

BAD_REQUESTS: list[tuple[str, RawCall, grpc.StatusCode, str]] = [
    ("unknown ledger read",
     lambda stub: stub.ReadEntries(bookie_pb2.ReadEntriesRequest(
         ledger_id=777, first_entry_id=0, last_entry_id=0)),
     Code.NOT_FOUND, "NoSuchLedgerError"),
    ("unknown ledger LAC",
     lambda stub: stub.ReadLastAddConfirmed(bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=777)),
     Code.NOT_FOUND, "NoSuchLedgerError"),
    ("negative ledger id add",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(ledger_id=-1, entries=_entries(0))),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative ledger id read",
     lambda stub: stub.ReadEntries(bookie_pb2.ReadEntriesRequest(
         ledger_id=-1, first_entry_id=0, last_entry_id=0)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative ledger id LAC",
     lambda stub: stub.ReadLastAddConfirmed(bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=-2)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative ledger id fence",
     lambda stub: stub.Fence(bookie_pb2.FenceRequest(ledger_id=-3)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative ledger id delete",
     lambda stub: stub.DeleteLedger(bookie_pb2.DeleteLedgerRequest(ledger_id=-4)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative entry id",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(
         ledger_id=20, entries=[bookie_pb2.Entry(entry_id=-1, length=1, data=b"x")])),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative first entry id read",
     lambda stub: stub.ReadEntries(bookie_pb2.ReadEntriesRequest(
         ledger_id=21, first_entry_id=-5, last_entry_id=0)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("inverted read range",
     lambda stub: stub.ReadEntries(bookie_pb2.ReadEntriesRequest(
         ledger_id=21, first_entry_id=5, last_entry_id=4)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("negative length",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(
         ledger_id=22, entries=[bookie_pb2.Entry(entry_id=0, length=-1, data=b"x")])),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("empty add",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(ledger_id=23)),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("unordered ids",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(
         ledger_id=24, entries=_entries(2, 1))),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("duplicate ids",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(
         ledger_id=25, entries=_entries(1, 1))),
     Code.INVALID_ARGUMENT, "InvalidArgumentError"),
    ("oversize entry",
     lambda stub: stub.AddEntries(bookie_pb2.AddEntriesRequest(
         ledger_id=26, entries=_entries(0, data=b"x" * (MAX_ENTRY_BYTES + 1)))),
     Code.RESOURCE_EXHAUSTED, "EntryTooLargeError"),
]


@pytest.mark.parametrize(("call", "code", "error_name"),
                         [case[1:] for case in BAD_REQUESTS],
                         ids=[case[0] for case in BAD_REQUESTS])
async def test_bad_request_gets_its_status_and_server_still_serves(
    served: Served, call: RawCall, code: grpc.StatusCode, error_name: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(served.stub)

    assert refused.value.code() is code
    assert _error_name(refused.value) == error_name
    assert refused.value.details()
    await assert_serves(served)


async def test_oversize_entry_message_names_the_limit(served: Served) -> None:
    request = bookie_pb2.AddEntriesRequest(
        ledger_id=27, entries=_entries(0, data=b"x" * (MAX_ENTRY_BYTES + 10)))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await served.stub.AddEntries(request)

    assert refused.value.code() is Code.RESOURCE_EXHAUSTED
    assert refused.value.details() == (
        f"entry of {MAX_ENTRY_BYTES + 10} bytes exceeds the limit of {MAX_ENTRY_BYTES} bytes")
    # Nothing of the refused request was stored.
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await served.stub.ReadLastAddConfirmed(
            bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=27))
    assert missing.value.code() is Code.NOT_FOUND


async def test_add_to_fenced_ledger_is_failed_precondition(served: Served) -> None:
    stub = served.stub
    reply = await stub.AddEntries(bookie_pb2.AddEntriesRequest(
        ledger_id=28, entries=_entries(0, 1), last_add_confirmed=0))
    assert (reply.ledger_id, reply.last_entry_id) == (28, 1)
    fenced = await stub.Fence(bookie_pb2.FenceRequest(ledger_id=28))
    assert (fenced.last_add_confirmed, fenced.last_entry_id) == (0, 1)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.AddEntries(bookie_pb2.AddEntriesRequest(ledger_id=28, entries=_entries(2)))

    assert refused.value.code() is Code.FAILED_PRECONDITION
    assert _error_name(refused.value) == "LedgerFencedError"
    # The stable number of the bookie protocol's LedgerErrorCode travels too.
    trailing: Any = refused.value.trailing_metadata() or ()
    assert dict(trailing)[ERROR_CODE_KEY] == str(bookie_pb2.LEDGER_ERROR_CODE_LEDGER_FENCED)
    tail = await stub.ReadLastAddConfirmed(bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=28))
    assert (tail.last_add_confirmed, tail.last_entry_id, tail.fenced) == (0, 1, True)
    await assert_serves(served)


async def test_fencing_unknown_ledger_creates_fenced_state(served: Served) -> None:
    stub = served.stub
    fenced = await stub.Fence(bookie_pb2.FenceRequest(ledger_id=29))
    assert (fenced.last_add_confirmed, fenced.last_entry_id) == (NO_ENTRY, NO_ENTRY)

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.AddEntries(bookie_pb2.AddEntriesRequest(ledger_id=29, entries=_entries(0)))
    assert refused.value.code() is Code.FAILED_PRECONDITION


# ------------------------------------------------------------------ garbage


_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_garbage_rng = random.Random(20240611)  # fixed seed: the same bytes every run
GARBAGE: dict[str, bytes] = {
    "random bytes": _garbage_rng.randbytes(4096),
    "bogus preface": b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + _garbage_rng.randbytes(100),
    "preface then bad frame": _PREFACE + b"\xff\xff\xff\x00\x00\x00\x00\x00\x00"
    + _garbage_rng.randbytes(100),
    "preface then random": _PREFACE + _garbage_rng.randbytes(1000),
    "http/1.1 request": b"GET / HTTP/1.1\r\nHost: bookie\r\n\r\n",
}


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError):  # the server may have reset it already
        await writer.wait_closed()


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
async def test_garbage_bytes_are_dropped_and_server_still_serves(
    served: Served, garbage: bytes
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(garbage)
        await writer.drain()
        # The server answers with its SETTINGS (and maybe GOAWAY), then hangs up.
        async with asyncio.timeout(10):
            await reader.read(-1)
        assert reader.at_eof()
    finally:
        await _close(writer)
    await assert_serves(served)


async def test_stalled_half_preface_does_not_block_others(served: Served) -> None:
    _reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        writer.write(_PREFACE[:10])
        await writer.drain()
        await assert_serves(served)
    finally:
        await _close(writer)


# ------------------------------------------------------ health, reflection


async def test_health_reports_serving(served: Served) -> None:
    health = health_pb2_grpc.HealthStub(served.channel)
    for service in (SERVICE_NAME, ""):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert SERVICE_NAME == "folio.ledger.v1.Bookie"

    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
    assert unknown.value.code() is Code.NOT_FOUND


async def test_reflection_lists_the_bookie_service(served: Served) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(served.channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")

    async def requests() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
        yield request

    names: set[str] = set()
    async for reply in stub.ServerReflectionInfo(requests()):
        names.update(service.name for service in reply.list_services_response.service)
    assert {SERVICE_NAME, "grpc.health.v1.Health"} <= names


async def test_second_server_on_a_taken_port_is_refused(served: Served, tmp_path: Path) -> None:
    other = Bookie(BookieConfig(data_dir=str(tmp_path / "other")))
    try:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{served.port}"):
            await start_bookie_server(other, "127.0.0.1", served.port)
    finally:
        other.shutdown()
    await assert_serves(served)
