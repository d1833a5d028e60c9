"""The SDK's errors: one small hierarchy, each class says whether a retry can help.

Callers catch :class:`FolioError` for anything the SDK raises on purpose; a
retry loop reads ``retriable`` instead of matching classes. Errors the broker
sends carry the typed context it attached (``folio-error-context``) in
``context``; the classes below expose the fields they are about as typed
attributes (``OffsetOutOfRangeError.start_offset``, ``EventTooLargeError.limit``).
``folio._status`` turns a gRPC status back into one of these.
"""

from __future__ import annotations

from folio._errors_core import (
    AlreadyExistsError,
    DataLossError,
    DeliveryTimeoutError,
    EventTooLargeError,
    FolioError,
    FolioUnavailableError,
    ForkedProcessError,
    InternalTopicError,
    InvalidArgumentError,
    InvalidBlockError,
    InvalidEventNumberError,
    LedgerUnavailableError,
    NoBrokerAvailableError,
    NoSuchSegmentError,
    NotFoundError,
    OffsetOutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    SegmentSealedError,
    TimeoutError,
    TlsError,
    TopicExistsError,
    TopicNameError,
    TopicNotFoundError,
    UnauthenticatedError,
    WriterClosedError,
    WrongEndpointError,
    WrongHostError,
)

__all__ = [
    "AlreadyExistsError",
    "DataLossError",
    "DeliveryTimeoutError",
    "DeserializationError",
    "EventTooLargeError",
    "FolioError",
    "FolioUnavailableError",
    "ForkedProcessError",
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
    "OutcomeUnknownError",
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


class OutcomeUnknownError(FolioUnavailableError, TimeoutError):
    """A call that changes state whose outcome stayed unknown until its deadline.

    Its request may have been applied: every attempt lost its answer (a cut
    connection, ``DEADLINE_EXCEEDED``, the client's own wait, a WrongHost not
    followed in time) and so did every read-back. Read the state once the
    broker is back (``get_topic``, ``transaction_status``, ``describe``...)
    before doing anything that is only safe if it failed. ``operation`` names
    the call; ``__cause__`` is the last attempt's error. A
    ``FolioUnavailableError`` and a ``TimeoutError`` both, as it used to be one
    or the other.
    """

    retriable = True

    @property
    def operation(self) -> str | None:
        """The call whose outcome is unknown, e.g. ``"DeleteTopic orders"``."""
        return self._str("operation")


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
