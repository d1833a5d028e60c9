"""The SDK's errors: one small hierarchy, each class says whether a retry can help.

Callers catch :class:`FolioError` for anything the SDK raises on purpose; a
retry loop reads ``retriable`` instead of matching classes. Errors the broker
sends carry the typed context it attached (``folio-error-context``) in
``context``; the classes below expose the fields they are about as typed
attributes (``OffsetOutOfRangeError.start_offset``, ``EventTooLargeError.limit``).
``folio._status`` turns a gRPC status back into one of these.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping

__all__ = [
    "AlreadyExistsError",
    "DataLossError",
    "DeliveryTimeoutError",
    "DeserializationError",
    "EventTooLargeError",
    "FolioError",
    "FolioUnavailableError",
    "GroupStateConflictError",
    "InternalTopicError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "InvalidEventNumberError",
    "LedgerUnavailableError",
    "MaxTransactionSizeExceededError",
    "NoBrokerAvailableError",
    "NoSuchSegmentError",
    "NotFoundError",
    "OffsetOutOfRangeError",
    "PermissionDeniedError",
    "ReaderGroupExistsError",
    "ReaderGroupNotEmptyError",
    "ReaderGroupNotFoundError",
    "ReaderIdInUseError",
    "ReaderNotInGroupError",
    "ResourceExhaustedError",
    "SegmentSealedError",
    "TimeoutError",
    "TlsError",
    "TopicExistsError",
    "TopicNameError",
    "TopicNotFoundError",
    "TxnFailedError",
    "TxnNotFoundError",
    "TxnStateError",
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
    """A write, reconfiguration or deletion of a system topic (a name starting with ``_``).

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


class MaxTransactionSizeExceededError(ResourceExhaustedError):
    """An event that would take a single-routing-key transaction past its size limit (16 MiB).

    Raised by ``write_event``; the event was not added and the transaction
    is still usable (commit what it holds, or abort it).
    """

    @property
    def size(self) -> int | None:
        """The size the transaction would have had with the event, in bytes."""
        return self._int("size")

    @property
    def limit(self) -> int | None:
        """The limit, in bytes."""
        return self._int("limit")


class TxnFailedError(FolioError):
    """A transaction that was not, and will not be, committed: nothing of it was written.

    It timed out before ``commit`` (and was aborted), or the broker refused
    it for good (its ``__cause__`` is the broker's error: a sealed segment,
    a transaction too large for the broker, ...).
    """


class TxnStateError(FolioError):
    """A transaction call its state does not allow.

    ``begin`` while the writer's previous transaction is still open, or
    ``write_event``/``commit`` after ``commit`` or ``abort``. From the
    broker's transaction coordinator (FAILED_PRECONDITION: commit after
    abort, append after commit, ...), ``expected`` and ``actual`` name the
    state the call needed and the one the transaction is in (``"OPEN"``,
    ``"ABORTED"``, ...).
    """

    @property
    def txn_id(self) -> str | None:
        """The transaction (32 hex digits), when known."""
        return self._str("txn_id")

    @property
    def expected(self) -> str | None:
        """The state the call needed, when known."""
        return self._str("expected")

    @property
    def actual(self) -> str | None:
        """The state the transaction was in, when known."""
        return self._str("actual")


class TxnNotFoundError(NotFoundError):
    """The broker's transaction coordinator knows no transaction of that id (NOT_FOUND)."""

    @property
    def txn_id(self) -> str | None:
        """The transaction (32 hex digits), when known."""
        return self._str("txn_id")


class ReaderGroupNotFoundError(NotFoundError):
    """No reader group of that name (NOT_FOUND)."""

    @property
    def group(self) -> str | None:
        """The group's name, when known."""
        return self._str("group")


class ReaderGroupExistsError(AlreadyExistsError):
    """A reader group of that name exists already (ALREADY_EXISTS)."""

    @property
    def group(self) -> str | None:
        """The group's name, when known."""
        return self._str("group")


class GroupStateConflictError(FolioError):
    """A conditional update of a reader group's state lost to another one (FAILED_PRECONDITION).

    The SDK reads the state again and retries by itself; this reaches the
    application only if the state kept changing for the whole call.
    """

    retriable = True


class ReaderNotInGroupError(FolioError):
    """The reader is no longer a member of its group.

    It was declared offline (``ReaderGroup.reader_offline``, or by the broker
    after it was silent for the group's session timeout), or the group was
    deleted or reset meanwhile; its segments belong to others now.
    """


class ReaderIdInUseError(InvalidArgumentError):
    """Joining a reader group with the id of a current member.

    If that member died, the broker declares it offline once it has been
    silent for the group's session timeout (``silent_ms`` and
    ``session_timeout_ms`` say how long is left); the id is free then.
    """

    @property
    def silent_ms(self) -> int | None:
        """How long the broker has not heard from the member holding the id."""
        return self._int("silent_ms")

    @property
    def session_timeout_ms(self) -> int | None:
        """The group's session timeout."""
        return self._int("session_timeout_ms")


class ReaderGroupNotEmptyError(FolioError):
    """An operation that needs a group without members (a reset, say) found some.

    As Kafka refuses to reset a consumer group's offsets while consumers are
    active: stop them (or declare them offline) first. ``members`` names them.
    """

    @property
    def members(self) -> list[str]:
        """The members found."""
        value = self.context.get("members")
        return [str(m) for m in value] if isinstance(value, list) else []


class DeserializationError(FolioError):
    """A reader's serializer could not decode an event's payload; nothing was skipped.

    ``topic``, ``segment`` and ``offset`` name the event, ``payload`` holds its
    raw bytes and ``__cause__`` (also ``cause``) what the serializer raised.
    The reader stays on the event: reading again raises again, until the
    application skips it (``reader.skip(error)``) or reads it as raw bytes
    (``on_deserialization_error="raw"``). Not retriable: the bytes stay the same.
    """

    def __init__(self, message: str = "", *, topic: str = "", segment: str = "",
                 offset: int = -1, payload: bytes = b"", cause: BaseException | None = None,
                 ) -> None:  # defaults: unpickled from ``message`` and then its ``__dict__``
        super().__init__(message, topic=topic, segment=segment, offset=offset)
        self.topic, self.segment, self.offset = topic, segment, offset
        self.payload, self.cause = payload, cause
        self.__cause__ = cause
