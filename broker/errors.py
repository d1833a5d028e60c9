"""The broker's errors: one small hierarchy, each class says whether a retry can help.

``broker/status.py`` maps them (and the ledger errors that reach the broker's
callers) to gRPC status codes, as data. Each carries typed context that travels
to clients in the ``folio-error-context`` trailing metadata.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every broker error.

    Attributes:
        retriable: whether the same call may succeed later unchanged.
    """

    retriable = False

    def context(self) -> dict[str, object]:
        """Typed context sent to clients beside the message (JSON-serialisable)."""
        return {}


class InvalidArgumentError(BrokerError):
    """A request that can never succeed as sent: bad values, garbage."""


class InvalidBlockError(InvalidArgumentError):
    """A client's block that breaks the event block format (events.proto).

    Not an ``EventBlock`` of format 1, columns of different lengths, or a
    payload count other than the ``event_count`` stated beside it.
    """


class TopicNameError(InvalidArgumentError):
    """A topic name that breaks the naming rules (see ``broker.segments.names``)."""


class PermissionDeniedError(BrokerError):
    """The caller may not do this (PERMISSION_DENIED): asking again changes nothing."""


class InternalTopicError(PermissionDeniedError):
    """A public call that would write, reconfigure or delete a system topic.

    System topics are named ``__folio_...``, or one of the five names earlier
    builds gave them (``broker.segments.names.is_system_topic``).

    System topics hold the broker's own state (``_txnlog``, ``_txncommitkeys``,
    ``_txnbuffer_snapshots``): only the broker writes them. Reading them stays allowed.
    """

    def __init__(self, topic: str, action: str) -> None:
        shown = topic if len(topic) <= 64 else topic[:64] + "..."
        super().__init__(
            f"topic {shown!r} is internal to the broker: {action} is refused (system topics, "
            "named '__folio_...' or _txnlog, _txncommitkeys, _txnbuffer_snapshots, "
            "_kafka_offsets, _kafka_txn_state, hold the broker's own state and only the "
            "broker writes them; they can still be read and listed with "
            "`folio topic list --internal`)")
        self.topic = shown
        self.action = action

    def context(self) -> dict[str, object]:
        return {"topic": self.topic, "action": self.action}


class TopicNotFoundError(BrokerError):
    """No topic of that name."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic

    def context(self) -> dict[str, object]:
        return {"topic": self.topic}


class TopicExistsError(BrokerError):
    """CreateTopic of a name already in use."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic

    def context(self) -> dict[str, object]:
        return {"topic": self.topic}


class NoSuchSegmentError(BrokerError):
    """No segment of that name (or its topic is gone)."""

    def __init__(self, segment: str, message: str | None = None) -> None:
        super().__init__(message or f"segment {segment!r} does not exist")
        self.segment = segment

    def context(self) -> dict[str, object]:
        return {"segment": self.segment}


class SegmentSealedError(BrokerError):
    """The segment is sealed: it takes no more appends."""

    def __init__(self, segment: str, end_offset: int) -> None:
        super().__init__(f"segment {segment!r} is sealed at offset {end_offset}")
        self.segment = segment
        self.end_offset = end_offset

    def context(self) -> dict[str, object]:
        return {"segment": self.segment, "end_offset": self.end_offset}


class OffsetOutOfRangeError(BrokerError):
    """A read or truncation outside ``[start_offset, end_offset]``."""

    def __init__(self, segment: str, offset: int, start_offset: int, end_offset: int) -> None:
        if offset < start_offset:
            why = (f"offset {offset} of segment {segment!r} is before its start offset "
                   f"{start_offset} (truncated or deleted by retention)")
        else:
            why = (f"offset {offset} of segment {segment!r} is after its end offset "
                   f"{end_offset}")
        super().__init__(why)
        self.segment = segment
        self.offset = offset
        self.start_offset = start_offset
        self.end_offset = end_offset

    def context(self) -> dict[str, object]:
        return {"segment": self.segment, "offset": self.offset,
                "start_offset": self.start_offset, "end_offset": self.end_offset}


class EventTooLargeError(BrokerError):
    """An event (or block) above the topic's (or the broker's) size limit."""

    def __init__(self, size: int, limit: int, what: str = "event") -> None:
        super().__init__(f"{what} of {size} bytes exceeds the limit of {limit} bytes "
                         "(max_event_bytes)" if what == "event" else
                         f"{what} of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit

    def context(self) -> dict[str, object]:
        return {"size": self.size, "limit": self.limit}


class InvalidEventNumberError(BrokerError):
    """An append whose event numbering can never be right (below -1, no events)."""

    def __init__(self, message: str, expected_above: int) -> None:
        super().__init__(message)
        self.expected_above = expected_above

    def context(self) -> dict[str, object]:
        return {"expected_above": self.expected_above}


class WrongHostError(BrokerError):
    """This broker does not own the segment (any more), or cannot write it now.

    ``message`` replaces the default text: a cluster broker that lost its
    metadata-store connection says so (``broker.cluster.session_gate``).
    """

    retriable = True

    def __init__(self, segment: str, owner: str = "", *, message: str = "") -> None:
        super().__init__(message or f"segment {segment!r} is not owned by this broker"
                         + (f"; its owner is {owner}" if owner else ""))
        self.segment = segment
        self.owner = owner

    def context(self) -> dict[str, object]:
        return {"segment": self.segment, "owner": self.owner}


class BrokerShuttingDownError(BrokerError):
    """The broker is stopping; try again (on another broker)."""

    retriable = True


class CorruptDataError(BrokerError):
    """Stored data the broker cannot decode: a segment entry or a metadata record.

    Not retriable: reading the same bytes again gives the same answer.
    """

    def __init__(self, message: str, what: str = "entry") -> None:
        super().__init__(message)
        self.what = what

    def context(self) -> dict[str, object]:
        return {"what": self.what}


class TransactionTooLargeError(BrokerError):
    """A transaction (blocks held for one ``end``) above the broker's per-transaction limit."""

    def __init__(self, size: int, limit: int, unit: str = "bytes") -> None:
        mib = f" ({limit / (1024 * 1024):g} MiB)" if unit == "bytes" else ""
        super().__init__(f"transaction of {size} {unit} of blocks exceeds the limit of "
                         f"{limit} {unit}{mib} per transaction; it was dropped")
        self.size = size
        self.limit = limit

    def context(self) -> dict[str, object]:
        return {"size": self.size, "limit": self.limit}


class TransactionBufferFullError(BrokerError):
    """The broker holds as many uncommitted transaction bytes as it may; try again later."""

    retriable = True

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the broker's buffer for uncommitted transactions is full ({size} "
                         f"bytes needed, limit {limit} bytes); the transaction was dropped, "
                         "send it again later")
        self.size = size
        self.limit = limit

    def context(self) -> dict[str, object]:
        return {"size": self.size, "limit": self.limit}


class TransactionExpiredError(BrokerError):
    """Blocks held for a transaction longer than the broker keeps them; they were dropped."""

    def __init__(self, held_ms: int, max_held_ms: int) -> None:
        super().__init__(f"transaction expired: its first block was held {held_ms} ms, the "
                         f"limit is {max_held_ms} ms; its blocks were dropped")
        self.held_ms = held_ms
        self.max_held_ms = max_held_ms

    def context(self) -> dict[str, object]:
        return {"held_ms": self.held_ms, "max_held_ms": self.max_held_ms}


class TxnNotFoundError(BrokerError):
    """No transaction of that id (never begun here, or forgotten)."""

    def __init__(self, txn_id: str) -> None:
        super().__init__(f"transaction {txn_id} does not exist")
        self.txn_id = txn_id

    def context(self) -> dict[str, object]:
        return {"txn_id": self.txn_id}


class TxnStateError(BrokerError):
    """A transaction is not in the state the call needs (commit after abort, write after commit).

    Attributes:
        txn_id: the transaction, 32 hex digits.
        expected: the state(s) the call needs, e.g. ``"OPEN"``.
        actual: the state it is in.
    """

    def __init__(self, txn_id: str, expected: str, actual: str) -> None:
        super().__init__(f"transaction {txn_id} is {actual}, expected {expected}")
        self.txn_id = txn_id
        self.expected = expected
        self.actual = actual

    def context(self) -> dict[str, object]:
        return {"txn_id": self.txn_id, "expected": self.expected, "actual": self.actual}


class TxnLabelClosedError(BrokerError):
    """``BeginTxn`` with a label that ``AbortTxns(close=true)`` closed (its job is over)."""

    def __init__(self, label: str) -> None:
        super().__init__(f"transaction label {label!r} is closed: its job ended, no "
                         f"transaction may begin with it")
        self.label = label

    def context(self) -> dict[str, object]:
        return {"label": self.label}


class ReaderGroupNotFoundError(BrokerError):
    """No reader group of that name (``kind`` "kafka": no Kafka consumer group of that name)."""

    def __init__(self, group: str, kind: str = "reader") -> None:
        what = "Kafka consumer group" if kind == "kafka" else "reader group"
        super().__init__(f"{what} {group!r} does not exist")
        self.group = group
        self.kind = kind

    def context(self) -> dict[str, object]:
        return {"group": self.group} if self.kind == "reader" else {
            "group": self.group, "kind": self.kind}


class ReaderGroupExistsError(BrokerError):
    """CreateReaderGroup of a name already in use."""

    def __init__(self, group: str) -> None:
        super().__init__(f"reader group {group!r} already exists")
        self.group = group

    def context(self) -> dict[str, object]:
        return {"group": self.group}


class GroupStateConflictError(BrokerError):
    """A conditional update of a reader group's state whose expected version is stale.

    The client reads the state again, recomputes its change and retries.
    """

    retriable = True

    def __init__(self, group: str, expected_version: int, version: int) -> None:
        super().__init__(f"reader group {group!r} is at version {version}, "
                         f"not {expected_version}: read it again and retry")
        self.group = group
        self.expected_version = expected_version
        self.version = version

    def context(self) -> dict[str, object]:
        return {"group": self.group, "expected_version": self.expected_version,
                "version": self.version}


class ReaderGroupNotEmptyError(BrokerError):
    """A reset or delete of a Kafka consumer group that has members (Kafka: NON_EMPTY_GROUP)."""

    def __init__(self, group: str, members: list[str], *, share: bool = False) -> None:
        listed = f"{', '.join(members[:5])}{', ...' if len(members) > 5 else ''}"
        if share:  # a share group (KIP-932): its members are share consumers
            message = (f"Kafka share group {group!r} has {len(members)} member(s) ({listed}): "
                       "close its share consumers first, as Kafka requires (one that stops "
                       "without closing leaves after share.session.timeout.ms)")
        else:
            message = (f"Kafka consumer group {group!r} has {len(members)} member(s) "
                       f"({listed}): stop its consumers first, as Kafka requires")
        super().__init__(message)
        self.group = group
        self.members = members
        self.share = share

    def context(self) -> dict[str, object]:
        found: dict[str, object] = {"group": self.group, "members": self.members}
        if self.share:
            found["kind"] = "share"
        return found


class TopicSealedError(SegmentSealedError):
    """The topic is sealed (SealTopic): it has no open segment, so nothing can route to one."""

    def __init__(self, topic: str) -> None:
        BrokerError.__init__(self, f"topic {topic!r} is sealed: it takes no more events")
        self.segment = ""
        self.end_offset = -1
        self.topic = topic

    def context(self) -> dict[str, object]:
        return {"topic": self.topic}
