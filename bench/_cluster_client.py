"""Raw gRPC clients of a cluster that follow WrongHost (bench.failover and the failover tests).

``SegmentWriter`` appends numbered one-event blocks to ONE segment, as any
gRPC client following admin.proto "Cluster" would: it asks LookupSegment (on
any broker) for the owner, sends SetupAppend there, and on WrongHost, a
broken stream or a deadline, looks the owner up again and resends what was
not acknowledged (AppendSetup's last_event_number says what was stored, so
nothing is doubled). ``read_segment`` reads a segment to its end from its
owner. Both use the stubs only (no SDK), so they test the servers' protocol.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import grpc

from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    events_pb2,
    read_pb2,
    read_pb2_grpc,
)

__all__ = ["SegmentWriter", "list_brokers", "lookup_owner", "read_segment"]

_STREAM_DEADLINE_S = 8.0


def _channel(address: str) -> grpc.Channel:
    return grpc.insecure_channel(address)


def lookup_owner(brokers: Sequence[str], segment: str, timeout_s: float = 60.0) -> str:
    """The segment's owner, asking the brokers in turn until one names it."""
    deadline = time.monotonic() + timeout_s
    while True:
        for address in brokers:
            with _channel(address) as channel:
                try:
                    reply = admin_pb2_grpc.AdminStub(channel).LookupSegment(
                        admin_pb2.LookupSegmentRequest(segment=segment), timeout=2)
                except grpc.RpcError:
                    continue
                if reply.owner:
                    return reply.owner
        if time.monotonic() > deadline:
            raise AssertionError(f"no owner of {segment} within {timeout_s} s")
        time.sleep(0.05)


def list_brokers(address: str) -> admin_pb2.ListBrokersResponse:
    with _channel(address) as channel:
        return admin_pb2_grpc.AdminStub(channel).ListBrokers(
            admin_pb2.ListBrokersRequest(), timeout=5)


class _Stream:
    """One Append stream to one broker, one flow."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = _channel(address)
        self.requests: queue.Queue[append_pb2.AppendCommand | None] = queue.Queue()
        self.replies: Any = append_pb2_grpc.AppendStub(self.channel).Append(
            self._commands(), timeout=_STREAM_DEADLINE_S * 100)

    def _commands(self) -> Iterator[append_pb2.AppendCommand]:
        while (command := self.requests.get()) is not None:
            yield command

    def call(self, command: append_pb2.AppendCommand) -> append_pb2.AppendReply:
        """Send ``command``, wait for its reply (a hung broker: TimeoutError)."""
        self.requests.put(command)
        result: list[append_pb2.AppendReply | BaseException] = []
        done = threading.Event()

        def receive() -> None:
            try:
                result.append(next(self.replies))
            except BaseException as error:
                result.append(error)
            done.set()

        threading.Thread(target=receive, daemon=True).start()
        if not done.wait(_STREAM_DEADLINE_S):
            raise TimeoutError(f"no reply from {self.address}")
        reply = result[0]
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def close(self) -> None:
        self.requests.put(None)
        self.channel.close()


class SegmentWriter:
    """Appends events numbered 0, 1, 2, ... to one segment, following its owner."""

    def __init__(self, brokers: Sequence[str], segment: str, writer_id: str) -> None:
        self.brokers = list(brokers)
        self.segment = segment
        self.writer_id = writer_id
        self.acknowledged = -1  # the highest event number acknowledged
        #: time.monotonic() of the latest acknowledgement, and the broker that gave it.
        self.acknowledged_at = 0.0
        self.acknowledged_by = ""
        self.owners_seen: list[str] = []
        self.wrong_hosts = 0
        self._stream: _Stream | None = None
        self._stored = -1  # last_event_number of the current stream's setup

    def payload(self, number: int) -> bytes:
        return f"{self.writer_id}:{number}".encode()

    def _connect(self) -> _Stream:
        while True:
            owner = lookup_owner(self.brokers, self.segment)
            stream = _Stream(owner)
            try:
                reply = stream.call(append_pb2.AppendCommand(
                    request_id=1 << 32, setup_append=append_pb2.SetupAppend(
                        segment=self.segment, writer_id=self.writer_id)))
            except (grpc.RpcError, TimeoutError):
                stream.close()
                time.sleep(0.05)
                continue
            if reply.WhichOneof("reply") == "append_setup":
                self._stored = reply.append_setup.last_event_number
                self.owners_seen.append(owner)
                return stream
            stream.close()
            self.wrong_hosts += reply.WhichOneof("reply") == "wrong_host"
            time.sleep(0.05)

    def append_next(self, deadline_s: float = 60.0) -> None:
        """Append event ``acknowledged + 1`` and return once it is acknowledged."""
        number = self.acknowledged + 1
        deadline = time.monotonic() + deadline_s
        sequence = 0
        while time.monotonic() < deadline:
            if self._stream is None:
                self._stream = self._connect()
                if self._stored >= number:  # stored before the stream broke
                    self._acknowledge(number)
                    return
            sequence += 1
            block = events_pb2.EventBlock(format_version=1, payloads=[self.payload(number)])
            try:
                reply = self._stream.call(append_pb2.AppendCommand(
                    request_id=(1 << 32) | sequence, append_block=append_pb2.AppendBlock(
                        data=block.SerializeToString(), event_count=1,
                        last_event_number=number, end=True)))
            except (grpc.RpcError, TimeoutError):
                reply = None
            if reply is not None and reply.WhichOneof("reply") == "data_appended":
                self._acknowledge(number)
                return
            if reply is not None and reply.WhichOneof("reply") == "wrong_host":
                self.wrong_hosts += 1
            self._stream.close()
            self._stream = None
        raise AssertionError(f"{self.writer_id}: event {number} not acknowledged in "
                             f"{deadline_s} s (owners seen {self.owners_seen})")

    def _acknowledge(self, number: int) -> None:
        assert self._stream is not None
        self.acknowledged_by = self._stream.address
        self.acknowledged, self.acknowledged_at = number, time.monotonic()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


def read_segment(brokers: Sequence[str], segment: str, *,
                 committed: bool = False) -> list[bytes]:
    """Every payload of ``segment`` from its owner, to its end now (read_uncommitted
    unless ``committed``: then up to the committed end, transactions committed only)."""
    owner = lookup_owner(brokers, segment)
    payloads: list[bytes] = []
    with _channel(owner) as channel:
        stub = read_pb2_grpc.ReadStub(channel)
        offset = 0
        while True:
            responses: Any = stub.Read(read_pb2.ReadRequest(
                segment=segment, offset=offset, max_wait_ms=1,
                isolation=read_pb2.ReadRequest.READ_COMMITTED if committed
                else read_pb2.ReadRequest.READ_UNCOMMITTED), timeout=30)
            end = None
            for response in responses:
                for block in response.blocks:
                    event_block = events_pb2.EventBlock.FromString(block.data)
                    payloads.extend(event_block.payloads)
                offset = response.next_offset or offset
                end = response.end_offset
                if offset >= end:
                    break
            responses.cancel()
            if end is not None and offset >= end:
                return payloads
