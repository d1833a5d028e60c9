"""A broker of a pretend cluster that owns no segment: it sends clients elsewhere.

``Redirector(target)`` is a real gRPC server on a free loopback port that
speaks the cluster side of the public protocol ("Cluster" in
proto/folio/v1/admin.proto) in front of a real ``folio standalone`` at
``target``, which holds the data:

- ``ListBrokers`` lists itself and ``target`` (``container_count`` 2), so a
  client bootstrapping from it routes segments to their owners;
- ``GetTopic``/``GetSegments``/``CreateTopic``/``GetSuccessors`` are
  forwarded to ``target``, with every ``Segment.owner`` replaced by
  ``listed_owner`` (default: the redirector itself, a stale owner);
- ``LookupSegment`` answers ``owner`` (default ``target``), after answering
  "" (no owner: a failover in progress) ``empty_lookups`` times;
- the ``Append`` stream forwards the first ``forward_blocks`` blocks (and the
  setups before them) to ``target``, then answers every command with
  ``wrong_host`` naming ``wrong_host_owner`` (default: ``owner``; "" makes the
  client look the owner up), as a broker that just lost the segment does;
- ``Read``, ``GetSegmentInfo`` and ``TruncateSegment`` fail with UNAVAILABLE
  and ``folio-error-code`` 18 with context ``{segment, owner}``;
- the ``Transactions`` service is forwarded (any broker serves it).

So a client's writers and readers meet real WrongHost answers and must end up
at ``target``, where the test checks what was stored. Counters say what the
redirector saw. The attributes may be changed while it runs (from the test
thread; plain assignments).

Against a real cluster (branch ``zk``: ``make cluster``) the same tests apply
with the redirector replaced by a broker that does not own the segment; see
``tests/integration/test_cluster_client.py``.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from concurrent import futures
from types import TracebackType
from typing import Any, Final

import grpc

from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
    transactions_pb2_grpc,
)
from tests.support.trailers import trailing_pairs

__all__ = ["Redirector"]

_WRONG_HOST_CODE: Final = "18"
_CALL_TIMEOUT_S: Final = 30.0
_END: Final = object()


class Redirector:
    """A pretend cluster broker that owns nothing (see the module docstring)."""

    def __init__(self, target: str, *, forward_blocks: int = 0, empty_lookups: int = 0) -> None:
        self.target = target
        # The SDK PINGs every second (folio._transport.liveness): accept it as a
        # broker does, or gRPC answers GOAWAY "too_many_pings" and cuts the client.
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=[
            ("grpc.http2.min_ping_interval_without_data_ms", 500),
            ("grpc.http2.max_ping_strikes", 0)])
        port = self._server.add_insecure_port("127.0.0.1:0")
        #: The redirector's own address.
        self.address = f"127.0.0.1:{port}"
        #: What Segment.owner says in forwarded answers.
        self.listed_owner = self.address
        #: What LookupSegment answers (after ``empty_lookups`` empty answers).
        self.owner = target
        #: The owner named in WrongHost answers; None: ``owner``.
        self.wrong_host_owner: str | None = None
        self.empty_lookups = empty_lookups
        self.forward_blocks = forward_blocks
        self.lookups = 0
        self.wrong_hosts = 0
        self.forwarded_blocks = 0
        self._lock = threading.Lock()
        self._channel = grpc.insecure_channel(target)
        self._admin = admin_pb2_grpc.AdminStub(self._channel)
        self._append = append_pb2_grpc.AppendStub(self._channel)
        self._transactions = transactions_pb2_grpc.TransactionsStub(self._channel)
        # _Admin forwards only the calls the tests make; the abstract rest answer
        # UNIMPLEMENTED as grpc's generated base class does.
        admin_pb2_grpc.add_AdminServicer_to_server(
            _Admin(self), self._server)  # type: ignore[abstract]
        append_pb2_grpc.add_AppendServicer_to_server(_Append(self), self._server)
        read_pb2_grpc.add_ReadServicer_to_server(_Read(self), self._server)
        transactions_pb2_grpc.add_TransactionsServicer_to_server(_Transactions(self),
                                                                  self._server)
        self._server.start()

    def named_owner(self) -> str:
        """The owner WrongHost answers name now."""
        return self.owner if self.wrong_host_owner is None else self.wrong_host_owner

    def lookup(self) -> str:
        """LookupSegment's answer now (counting the empty ones)."""
        with self._lock:
            self.lookups += 1
            if self.empty_lookups > 0:
                self.empty_lookups -= 1
                return ""
            return self.owner

    def count_wrong_host(self) -> None:
        with self._lock:
            self.wrong_hosts += 1

    def take_forward(self) -> bool:
        """Whether one more block may go to the target (counting it)."""
        with self._lock:
            if self.forwarded_blocks < self.forward_blocks:
                self.forwarded_blocks += 1
                return True
            return False

    def relist(self, segment: admin_pb2.Segment) -> admin_pb2.Segment:
        segment.owner = self.listed_owner
        return segment

    def forward(self, name: str, request: Any, service: str = "admin") -> Any:
        stub = self._admin if service == "admin" else self._transactions
        return getattr(stub, name)(request, timeout=_CALL_TIMEOUT_S)

    def open_upstream(self, commands: Iterator[append_pb2.AppendCommand]) -> Any:
        return self._append.Append(commands, timeout=_CALL_TIMEOUT_S * 10)

    def close(self) -> None:
        """Stops the server (cancelling live calls) and closes the channel to the target."""
        self._server.stop(None).wait(10)
        self._channel.close()

    def __enter__(self) -> Redirector:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _abort_wrong_host(context: grpc.ServicerContext, segment: str, owner: str) -> None:
    context.set_trailing_metadata((
        ("folio-error-code", _WRONG_HOST_CODE),
        ("folio-error", "WrongHostError"),
        ("folio-error-context", json.dumps({"segment": segment, "owner": owner})),
    ))
    context.abort(grpc.StatusCode.UNAVAILABLE,
                  f"this broker does not own segment {segment!r}")


class _Admin(admin_pb2_grpc.AdminServicer):
    def __init__(self, redirector: Redirector) -> None:
        self._r = redirector

    def _forward(self, name: str, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return self._r.forward(name, request)
        except grpc.RpcError as error:
            context.set_trailing_metadata(trailing_pairs(error))
            context.abort(error.code(), error.details() or "")

    def CreateTopic(self, request: Any, context: grpc.ServicerContext) -> Any:
        topic = self._forward("CreateTopic", request, context)
        for segment in topic.segments:
            self._r.relist(segment)
        return topic

    def GetTopic(self, request: Any, context: grpc.ServicerContext) -> Any:
        topic = self._forward("GetTopic", request, context)
        for segment in topic.segments:
            self._r.relist(segment)
        return topic

    def GetSegments(self, request: Any, context: grpc.ServicerContext) -> Any:
        answer = self._forward("GetSegments", request, context)
        for segment in answer.segments:
            self._r.relist(segment)
        return answer

    def GetSuccessors(self, request: Any, context: grpc.ServicerContext) -> Any:
        answer = self._forward("GetSuccessors", request, context)
        for segment in answer.successors:
            self._r.relist(segment)
        return answer

    def GetSegmentInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._r.count_wrong_host()
        _abort_wrong_host(context, request.segment, self._r.named_owner())

    def TruncateSegment(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._r.count_wrong_host()
        _abort_wrong_host(context, request.segment, self._r.named_owner())

    def LookupSegment(self, request: Any, context: grpc.ServicerContext) -> Any:
        return admin_pb2.LookupSegmentResponse(segment=request.segment, owner=self._r.lookup())

    def ListBrokers(self, request: Any, context: grpc.ServicerContext) -> Any:
        return admin_pb2.ListBrokersResponse(brokers=[
            admin_pb2.Broker(id="redirector", address=self._r.address, containers=[0]),
            admin_pb2.Broker(id="target", address=self._r.target, containers=[1]),
        ], container_count=2)


def _forwarding(name: str) -> Any:
    def method(self: _Transactions, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return self._r.forward(name, request, "transactions")
        except grpc.RpcError as error:
            context.set_trailing_metadata(trailing_pairs(error))
            context.abort(error.code(), error.details() or "")
    return method


class _Transactions(transactions_pb2_grpc.TransactionsServicer):
    def __init__(self, redirector: Redirector) -> None:
        self._r = redirector

    BeginTxn = _forwarding("BeginTxn")
    CommitTxn = _forwarding("CommitTxn")
    AbortTxn = _forwarding("AbortTxn")
    AbortTxns = _forwarding("AbortTxns")
    GetTxnStatus = _forwarding("GetTxnStatus")


class _Read(read_pb2_grpc.ReadServicer):
    def __init__(self, redirector: Redirector) -> None:
        self._r = redirector

    def Read(self, request: read_pb2.ReadRequest,
             context: grpc.ServicerContext) -> Iterator[read_pb2.ReadResponse]:
        self._r.count_wrong_host()
        _abort_wrong_host(context, request.segment, self._r.named_owner())
        yield from ()


class _Append(append_pb2_grpc.AppendServicer):
    """Forwards setups and the first blocks to the target; then answers WrongHost."""

    def __init__(self, redirector: Redirector) -> None:
        self._r = redirector

    def Append(self, commands: Iterator[append_pb2.AppendCommand],
               context: grpc.ServicerContext) -> Iterator[append_pb2.AppendReply]:
        replies: queue.Queue[Any] = queue.Queue()
        upstream: queue.Queue[Any] = queue.Queue()
        segments: dict[int, str] = {}
        moved: set[int] = set()  # flows answered WrongHost: nothing more of theirs goes up

        def upstream_commands() -> Iterator[append_pb2.AppendCommand]:
            while (command := upstream.get()) is not _END:
                yield command

        call = self._r.open_upstream(upstream_commands())

        def relay_up() -> None:
            try:
                for reply in call:
                    if reply.request_id >> 32 not in moved:
                        replies.put(reply)
            except grpc.RpcError:
                pass
            replies.put(_END)

        def take_commands() -> None:
            try:
                for command in commands:
                    flow = command.request_id >> 32
                    kind = command.WhichOneof("command")
                    if kind == "setup_append":
                        segments[flow] = command.setup_append.segment
                    if flow not in moved and (
                            kind != "append_block" or self._r.take_forward()):
                        upstream.put(command)
                        continue
                    moved.add(flow)
                    self._r.count_wrong_host()
                    replies.put(append_pb2.AppendReply(
                        request_id=command.request_id,
                        wrong_host=append_pb2.WrongHost(segment=segments.get(flow, ""),
                                                        owner=self._r.named_owner())))
            except grpc.RpcError:
                pass
            upstream.put(_END)

        threads = [threading.Thread(target=relay_up, daemon=True),
                   threading.Thread(target=take_commands, daemon=True)]
        for thread in threads:
            thread.start()
        try:
            while (reply := replies.get()) is not _END:
                yield reply
        finally:
            call.cancel()
            upstream.put(_END)
