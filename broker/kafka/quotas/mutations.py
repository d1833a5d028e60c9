"""The controller mutation quota (KIP-599): partitions created and deleted per second, per client.

Kafka's ``ControllerMutationQuotaManager`` on Folio's table: a client's
``controller_mutation_rate`` (found by Kafka's precedence, as the other
user and client-id quotas) bounds the partitions its CreateTopics (a
topic's partitions), CreatePartitions (the partitions added) and
DeleteTopics (a topic's partitions) make or remove, through a token bucket
per quota entity (``broker.kafka.quotas.rate.TokenBucket``: 10 s worth of
tokens, starting full). Each request gets a ``MutationQuota``:

- **strict** (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+,
  whose clients know THROTTLING_QUOTA_EXCEEDED): a topic is accepted while
  the bucket is not below 0, and takes its partitions' tokens (so one large
  topic may drive it below 0, as in Kafka: a request is never cut in the
  middle of a topic); once below 0, every further topic is refused with
  THROTTLING_QUOTA_EXCEEDED and the answer carries the throttle time
  (``-tokens / quota``), which the client waits before retrying those;
- **permissive** (older versions): every topic is accepted and takes its
  tokens; the answer carries the throttle time if the bucket went below 0.

Either way the connection reads nothing more from the client for the
throttle time (``broker.kafka.connection``), as Kafka mutes the channel.
Topics refused for another reason (a bad name, no permission) and
``validate_only`` take no tokens, as in Kafka. Quotas are per broker (the
broker that receives the request enforces it, as Kafka's controller does for
its cluster), in memory, started afresh on restart; a bucket full again is
dropped.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Final

from broker.kafka.quotas.rate import TokenBucket
from broker.kafka.quotas.table import CONTROLLER_MUTATION_RATE, QuotaTable
from broker.kafka.quotas.throttles import ANONYMOUS, counted

__all__ = ["THROTTLING_MESSAGE", "ControllerMutations", "MutationQuota"]

#: Kafka's ``ThrottlingQuotaExceededException`` message.
THROTTLING_MESSAGE: Final = "The throttling quota has been exceeded."
#: Requests between two sweeps of full buckets.
_SWEEP_EVERY: Final = 256


class MutationQuota:
    """One request's share of a client's controller mutation quota (see the module doc)."""

    def __init__(self, bucket: TokenBucket | None = None, quota: float = 0.0,
                 strict: bool = False, clock: Callable[[], float] | None = None) -> None:
        self._bucket = bucket
        self._quota = quota
        self._strict = strict
        self._clock = clock
        #: The throttle time the answer carries (ms; 0: none).
        self.throttle_ms = 0

    @property
    def bounded(self) -> bool:
        """Whether the client has a quota (False: ``admit`` accepts everything)."""
        return self._bucket is not None

    def admit(self, partitions: int) -> bool:
        """Whether a mutation of ``partitions`` may go ahead; its tokens taken if so.

        False (strict only): refuse the topic with THROTTLING_QUOTA_EXCEEDED.
        """
        bucket, clock = self._bucket, self._clock
        if bucket is None or clock is None:
            return True
        now = clock()
        if self._strict:
            if bucket.tokens(self._quota, now) < 0:
                self.throttle_ms = bucket.throttle_ms(self._quota, now)
                return False
            bucket.record(self._quota, partitions, now)
            return True
        bucket.record(self._quota, partitions, now)
        self.throttle_ms = bucket.throttle_ms(self._quota, now)
        return True

    def throttle_time(self) -> datetime.timedelta:
        """The answer's ``throttle_time`` (counted in the metrics when above 0)."""
        if self.throttle_ms <= 0:
            return datetime.timedelta(0)
        counted("controller_mutation", self.throttle_ms)
        return datetime.timedelta(milliseconds=self.throttle_ms)


class ControllerMutations:
    """The token buckets of one broker's clients with a controller mutation quota."""

    def __init__(self, table: Callable[[], QuotaTable], clock: Callable[[], float]) -> None:
        self._table = table
        self._clock = clock
        #: Usage tags -> the bucket and the quota it was last used with.
        self._buckets: dict[tuple[str, str], tuple[TokenBucket, float]] = {}
        self._requests = 0

    def quota(self, user: str | None, client_id: str | None, strict: bool) -> MutationQuota:
        """The quota of one request of this client (unbounded if it has none)."""
        table = self._table()
        if not table.has(CONTROLLER_MUTATION_RATE):
            return MutationQuota()
        found = table.resolve(CONTROLLER_MUTATION_RATE, ANONYMOUS if user is None else user,
                              client_id or "")
        if found is None:
            return MutationQuota()
        quota, tags = found
        now = self._clock()
        self._requests += 1
        if self._requests % _SWEEP_EVERY == 0:
            for key in [key for key, (bucket, last) in self._buckets.items()
                        if bucket.full(last, now)]:
                del self._buckets[key]
        kept = self._buckets.get(tags)
        bucket = TokenBucket(quota, now) if kept is None else kept[0]
        self._buckets[tags] = (bucket, quota)
        return MutationQuota(bucket, quota, strict, self._clock)

    def buckets(self) -> int:
        """How many buckets are kept (for the tests)."""
        return len(self._buckets)
