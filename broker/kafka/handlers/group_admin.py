"""DescribeGroups (15) v0-v5, ListGroups (16) v0-v5, DeleteGroups (42) v0-v2.

An unknown group is described as Dead with no error, as Kafka does (a
consumer-protocol group too: ConsumerGroupDescribe describes those). Members'
metadata and assignments are shown once the group is Stable. ListGroups
lists every kind; v4 filters by state, v5 by group type (``classic``,
``consumer`` for KIP-848 groups, ``broker.kafka.consumer_groups.modern``, or
``share`` for KIP-932 share groups, ``broker.kafka.share_groups``, which
DescribeGroups shows with protocol type ``share`` and no members).
Client hosts are not known to the handlers and are answered empty.
DeleteGroups removes an Empty group and its committed offsets
(NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND if unknown); a
share group with its share partitions' states and configs.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import GROUP_ADMIN, GROUP_LOOKUP, allowed
from broker.kafka.consumer_groups.states import ConsumerGroupState, by_name
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import GROUP_KEY
from broker.kafka.messages import build, nested, response_class
from ledger.errors import LedgerError

__all__ = ["DELETE_GROUPS_KEY", "DESCRIBE_GROUPS_KEY", "LIST_GROUPS_KEY", "ROWS"]

DESCRIBE_GROUPS_KEY = 15
LIST_GROUPS_KEY = 16
DELETE_GROUPS_KEY = 42
#: Kafka's "authorized operations not asked for".
_NO_OPERATIONS = -(2**31)


async def handle_describe_groups(context: KafkaContext, call: Call) -> Any:
    """Each group asked: state, protocol, members."""
    cls = response_class(DESCRIBE_GROUPS_KEY, call.version)
    group_cls = nested(cls, "DescribedGroup")
    member_cls = nested(cls, "DescribedGroupMember")
    described = []
    for group_id in call.request.groups:
        code, coordinators = checked_coordinators(context, call, GROUP_LOOKUP, GROUP_KEY,
                                                  group_id)
        if coordinators is None:
            described.append(build(group_cls, error_code=code, group_id=group_id,
                                   group_state="", protocol_type="", protocol_data="",
                                   members=(), authorized_operations=_NO_OPERATIONS))
            continue
        shared = None if coordinators.shares is None else coordinators.shares.groups.group(
            group_id)
        if shared is not None:  # a share group: ShareGroupDescribe tells its members
            described.append(build(group_cls, error_code=ErrorCode.none, group_id=group_id,
                                   group_state=shared.state, protocol_type="share",
                                   protocol_data="", members=(),
                                   authorized_operations=_NO_OPERATIONS))
            continue
        code, summary = coordinators.groups.describe(group_id)
        members = tuple(build(member_cls, member_id=member_id, group_instance_id=instance_id,
                              client_id=client_id, client_host=client_host,
                              member_metadata=metadata, member_assignment=assignment)
                        for member_id, instance_id, client_id, client_host, metadata, assignment
                        in summary.members)
        described.append(build(group_cls, error_code=code, group_id=group_id,
                               group_state=summary.state.value,
                               protocol_type=summary.protocol_type,
                               protocol_data=summary.protocol_name, members=members,
                               authorized_operations=_NO_OPERATIONS))
    return build(cls, throttle_time=ZERO, groups=tuple(described))


async def handle_list_groups(context: KafkaContext, call: Call) -> Any:
    """Every group this broker coordinates (filtered by state and type if asked)."""
    cls = response_class(LIST_GROUPS_KEY, call.version)
    listed_cls = nested(cls, "ListedGroup")
    coordinators = context.coordinators
    if coordinators is None:
        return build(cls, throttle_time=ZERO, error_code=ErrorCode.coordinator_not_available,
                     groups=())
    states: set[ConsumerGroupState] | None = None
    asked_states = getattr(call.request, "states_filter", ())
    if asked_states:
        states = {state for state in map(by_name, asked_states) if state is not None}
    asked_types = {name.lower() for name in getattr(call.request, "types_filter", ())}
    listed = []
    if not asked_types or "classic" in asked_types:
        modern = coordinators.consumers
        listed += [(summary.group_id, summary.protocol_type, summary.state.value, "classic")
                   for summary in coordinators.groups.list_groups(states, None)
                   # (an Empty classic entry a commit made for a KIP-848 group's offsets)
                   if modern is None or modern.group(summary.group_id) is None]
    if coordinators.consumers is not None and (not asked_types or "consumer" in asked_types):
        wanted = {name.lower() for name in asked_states}
        listed += [(group.group_id, "consumer", group.state.value, "consumer")
                   for group in coordinators.consumers.groups()
                   if not wanted or group.state.value.lower() in wanted]
    if coordinators.shares is not None and (not asked_types or "share" in asked_types):
        wanted = {name.lower() for name in asked_states}
        listed += [(group.group_id, "share", group.state, "share")
                   for group in coordinators.shares.groups.groups().values()
                   if not wanted or group.state.lower() in wanted]
    groups = tuple(build(listed_cls, group_id=group_id, protocol_type=protocol_type,
                         group_state=state, group_type=group_type)
                   for group_id, protocol_type, state, group_type in sorted(listed)
                   # Only the groups the role may see, as Kafka lists them.
                   if allowed(context, call, GROUP_LOOKUP, group_id))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, groups=groups)


async def handle_delete_groups(context: KafkaContext, call: Call) -> Any:
    """Delete each empty group asked, with its committed offsets."""
    cls = response_class(DELETE_GROUPS_KEY, call.version)
    result_cls = nested(cls, "DeletableGroupResult")
    results = []
    for group_id in call.request.groups_names:
        code, coordinators = checked_coordinators(context, call, GROUP_ADMIN, GROUP_KEY,
                                                  group_id)
        if coordinators is not None and coordinators.consumers is not None \
                and coordinators.consumers.group(group_id) is not None:
            code = await coordinators.consumers.delete_group(group_id)
        elif coordinators is not None and coordinators.shares is not None \
                and coordinators.groups.group(group_id) is None:
            # (not a classic group: whether a share group is asked of every broker
            # in a cluster, where its share partitions' states are)
            try:
                states = coordinators.share_states
                if await coordinators.shares.is_share_group(group_id, states):
                    code = await coordinators.shares.delete_group(group_id, states)
                else:
                    code = await coordinators.groups.delete_group(group_id)
            except (BrokerError, LedgerError) as error:
                code = error_code(error) if isinstance(error, BrokerError) \
                    else ErrorCode.coordinator_not_available
        elif coordinators is not None:
            code = await coordinators.groups.delete_group(group_id)
        results.append(build(result_cls, group_id=group_id, error_code=code))
    return build(cls, throttle_time=ZERO, results=tuple(results))


ROWS = (
    Api(DESCRIBE_GROUPS_KEY, "DescribeGroups", 0, 5, handle_describe_groups),
    Api(LIST_GROUPS_KEY, "ListGroups", 0, 5, handle_list_groups),
    Api(DELETE_GROUPS_KEY, "DeleteGroups", 0, 2, handle_delete_groups),
)
