"""A remote bookie: ``GrpcBookieClient``, the client end of the bookie protocol.

It satisfies ``ledger.api.BookieClient`` over a ``grpc.aio`` channel and
raises the same ``ledger.errors`` types the in-process bookie raises (rebuilt
from the status by ``ledger.status``), so a ledger handle cannot tell them
apart. The server end is ``ledger.bookie.service``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import grpc

from ledger._proto.v1 import bookie_pb2, bookie_pb2_grpc
from ledger.api import AddRequest, LedgerTail, ReadResult
from ledger.bookie.service import MAX_MESSAGE_BYTES
from ledger.errors import BookieUnavailableError, LedgerError
from ledger.security.tls import ClientTls, ReloadingChannelCredentials
from ledger.security.tokens import TokenFile
from ledger.status import error_from_status, has_error_metadata

__all__ = ["GrpcBookieClient", "bookie_client_factory"]


_CLIENT_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Notice a dead bookie (a cut connection sends no FIN) within ~40 s even
    # when the handle is idle, rather than at the next add's deadline only.
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    # This gRPC waits for a ping's answer for http2.ping_timeout_ms (one
    # minute by default), not keepalive_timeout_ms: set both.
    ("grpc.http2.ping_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Try a bookie that refused a connection again within a second, not after
    # gRPC's default backoff (1 s growing to 120 s): calls fail fast meanwhile,
    # so a bookie restarted in a rolling restart would be refused adds (and
    # its ledgers reads) for many seconds after it is back.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 1_000),
)


class GrpcBookieClient:
    """A remote bookie as a ``BookieClient``, over one ``grpc.aio`` channel.

    The channel is opened on first use, in the running event loop, and fails
    fast: a call to a bookie that is down raises ``BookieUnavailableError``
    (retriable) at once rather than waiting for it to come back. A call past
    its deadline raises ``BookieUnavailableError`` too; the add it carried may
    or may not have been stored (a ledger handle treats the bookie as failed).

    With ``tls`` the channel is TLS (mutual when it holds a certificate);
    when its files change the next call opens a new channel with them and
    the old one is closed once its calls had their deadline to finish. With
    ``token`` every call carries ``authorization: Bearer <token>`` (a
    bookie with token authentication accepts only the brokers' roles).

    Args:
        address: ``host:port`` of the bookie; also its ``bookie_id``.
        add_timeout_ms: deadline of adds, fences and deletes (the writes).
        read_timeout_ms: deadline of reads and LAC reads.
        tls: the broker's client TLS towards bookies (None: plain text).
        token: a callable returning the token to send (None: none).
    """

    def __init__(
        self, address: str, *, add_timeout_ms: int = 10_000, read_timeout_ms: int = 10_000,
        tls: ReloadingChannelCredentials | None = None,
        token: Callable[[], str] | None = None,
    ) -> None:
        if add_timeout_ms <= 0 or read_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")
        self._address = address
        self._add_timeout_s = add_timeout_ms / 1000
        self._read_timeout_s = read_timeout_ms / 1000
        self._channel: grpc.aio.Channel | None = None
        self._stub: bookie_pb2_grpc.BookieAsyncStub | None = None
        self._closed = False
        self._tls = tls
        self._tls_generation = -1
        self._token = token
        self._retired: set[asyncio.Task[None]] = set()

    @property
    def bookie_id(self) -> str:
        """The bookie's address, as given."""
        return self._address

    def _metadata(self) -> tuple[tuple[str, str], ...] | None:
        if self._token is None:
            return None
        return (("authorization", f"Bearer {self._token()}"),)

    def _connect(self) -> bookie_pb2_grpc.BookieAsyncStub:
        if self._tls is not None and self._stub is not None:
            _credentials, generation = self._tls.current()
            if generation != self._tls_generation:
                self._retire()
        if self._stub is None:
            if self._closed:
                raise BookieUnavailableError(f"client of bookie {self._address} is closed")
            if self._tls is None:
                self._channel = grpc.aio.insecure_channel(self._address,
                                                          options=_CLIENT_OPTIONS)
            else:
                credentials, self._tls_generation = self._tls.current()
                self._channel = grpc.aio.secure_channel(
                    self._address, credentials,
                    options=_CLIENT_OPTIONS + self._tls.tls.channel_options())
            self._stub = bookie_pb2_grpc.BookieStub(self._channel)
        return self._stub

    def _retire(self) -> None:
        """New TLS files: the next call opens a new channel; this one closes after a grace."""
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            grace_s = max(self._add_timeout_s, self._read_timeout_s)
            task = asyncio.get_running_loop().create_task(channel.close(grace_s))
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)

    def _error(self, error: grpc.aio.AioRpcError, ledger_id: int) -> LedgerError:
        metadata = tuple(error.trailing_metadata() or ())
        if has_error_metadata(metadata):
            return error_from_status(error.code(), error.details(), ledger_id, metadata=metadata)
        # No Folio metadata: the bookie itself did not answer (refused, cut,
        # deadline, a message too large for gRPC...). Say which bookie it was.
        return error_from_status(
            error.code(), f"bookie {self._address}: {error.details()}", ledger_id
        )

    async def add_entries(self, request: AddRequest) -> None:
        """See ``BookieClient.add_entries``."""
        entry = bookie_pb2.Entry
        message = bookie_pb2.AddEntriesRequest(
            ledger_id=request.ledger_id,
            entries=[
                entry(entry_id=entry_id, length=length, data=data)
                for entry_id, length, data in zip(
                    request.entry_ids, request.lengths, request.datas, strict=True
                )
            ],
            last_add_confirmed=request.last_add_confirmed,
            recovery=request.recovery,
        )
        try:
            await self._connect().AddEntries(message,
                timeout=self._add_timeout_s, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise self._error(error, request.ledger_id) from None

    async def read_entries(
        self, ledger_id: int, first_entry_id: int, last_entry_id: int,
        *, fence: bool = False, max_bytes: int = 0,
    ) -> ReadResult:
        """See ``BookieClient.read_entries``."""
        message = bookie_pb2.ReadEntriesRequest(
            ledger_id=ledger_id, first_entry_id=first_entry_id, last_entry_id=last_entry_id,
            fence=fence, max_bytes=max_bytes,
        )
        try:
            reply = await self._connect().ReadEntries(
                message, timeout=self._read_timeout_s, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise self._error(error, ledger_id) from None
        entries = reply.entries
        return ReadResult(
            [entry.entry_id for entry in entries],
            [entry.length for entry in entries],
            [entry.data for entry in entries],
            reply.last_add_confirmed,
            reply.last_entry_id,
        )

    async def read_last_add_confirmed(self, ledger_id: int) -> LedgerTail:
        """See ``BookieClient.read_last_add_confirmed``."""
        message = bookie_pb2.ReadLastAddConfirmedRequest(ledger_id=ledger_id)
        try:
            reply = await self._connect().ReadLastAddConfirmed(
                message, timeout=self._read_timeout_s, metadata=self._metadata()
            )
        except grpc.aio.AioRpcError as error:
            raise self._error(error, ledger_id) from None
        return LedgerTail(reply.last_add_confirmed, reply.last_entry_id, reply.fenced)

    async def fence(self, ledger_id: int) -> LedgerTail:
        """See ``BookieClient.fence``."""
        message = bookie_pb2.FenceRequest(ledger_id=ledger_id)
        try:
            reply = await self._connect().Fence(message,
                timeout=self._add_timeout_s, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise self._error(error, ledger_id) from None
        return LedgerTail(reply.last_add_confirmed, reply.last_entry_id, True)

    async def delete_ledger(self, ledger_id: int) -> None:
        """See ``BookieClient.delete_ledger``."""
        message = bookie_pb2.DeleteLedgerRequest(ledger_id=ledger_id)
        try:
            await self._connect().DeleteLedger(message,
                timeout=self._add_timeout_s, metadata=self._metadata())
        except grpc.aio.AioRpcError as error:
            raise self._error(error, ledger_id) from None

    async def close(self) -> None:
        """Close the channel; calls in flight fail. Idempotent."""
        self._closed = True
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close(None)


def bookie_client_factory(tls: ClientTls | None = None, token_file: str = "", **timeouts: int,
                          ) -> Callable[[str], GrpcBookieClient]:
    """Makes the broker's clients of bookies by address, all with the same security.

    The one seam every way of finding bookies uses (``--bookies``, a registry):
    the TLS files and the token file are loaded once here and shared, each
    re-read when it changes. ``timeouts``: ``add_timeout_ms``, ``read_timeout_ms``.

    Raises:
        ValueError: a TLS or token file cannot be read or is not valid.
    """
    credentials = ReloadingChannelCredentials(tls) if tls is not None else None
    token = TokenFile(token_file) if token_file else None

    def connect(address: str) -> GrpcBookieClient:
        return GrpcBookieClient(address, tls=credentials, token=token, **timeouts)

    return connect
