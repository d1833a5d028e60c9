"""Kafka's quota arithmetic: a sampled rate and its throttle time; a token bucket (KIP-599).

Kafka's ``Rate`` over a ``SampledStat`` (``quota.window.num`` = 11 samples
of ``quota.window.size.seconds`` = 1 s): a value is added to the current
sample, a new sample starts when the current one is a window old (the oldest
is reused), and samples older than ``samples`` windows count as empty. The
rate is the sum of the samples over the time since the oldest sample
started, that time never under ``samples - 1`` windows (so a client's first
burst is spread over 10 s, not over the milliseconds it took).

``throttle_ms`` is Kafka's ``QuotaUtils.throttleTime``: when the rate, the
value just recorded included, is above the quota, the client waits
``(rate - quota) / quota * window`` ms, the time after which the same
window's rate is back at the quota if nothing more is recorded.

``TokenBucket`` is Kafka's ``TokenBucket`` stat, which bounds the controller
mutation rate (KIP-599): the bucket holds at most ``burst`` = quota x
(samples - 1) x window tokens (10 s worth), starts full, refills at the
quota per second, and each mutation takes its partitions' count of tokens,
going negative if need be (a request is never cut in the middle). The quota
is exceeded while the tokens are below 0; the throttle time is the time to
refill to 0: ``-tokens / quota`` seconds.

Times are seconds of a monotonic clock, passed in (the tests choose them).
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_THROTTLE_MS", "SAMPLES", "WINDOW_S", "Rate", "TokenBucket"]

#: Kafka's ``quota.window.num`` and ``quota.window.size.seconds`` defaults.
SAMPLES: Final = 11
WINDOW_S: Final = 1.0
#: The longest throttle time answered: the field is an int32 of ms (Kafka casts
#: its own to an int too). Only a quota of a few bytes per second, far exceeded, comes near.
MAX_THROTTLE_MS: Final = 2**31 - 1


class Rate:
    """Kafka's sampled rate (see the module docstring)."""

    __slots__ = ("_current", "_samples", "_starts", "_values", "_window_s")

    def __init__(self, now: float, samples: int = SAMPLES, window_s: float = WINDOW_S) -> None:
        self._samples = samples
        self._window_s = window_s
        self._starts = [now]
        self._values = [0.0]
        self._current = 0

    def record(self, value: float, now: float) -> None:
        """Add ``value`` at ``now``."""
        if now - self._starts[self._current] >= self._window_s:
            self._current = (self._current + 1) % self._samples
            if self._current >= len(self._starts):
                self._starts.append(now)
                self._values.append(0.0)
            else:
                self._starts[self._current] = now
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def measure(self, now: float) -> float:
        """The rate (per second) at ``now``."""
        window = self._window(now)  # first: it empties the obsolete samples
        return sum(self._values) / window

    def throttle_ms(self, quota: float, now: float, most_ms: int = MAX_THROTTLE_MS) -> int:
        """Milliseconds until the rate is back at ``quota`` (0: not above it), at most ``most_ms``.

        ``most_ms``: Kafka bounds the request time and connection rate
        quotas' throttle by one window (``boundedThrottleTime``), the byte
        rates' only by the field's width.
        """
        window = self._window(now)  # first: it empties the obsolete samples
        rate = sum(self._values) / window
        if rate <= quota:
            return 0
        if quota <= 0:
            return most_ms
        return min(round((rate - quota) / quota * window * 1000.0), most_ms)

    def idle(self, now: float) -> bool:
        """Whether every sample is obsolete: the rate is 0 and may be dropped."""
        return now - max(self._starts) >= self._samples * self._window_s

    def _window(self, now: float) -> float:
        """Seconds the rate is taken over (obsolete samples purged first)."""
        expired = self._samples * self._window_s
        for index, start in enumerate(self._starts):
            if now - start >= expired:
                self._starts[index] = now
                self._values[index] = 0.0
        elapsed = now - min(self._starts)
        full = int(elapsed / self._window_s)
        if full < self._samples - 1:
            elapsed += (self._samples - 1 - full) * self._window_s
        return elapsed


class TokenBucket:
    """Kafka's token bucket (see the module docstring); the quota is passed at each use."""

    __slots__ = ("_samples", "_tokens", "_updated", "_window_s")

    def __init__(self, quota: float, now: float, samples: int = SAMPLES,
                 window_s: float = WINDOW_S) -> None:
        self._samples = samples
        self._window_s = window_s
        self._tokens = self._burst(quota)  # starts full, as Kafka's (its first refill fills it)
        self._updated = now

    def tokens(self, quota: float, now: float) -> float:
        """The tokens at ``now`` (below 0: the quota is exceeded)."""
        self._refill(quota, now)
        return self._tokens

    def record(self, quota: float, value: float, now: float) -> None:
        """Take ``value`` tokens at ``now`` (the bucket may go below 0)."""
        self._refill(quota, now)
        self._tokens = min(self._burst(quota), self._tokens - value)

    def throttle_ms(self, quota: float, now: float) -> int:
        """Milliseconds until the tokens are back at 0 (0: not below it)."""
        tokens = self.tokens(quota, now)
        if tokens >= 0:
            return 0
        return min(round(-tokens / quota * 1000.0), MAX_THROTTLE_MS)

    def full(self, quota: float, now: float) -> bool:
        """Whether the bucket is full: as if never used, so it may be dropped."""
        return self.tokens(quota, now) >= self._burst(quota)

    def _burst(self, quota: float) -> float:
        return (self._samples - 1) * self._window_s * quota

    def _refill(self, quota: float, now: float) -> None:
        self._tokens = min(self._burst(quota),
                           self._tokens + quota * max(0.0, now - self._updated))
        self._updated = now
