"""How the Kafka transaction coordinator answers what it cannot finish, and the group's checks.

``retriable``: a storage failure (or the coordinator gone from this broker) as
the Kafka code clients retry; ``OffsetsNotWrittenError``: a committed
transaction's offsets that must be written again; ``group_offset_errors``:
TxnOffsetCommit's checks at the group's coordinator (``producers`` on one
broker, ``cluster`` where the group's broker is another).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, BrokerShuttingDownError, WrongHostError
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.error_codes import error_code
from ledger.errors import LedgerError

__all__ = ["OffsetsNotWrittenError", "group_offset_errors", "retriable"]


class OffsetsNotWrittenError(Exception):
    """A committed transaction's offsets could not all be written yet (kept for a retry).

    Internal to the Kafka front-end (answered as COORDINATOR_NOT_AVAILABLE, which
    clients retry), so not a ``BrokerError``: those all cross the gRPC API with
    a number of their own (``broker/status.py``).
    """

    def __init__(self, group_id: str, partitions: int) -> None:
        super().__init__(f"the offsets of {partitions} partitions of group {group_id!r} "
                         "could not be written")
        self.group_id = group_id


async def group_offset_errors(groups: GroupCoordinator, group_id: str, generation: int,
                              member_id: str, items: list[OffsetCommitItem],
                              group_instance_id: str | None = None,
                              ) -> dict[TopicPartition, ErrorCode]:
    """TxnOffsetCommit's checks at the group's coordinator: the member (KIP-447), each partition."""
    if generation >= 0 or member_id:  # KIP-447: the consumer's generation is checked
        member_error = groups.commit_error(group_id, generation, member_id, group_instance_id)
        if member_error is not ErrorCode.none:
            return {(item.topic, item.partition): member_error for item in items}
    return await groups.partition_errors(items)


def retriable(error: BrokerError | LedgerError) -> ErrorCode:
    """A storage failure as a code clients retry (Kafka answers COORDINATOR_NOT_AVAILABLE).

    The transaction coordinator gone from this broker (its container moved,
    the broker stopping) is NOT_COORDINATOR: the client looks it up again.
    """
    if isinstance(error, WrongHostError | BrokerShuttingDownError):
        return ErrorCode.not_coordinator
    code = error_code(error)
    if code in (ErrorCode.unknown_server_error, ErrorCode.kafka_storage_error,
                ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    return code
