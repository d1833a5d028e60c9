"""The data source's options, parsed once and checked with messages that name the option.

Spark hands options over as strings with lower-cased keys (``startingPositions``
arrives as ``startingpositions``); every accessor here takes that form.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from folio.config import DEFAULT_ENDPOINT, ENDPOINT_ENV, ClientConfig
from folio.errors import InvalidArgumentError
from folio.read.reader import Isolation
from folio.spark._values import ERROR_POLICIES, VALUE_FORMATS, ErrorPolicy, ValueFormat

__all__ = ["DEFAULT_MAX_EVENTS_PER_PARTITION", "Positions", "ReadOptions", "WriteOptions",
           "value_format"]

#: Events per input partition at most: a longer segment range is split.
DEFAULT_MAX_EVENTS_PER_PARTITION: Final = 500_000
#: The broker aborts a task's transaction still open this long after it began.
DEFAULT_TXN_TIMEOUT_MS: Final = 15 * 60 * 1000
#: A task sends its buffered events (uncommitted) after this many.
DEFAULT_FLUSH_EVENTS: Final = 20_000

#: "earliest", "latest", or segment name -> offset.
Positions = Literal["earliest", "latest"] | dict[str, int]


def _endpoint(options: Mapping[str, str]) -> str:
    return options.get("endpoint") or os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINT


#: Security options (Spark lower-cases the keys) -> ClientConfig fields.
_SECURITY_OPTIONS: Final = {"tlsca": "tls_ca", "tlscert": "tls_cert", "tlskey": "tls_key",
                            "tlsservername": "tls_server_name", "token": "token",
                            "tokenfile": "token_file"}


def _client(options: Mapping[str, str]) -> ClientConfig:
    """The client settings: the endpoint and the security options (``tlsCa``, ``tlsCert``,
    ``tlsKey``, ``tlsServerName``, ``token``, ``tokenFile``; docs/security.md)."""
    given: dict[str, Any] = {field: options.get(key, "")
                             for key, field in _SECURITY_OPTIONS.items()}
    return dataclasses.replace(ClientConfig(endpoint=_endpoint(options)), **given)


def _choice(options: Mapping[str, str], key: str, name: str, allowed: tuple[str, ...]) -> Any:
    text = options.get(key) or allowed[0]
    if text not in allowed:
        raise InvalidArgumentError(f"option {name!r} must be {', '.join(map(repr, allowed))}, "
                                   f"not {text!r}")
    return text


def value_format(options: Mapping[str, str]) -> ValueFormat:
    """Option ``valueFormat`` (``binary`` by default); ``InvalidArgumentError`` naming it."""
    chosen: ValueFormat = _choice(options, "valueformat", "valueFormat", VALUE_FORMATS)
    return chosen


def _topic(options: Mapping[str, str]) -> str:
    topic = options.get("topic", "")
    if not topic:
        raise InvalidArgumentError("option 'topic' is required")
    return topic


def _positive(options: Mapping[str, str], key: str, name: str, default: int | None) -> int | None:
    text = options.get(key)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be an integer, not {text!r}") from None
    if value <= 0:
        raise InvalidArgumentError(f"option {name!r} must be > 0, not {value}")
    return value


def _positions(options: Mapping[str, str], key: str, name: str, default: str,
               allowed: tuple[str, ...], topic: str) -> Positions:
    text = options.get(key, default).strip()
    if text in allowed:
        return text  # type: ignore[return-value]  # one of the literals
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and type(v) is int for k, v in value.items()):
        raise InvalidArgumentError(
            f"option {name!r} must be {' or '.join(map(repr, allowed))} or a JSON object of "
            f"segment name to offset, not {text!r}")
    for segment, offset in value.items():
        if not segment.startswith(f"{topic}/"):
            raise InvalidArgumentError(
                f"option {name!r} names segment {segment!r}, not a segment of topic {topic!r}")
        if offset < 0:
            raise InvalidArgumentError(f"option {name!r}: offset {offset} of {segment!r} "
                                       f"is negative")
    return dict(value)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What ``spark.read`` / ``spark.readStream`` take.

    Attributes:
        endpoint: the broker, ``host:port`` (option ``endpoint``; else
            ``$FOLIO_ENDPOINT``, else ``localhost:7070``).
        topic: the topic (option ``topic``, required).
        starting: where reading starts (``startingPositions``: ``earliest``
            (default), ``latest`` or ``{"topic/0": 42, ...}``; segments it
            leaves out start at their earliest).
        ending: where a batch read ends (``endingPositions``: ``latest``
            (default) or a JSON object; segments it leaves out end at their latest).
        isolation: ``read_committed`` (default) or ``read_uncommitted``.
        max_events_per_partition: a longer segment range is split into
            several input partitions (``maxEventsPerPartition``).
        max_events_per_trigger: a micro-batch reads at most this many events
            (``maxEventsPerTrigger``; None: all there are).
        client: the client settings: the endpoint, TLS and token (options
            ``tlsCa``, ``tlsCert``, ``tlsKey``, ``tlsServerName``, ``token``,
            ``tokenFile``; the files must be readable where the tasks run).
        value_format: ``binary`` (default: no decoding), ``string`` or
            ``json``: a ``value`` column (``valueFormat``).
        on_deserialization_error: a payload that does not decode: ``fail``
            the task (default), ``skip`` its row or keep it ``raw``
            (``onDeserializationError``; ``folio.spark._values``).
    """

    endpoint: str
    topic: str
    starting: Positions
    ending: Positions
    isolation: Isolation
    max_events_per_partition: int
    max_events_per_trigger: int | None
    client: ClientConfig
    value_format: ValueFormat = "binary"
    on_deserialization_error: ErrorPolicy = "fail"

    @staticmethod
    def parse(options: Mapping[str, str]) -> ReadOptions:
        """The options; ``InvalidArgumentError`` naming the first bad one."""
        topic = _topic(options)
        isolation = options.get("isolation", "read_committed")
        if isolation not in ("read_committed", "read_uncommitted"):
            raise InvalidArgumentError(
                f"option 'isolation' must be 'read_committed' or 'read_uncommitted', "
                f"not {isolation!r}")
        return ReadOptions(
            endpoint=_endpoint(options), topic=topic,
            starting=_positions(options, "startingpositions", "startingPositions", "earliest",
                                ("earliest", "latest"), topic),
            ending=_positions(options, "endingpositions", "endingPositions", "latest",
                              ("latest",), topic),
            isolation=isolation,  # type: ignore[arg-type]  # checked above
            max_events_per_partition=_positive(
                options, "maxeventsperpartition", "maxEventsPerPartition",
                DEFAULT_MAX_EVENTS_PER_PARTITION) or DEFAULT_MAX_EVENTS_PER_PARTITION,
            max_events_per_trigger=_positive(options, "maxeventspertrigger",
                                             "maxEventsPerTrigger", None),
            client=_client(options),
            value_format=value_format(options),
            on_deserialization_error=_choice(options, "ondeserializationerror",
                                             "onDeserializationError", ERROR_POLICIES),
        )


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What ``df.write`` / ``df.writeStream`` take.

    Attributes:
        endpoint: the broker (as for reads).
        topic: the topic written to (option ``topic``, required).
        txn_timeout_ms: the broker aborts a task's transaction still open
            this long after it began (``txnTimeoutMs``, default 15 minutes):
            a job must commit within it.
        flush_events: a task sends its events (uncommitted) every this many
            (``flushEvents``), so its memory stays bounded.
        commit_key: streaming only: the name under which the broker records
            each committed micro-batch (``commitKey``; by default the query's
            id, read from ``checkpointLocation``).
        checkpoint_location: the streaming query's checkpoint directory, as
            given in the options, if it was.
        client: the client settings, as for reads.
    """

    endpoint: str
    topic: str
    txn_timeout_ms: int
    flush_events: int
    commit_key: str
    checkpoint_location: str
    client: ClientConfig

    @staticmethod
    def parse(options: Mapping[str, str]) -> WriteOptions:
        """The options; ``InvalidArgumentError`` naming the first bad one."""
        return WriteOptions(
            endpoint=_endpoint(options), topic=_topic(options),
            txn_timeout_ms=_positive(options, "txntimeoutms", "txnTimeoutMs",
                                     DEFAULT_TXN_TIMEOUT_MS) or DEFAULT_TXN_TIMEOUT_MS,
            flush_events=_positive(options, "flushevents", "flushEvents",
                                   DEFAULT_FLUSH_EVENTS) or DEFAULT_FLUSH_EVENTS,
            commit_key=options.get("commitkey", ""),
            checkpoint_location=options.get("checkpointlocation", ""),
            client=_client(options),
        )
