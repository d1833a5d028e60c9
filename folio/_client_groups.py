"""The blocking face's reader groups, batch reads and Kafka group calls: a part of ``folio.Client``.

``GroupCalls`` makes what ``folio.read.groups``, ``folio.read.batch`` and
``folio.read.kafka_groups`` need of the client (its blocking admin call, its
IO thread, its pooled channels, the admin broker's stub of the moment) and
hands it to them; ``folio.Client`` shows its methods as its own
(``folio._face.forward``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from folio.api.v1 import groups_pb2

if TYPE_CHECKING:
    from folio.client import Client
    from folio.read._group_calls import _GroupClient
    from folio.read.batch import BatchClient
    from folio.read.groups import GroupStart, ReaderGroup
    from folio.read.kafka_groups import GroupKind, GroupListing, KafkaGroup

__all__ = ["GroupCalls"]


class GroupCalls:
    """Reader groups, batch reads and Kafka groups of one blocking client."""

    def __init__(self, client: Client) -> None:
        """Args:
        client: the client whose calls, IO thread and channels they use.
        """
        self._client = client

    def list_groups(self, kind: GroupKind | None = None) -> list[GroupListing]:
        """Every group, reader and Kafka consumer groups, by name then kind (or one ``kind``).

        In a cluster every live broker is asked for the Kafka groups it
        coordinates (``folio.read.kafka_groups``); ``NoBrokerAvailableError``
        if one does not answer.
        """
        from folio.read.kafka_groups import list_groups  # noqa: PLC0415

        return list_groups(self._client, kind)

    def kafka_group(self, name: str) -> KafkaGroup:
        """A Kafka consumer group (no call made): ``describe``, ``reset``, ``delete``.

        Reset and delete are refused while it has members, as Kafka does.
        """
        from folio.read.kafka_groups import KafkaGroup  # noqa: PLC0415

        return KafkaGroup(self._client, name)

    def reader_group(self, name: str, topics: list[str] | None = None,
                     start: GroupStart = "earliest", *,
                     sync_interval_ms: int = 200,
                     session_timeout_ms: int | None = None) -> ReaderGroup:
        """A reader group: created at ``start`` if it does not exist, else opened.

        Args:
            name: the group's name (the topic name rules).
            topics: the topics it reads; None opens an existing group. An
                existing group must read the same topics.
            start: ``"earliest"`` (every topic's first segments from their
                first retained event), ``"latest"`` (only events written
                from now on), a ``StreamCut`` or a mapping of segment to
                offset (topics it leaves out start at their earliest), or a
                ``Checkpoint`` (exactly after it). Ignored when the group exists.
            sync_interval_ms: how often its readers sync with the group
                state (pick up free segments and checkpoints).
            session_timeout_ms: a member the broker has not heard from for
                this long (its process died, say) is declared offline and its
                segments go to the others (members heartbeat every third of
                it). None: the broker's default, 10000, for a new group; an
                existing group must have the same. 1000 to 1800000.

        Raises:
            ReaderGroupNotFoundError: ``topics`` is None and there is no such group.
            TopicNotFoundError: a topic does not exist.
            InvalidArgumentError: a bad name, start or topic list.
        """
        from folio.read.groups import ReaderGroup  # noqa: PLC0415

        return ReaderGroup.open(name, self._groups(), topics, start, sync_interval_ms,
                                session_timeout_ms)

    def delete_reader_group(self, name: str) -> None:
        """Deletes a reader group. ``ReaderGroupNotFoundError``."""
        self._groups().delete(name)

    def list_reader_groups(self) -> list[str]:
        """Every reader group's name, sorted."""
        reply = self._client._call(self._groups().stub.ListReaderGroups,
                           groups_pb2.ListReaderGroupsRequest(), retry=True)
        return list(reply.names)

    def batch_client(self) -> BatchClient:
        """Lists segments (sealed too) between cuts and reads any of them; ``folio.read.batch``."""
        from folio.read.batch import BatchClient  # noqa: PLC0415

        client = self._client
        return BatchClient(client, io=client._io, channels=client._flow_pool())

    def _groups(self) -> _GroupClient:
        client = self._client

        def heartbeat(request: groups_pb2.HeartbeatRequest,
                      timeout_s: float) -> Awaitable[groups_pb2.HeartbeatResponse]:
            return client._brokers.unary(client._connection.groups.Heartbeat, request,
                                         timeout_s=timeout_s, retry=True)

        from folio.read._group_calls import _GroupClient  # noqa: PLC0415

        def unary(method: Any, request: Any, *, retry: bool = False) -> Awaitable[Any]:
            # AdminCore._call, looked up at each call (bounded as a blocking call's wait).
            return client._admin._call(method, request, retry=retry)

        return _GroupClient(client, client._call, unary, client._io,
                            client._flow_pool(), lambda: client._connection.groups, heartbeat)
