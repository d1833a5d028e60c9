"""The SDK's general errors (``folio.errors`` is their public home and re-exports them).

Split from ``folio.errors`` by size only: these are the hierarchy's base and the
errors of topics, segments, connections and writes; ``folio.errors`` itself
defines the transaction, reader-group and deserialization errors.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

__all__ = [
    "AlreadyExistsError",
    "DataLossError",
    "DeliveryTimeoutError",
    "EventTooLargeError",
    "FolioError",
    "FolioUnavailableError",
    "InternalTopicError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "InvalidEventNumberError",
    "LedgerUnavailableError",
    "NoBrokerAvailableError",
    "NoSuchSegmentError",
    "NotFoundError",
    "OffsetOutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "SegmentSealedError",
    "TimeoutError",
    "TlsError",
    "TopicExistsError",
    "TopicNameError",
    "TopicNotFoundError",
    "UnauthenticatedError",
    "WriterClosedError",
    "WrongEndpointError",
    "WrongHostError",
]


class FolioError(Exception):
    """Base of every error the Folio SDK raises.

    Attributes:
        retriable: whether the same call may succeed later unchanged.
        context: typed context of the error (from the broker's
            ``folio-error-context``, or set by the SDK), JSON-like values.
        error_name: the error class name the broker sent (``folio-error``),
            which may be a server class without an SDK twin; None when the
            error did not come from a broker status.
        error_code: the error's stable number the broker sent
            (``folio-error-code``, an ``ErrorCode`` of
            ``proto/folio/v1/errors.proto``); None when it sent none (an older
            broker, a proxy) or the error did not come from a broker.
    """

    retriable = False

    def __init__(self, message: str = "", *, error_name: str | None = None,
                 context: Mapping[str, object] | None = None, error_code: int | None = None,
                 **fields: object) -> None:
        super().__init__(message)
        self.context: dict[str, object] = {**(context or {}), **fields}
        self.error_name = error_name
        self.error_code = error_code

    @property
    def message(self) -> str:
        """The human-readable message."""
        return str(self.args[0]) if self.args else ""

    def _int(self, key: str) -> int | None:
        value = self.context.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _str(self, key: str) -> str | None:
        value = self.context.get(key)
        return value if isinstance(value, str) else None


class InvalidBlockError(FolioError):
    """Bytes that are not a valid event block, or events that cannot make one.

    Raised when decoding garbage or truncated bytes, a block of a format
    version this SDK does not know, or a block whose columns disagree in
    length; and when encoding columns of different lengths or values the
    format cannot hold. See ``proto/folio/v1/events.proto``. Never retriable:
    the same bytes are as invalid the next time.

    A reader raises it for a block it read whose bytes are invalid or whose
    payload count is not the ``event_count`` the broker stored beside it
    (the offsets of its events would be wrong); ``segment`` and ``offset``
    then say where the block is. The broker refuses such blocks on Append
    (INVALID_ARGUMENT, also this class), so only data written before that
    check, or damaged, can hold one.
    """

    @property
    def segment(self) -> str | None:
        """The segment holding the block, when a reader found it."""
        return self._str("segment")

    @property
    def offset(self) -> int | None:
        """The offset of the block's first event, when a reader found it."""
        return self._int("offset")


class InvalidArgumentError(FolioError):
    """A request that can never succeed as sent (INVALID_ARGUMENT)."""


class TopicNameError(InvalidArgumentError):
    """A topic name that breaks the naming rules of ``proto/folio/v1/admin.proto``."""


class InvalidEventNumberError(InvalidArgumentError):
    """An append whose event numbering can never be right (an SDK bug, not a retry case)."""

    @property
    def expected_above(self) -> int | None:
        """The writer's last event number the segment recorded, when known."""
        return self._int("expected_above")


class NotFoundError(FolioError):
    """Something named in the request does not exist (NOT_FOUND)."""


class TopicNotFoundError(NotFoundError):
    """No topic of that name."""

    @property
    def topic(self) -> str | None:
        """The topic's name, when known."""
        return self._str("topic")


class NoSuchSegmentError(NotFoundError):
    """No segment of that name, or its topic is gone."""

    @property
    def segment(self) -> str | None:
        """The segment's name, when known."""
        return self._str("segment")


class PermissionDeniedError(FolioError):
    """The broker refuses the call to this caller whatever it retries (PERMISSION_DENIED)."""


class UnauthenticatedError(FolioError):
    """The broker does not know who the caller is (UNAUTHENTICATED).

    No token was sent, or it is malformed, forged (signed with another key) or
    expired: give the client ``token=`` or ``token_file=`` (the CLI
    ``--token``, ``--token-file`` or ``$FOLIO_TOKEN``), or a fresh token.
    """


class InternalTopicError(PermissionDeniedError):
    """A write, reconfiguration or deletion of a system topic.

    System topics are named ``__folio_...``, or keep the names earlier builds
    gave them: ``_txnlog``, ``_txncommitkeys``, ``_txnbuffer_snapshots``,
    ``_kafka_offsets``, ``_kafka_txn_state``. Other names starting with ``_``
    (``_schemas``) are user topics.

    System topics (``_txnlog``, ``_txncommitkeys``, ``_txnbuffer_snapshots``)
    hold the broker's own state: only the broker writes them. Reading them
    (``Client.list_topics(include_internal=True)``, readers) stays allowed.
    """

    @property
    def topic(self) -> str | None:
        """The system topic's name, when known."""
        return self._str("topic")

    @property
    def action(self) -> str | None:
        """The refused call (``"Produce"``, ``"DeleteTopic"``, ...), when known."""
        return self._str("action")


class AlreadyExistsError(FolioError):
    """Something the request would create exists already (ALREADY_EXISTS)."""


class TopicExistsError(AlreadyExistsError):
    """CreateTopic of a name already in use."""

    @property
    def topic(self) -> str | None:
        """The topic's name, when known."""
        return self._str("topic")


class SegmentSealedError(FolioError):
    """The segment is sealed: it takes no more appends.

    Writers follow a segment sealed by scaling to its successors by
    themselves; events fail with this error when the topic is sealed
    (``Client.seal_topic``: no successors). ``Client.scale_topic`` raises it
    for a segment sealed already.
    """

    @property
    def segment(self) -> str | None:
        """The segment's name, when known."""
        return self._str("segment")

    @property
    def end_offset(self) -> int | None:
        """The sealed segment's end offset, when known."""
        return self._int("end_offset")


class OffsetOutOfRangeError(FolioError):
    """A read or truncation outside the segment's ``[start_offset, end_offset]``.

    A reader meets it when the offset it reads from was truncated (or deleted
    by retention): ``start_offset`` is where the readable events now begin.
    """

    @property
    def segment(self) -> str | None:
        """The segment's name, when known."""
        return self._str("segment")

    @property
    def offset(self) -> int | None:
        """The offset asked for, when known."""
        return self._int("offset")

    @property
    def start_offset(self) -> int | None:
        """The segment's first readable offset, when known."""
        return self._int("start_offset")

    @property
    def end_offset(self) -> int | None:
        """The segment's end offset, when known."""
        return self._int("end_offset")


class ResourceExhaustedError(FolioError):
    """A request above a size or rate limit (RESOURCE_EXHAUSTED)."""


class EventTooLargeError(ResourceExhaustedError):
    """An event above the topic's ``max_event_bytes`` (or a block above the broker's limit)."""

    @property
    def size(self) -> int | None:
        """The event's (or block's) size in bytes, when known."""
        return self._int("size")

    @property
    def limit(self) -> int | None:
        """The limit it exceeds in bytes, when known."""
        return self._int("limit")


class DataLossError(FolioError):
    """Stored data the broker cannot give back (DATA_LOSS): damaged, or lost from every bookie.

    The broker's ``CorruptDataError`` (an entry or record it cannot decode)
    and the ledger service's ``DataLossError`` (an entry no bookie holds any
    more) read back as this. Not retriable: the same bytes stay lost.
    """


class FolioUnavailableError(FolioError, ConnectionError):
    """The broker (or the ledger service behind it) cannot be reached now (UNAVAILABLE)."""

    retriable = True


class LedgerUnavailableError(FolioUnavailableError):
    """The broker is up, but its ledger service (the bookies) cannot store or serve data now.

    The message names the bookies and what failed (unreachable, disk full ...).
    A writer retries it, as any retriable refusal, until ``delivery_timeout_ms``;
    then the events fail with ``DeliveryTimeoutError`` caused by this error.
    """


class TlsError(FolioUnavailableError):
    """The TLS handshake with the broker failed: the connection was refused before any call.

    Usually the broker's certificate does not chain to the client's CA (wrong
    ``TLS(ca=...)``), its name does not match the endpoint, the broker wants a
    client certificate the client did not present, or one side speaks plain
    text. Not retriable: the same settings fail the same way.
    """

    retriable = False


class WrongEndpointError(FolioUnavailableError):
    """Something that is not a Folio broker's gRPC API answers at the endpoint.

    An HTTP server (a metrics port), a Kafka listener (Folio's own Kafka port)
    or a service the SDK cannot name: ``context["found"]`` says which
    (``http``, ``kafka``, ``unknown``). Not retriable: the endpoint is wrong.
    """

    retriable = False

    @property
    def found(self) -> str | None:
        """What answers there: ``http``, ``kafka`` or ``unknown``."""
        return self._str("found")


class NoBrokerAvailableError(FolioUnavailableError):
    """No broker of the client's endpoint list answered (bootstrap or admin failover).

    The message names every endpoint tried and the last error of each.
    """

    @property
    def endpoints(self) -> list[str]:
        """The endpoints tried, in order."""
        value = self.context.get("endpoints")
        return [str(item) for item in value] if isinstance(value, list) else []


class WrongHostError(FolioUnavailableError):
    """The broker does not own the segment (any more); another one does."""

    @property
    def segment(self) -> str | None:
        """The segment's name, when known."""
        return self._str("segment")

    @property
    def owner(self) -> str | None:
        """The owner's ``host:port`` when the broker knows it."""
        return self._str("owner") or None


class TimeoutError(FolioError, builtins.TimeoutError):
    """A call or wait that did not finish in time (client-side or DEADLINE_EXCEEDED).

    Also a ``builtins.TimeoutError``, so ``except TimeoutError`` catches it
    whichever of the two names is in scope.
    """

    retriable = True


class DeliveryTimeoutError(TimeoutError):
    """The writer gave up on a block after ``delivery_timeout_ms``: its outcome is unknown.

    Within its delivery timeout a writer retries whatever is retriable (a lost
    connection, a silent broker, WrongHost and segment moves,
    ``LedgerUnavailableError``, any UNAVAILABLE); a write fails only when the
    broker refused it for good (then with that error: not written) or when
    the timeout passed, with this error. The events may or may not have been
    written then: the broker may have stored the block and lost only the
    acknowledgement, so sending them again (under another writer id) may
    store them twice. Hence not ``retriable``: read back (the segment's end,
    ``segment``) and reconcile before resending.

    The last retriable error the writer met is ``__cause__`` (and its class
    name ``last_error``).
    """

    retriable = False

    @property
    def segment(self) -> str | None:
        """The segment the events were written to."""
        return self._str("segment")

    @property
    def last_error(self) -> str | None:
        """The class name of the last error the writer retried, if any."""
        return self._str("last_error")


class WriterClosedError(FolioError):
    """The writer (or the client that made it) is closed."""


class ForkedProcessError(FolioError):
    """This process was forked while its parent's gRPC asyncio stack was in use.

    gRPC's asyncio stack keeps process-wide state (a poller thread, a
    completion queue) while any of its channels lives; a child forked then
    inherits that state without its threads, and its first call would crash
    the process (SIGSEGV). A client is refused instead. Close every client
    (and every other ``grpc.aio`` channel) before forking, start children
    with ``multiprocessing``'s "spawn" or "forkserver" method, or make the
    clients only in the children (docs/sdk.md, "Forking").
    """
