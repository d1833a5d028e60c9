"""The share groups of a broker, composed: membership, sessions, share partitions, configs.

``ShareCoordinator`` builds the parts and wires them: a member leaving
(``membership``) drops its share session (``sessions``) and releases the
records it holds (``partitions``); the group configs (``config``) are kept
by ``group_configs`` (the share state topic on one broker, the metadata
store in a cluster) and written there by IncrementalAlterConfigs before they
take effect.

**In a cluster** (docs/kafka.md, "Share groups"), as in Kafka, a group's
members are the group coordinator's (the broker serving the group's
container, as for consumer groups: ``broker.app.kafka_cluster``) and a share
partition is its partition leader's (the owner of the partition's segment):
one ``ShareCoordinator`` per broker plays both parts, each for what is
served here. Members are not kept over a coordinator change (as in Kafka):
the new coordinator knows none, a member's next heartbeat gets
UNKNOWN_MEMBER_ID and it joins again (``drop_container`` forgets the groups
of a container given up). A leader does not learn of members from the
coordinator (``checks_members`` is off: ShareFetch takes any member id, as
Kafka's share-partition leader does); a member gone elsewhere loses its
records when their locks expire. Share partitions are dropped from memory
when their container goes, and their state read again from the container's
share state segment by the next owner (``store``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.api import Topics
from broker.errors import TopicNotFoundError
from broker.kafka.consumer_groups.modern_requests import topic_partitions
from broker.kafka.share_groups.config import ShareConfig
from broker.kafka.share_groups.group_configs import GroupConfigs, StoredGroupConfigs
from broker.kafka.share_groups.membership import ShareGroups
from broker.kafka.share_groups.partitions import SharePartitions
from broker.kafka.share_groups.sessions import ShareSessions
from broker.kafka.share_groups.store import ShareStore

if TYPE_CHECKING:
    from broker.kafka.share_groups.admin import ShareStates

__all__ = ["ShareCoordinator"]

log = logging.getLogger(__name__)


class ShareCoordinator:
    """Every share group of this broker and their share partitions.

    Args:
        topics: the broker's topics.
        store: the durable share state.
        in_use_elsewhere: whether a group id is a classic or consumer group's.
        config: the broker's share settings (None: Kafka's defaults).
        group_configs: where the groups' configs live (None: in ``store``, one broker).
        group_container: a cluster broker's container of a group (None: one broker,
            which checks at ShareFetch that the member is one of the group's).
    """

    def __init__(self, topics: Topics, store: ShareStore,
                 in_use_elsewhere: Callable[[str], bool],
                 config: ShareConfig | None = None,
                 group_configs: GroupConfigs | None = None,
                 group_container: Callable[[str], int] | None = None) -> None:
        self.config = config or ShareConfig()
        self.store = store
        self._configs = group_configs or StoredGroupConfigs(store)
        self._group_container = group_container
        #: Whether ShareFetch and ShareAcknowledge need the member known here.
        self.checks_members = group_container is None
        self._leaving: dict[tuple[str, str], asyncio.TimerHandle] = {}
        count = topic_partitions(topics)

        async def partitions(topic: str) -> int:
            try:
                return await count(topic)
            except TopicNotFoundError:
                return 0

        self.partitions = SharePartitions(store, self.config_of)
        self.sessions = ShareSessions()
        self.groups = ShareGroups(partitions, self.config, self.config_of, self._member_gone,
                                  in_use_elsewhere)

    def config_of(self, group_id: str) -> ShareConfig:
        """The group's settings: the broker's, with the group's configs over them."""
        overrides = self._configs.of(group_id)
        if not overrides:
            return self.config
        try:
            return self.config.with_group(dict(overrides))
        except (KeyError, ValueError) as error:  # written by hand past the checks
            log.warning("share group %s: its configs do not parse, the broker's apply: %s",
                        group_id, error)
            return self.config

    def group_configs(self, group_id: str) -> dict[str, str]:
        """The configs set on the group."""
        return dict(self._configs.of(group_id))

    async def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace the group's configs: written first (raises what the store raises; the
        outcome then unknown: the next load or write decides), then in force."""
        await self._configs.write(group_id, configs)

    async def load_group(self, group_id: str) -> None:
        """Load the group's configs if not yet here (raises what the store raises)."""
        await self._configs.load(group_id)

    def load_container(self, container: int) -> None:
        """This cluster broker claimed ``container``: its share states are read afresh."""
        self.store.forget((container,))

    def drop_container(self, container: int) -> None:
        """This cluster broker gave ``container`` up: the groups it coordinated there and
        the share partitions it led there are forgotten (the next owner has them)."""
        self.store.forget((container,))
        self.partitions.forget_where(lambda topic, number: self.store.container_of(
            topic, number) == container)
        if self._group_container is not None:
            of = self._group_container
            self.groups.forget_where(lambda group_id: of(group_id) == container)

    async def is_share_group(self, group_id: str, states: ShareStates | None = None) -> bool:
        """Whether the group is a share group here: known now, with configs set, or with
        share state written (``states``: on every broker; None: here). Raises what
        ``states`` raises."""
        if self.groups.group(group_id) is not None or self._configs.of(group_id):
            return True
        if states is not None:
            return bool(await states.listed(group_id))
        return bool(await self.store.share_partitions(group_id))

    async def delete_group(self, group_id: str, states: ShareStates | None = None,
                           ) -> ErrorCode:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members, else its
        share partitions' states (``states``: on every broker, each at its partition's
        leader; None: here) and then its configs go.

        Each deletion is a tombstone (or a write of the configs' node); the process
        may die between them, leaving part of the group: deleting it again finishes
        (every step is idempotent, and the configs go last, so the group is still
        found). Raises what the store or ``states`` raise (outcome unknown: delete
        again).
        """
        code = self.groups.delete(group_id)
        if code is not ErrorCode.none:
            return code
        if states is not None:
            for topic, number in await states.listed(group_id):
                await states.forget(group_id, topic, number)
        else:
            self.partitions.forget_group(group_id)
            for topic, number in await self.store.share_partitions(group_id):
                await self.store.delete_records(group_id, topic, number)
        await self._configs.write(group_id, {})
        return ErrorCode.none

    async def remove_topic(self, topic: str) -> None:
        """A topic was deleted: every group's share partitions of it go (a topic made
        again under the name starts afresh, by ``share.auto.offset.reset``).

        Raises what the store raises; the deletion hook's caller logs it, and a
        share partition left behind is past the new topic's offsets: the next fetch
        moves its start to the log's (``records.move_start``) or, past the end,
        reads nothing until the new topic reaches it. Deleting the topic again
        (or DeleteShareGroupOffsets) clears it.
        """
        for group_id, number in await self.store.topic_partitions(topic):
            await self.partitions.reset(group_id, topic, number, None)

    def close(self) -> None:
        """Cancel the members' session timers (the listener stops)."""
        self.groups.close()
        for timer in self._leaving.values():
            timer.cancel()

    def _member_gone(self, group_id: str, member_id: str, left: bool) -> None:
        """A member whose session ended: its records are released now. One that left
        (epoch -1) keeps its share session for its last acknowledgements: librdkafka
        leaves the group first, then acknowledges and closes the session (epoch -1,
        which releases the rest); if that never comes, all goes after one lock duration
        (what the records' locks would give anyway)."""
        if not left:
            self._release(group_id, member_id)
            return
        delay_s = self.config_of(group_id).record_lock_duration_ms / 1000
        self._leaving[group_id, member_id] = asyncio.get_running_loop().call_later(
            delay_s, self._release, group_id, member_id)

    def _release(self, group_id: str, member_id: str) -> None:
        timer = self._leaving.pop((group_id, member_id), None)
        if timer is not None:
            timer.cancel()
        if self.groups.is_member(group_id, member_id):
            return  # joined again meanwhile (same member id): its session is its own
        self.sessions.drop_member(group_id, member_id)
        self.partitions.member_gone(group_id, member_id)

