"""Share groups' settings: the broker's defaults and each group's overrides (Kafka's names).

The broker-wide defaults (``ShareConfig``) are Kafka's ``group.share.*``
broker configs; a group overrides some of them with Kafka's group configs
(``GROUP_CONFIGS``), set through IncrementalAlterConfigs on a GROUP resource
and kept in the share-state topic (``store``), as Kafka keeps them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["GROUP_CONFIGS", "GroupConfigError", "ShareConfig", "check_group_config_name",
           "checked_group_config"]


@dataclass(frozen=True, slots=True)
class ShareConfig:
    """Share-group settings, with Kafka's defaults.

    Attributes:
        session_timeout_ms: ``group.share.session.timeout.ms``.
        heartbeat_interval_ms: ``group.share.heartbeat.interval.ms``.
        record_lock_duration_ms: ``group.share.record.lock.duration.ms``: how long a
            member holds records it fetched.
        delivery_count_limit: ``group.share.delivery.count.limit``: deliveries after
            which a record released (or whose lock expired) is archived.
        max_in_flight: ``group.share.partition.max.record.locks``: records between
            the start and the end of a share partition at most.
        auto_offset_reset: ``share.auto.offset.reset``: where a share partition
            starts (``latest`` or ``earliest``).
        isolation_level: ``share.isolation.level``: ``read_uncommitted`` or ``read_committed``.
        metadata_refresh_ms: how often a group looks at its topics' partition counts
            again (at a heartbeat; at once when members or subscriptions change).
    """

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_in_flight: int = 2_000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"
    metadata_refresh_ms: int = 10_000

    def __post_init__(self) -> None:
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "record_lock_duration_ms",
                     "delivery_count_limit", "max_in_flight",
                     "metadata_refresh_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.auto_offset_reset not in ("latest", "earliest"):
            raise ValueError("auto_offset_reset must be latest or earliest")
        if self.isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")

    def with_group(self, overrides: dict[str, str]) -> ShareConfig:
        """These settings with a group's configs (``GROUP_CONFIGS`` names) over them."""
        changes: dict[str, object] = {}
        for name, value in overrides.items():
            field, kind = GROUP_CONFIGS[name]
            changes[field] = int(value) if kind is int else value
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


class GroupConfigError(ValueError):
    """A group config Kafka has no such name for, or a value out of its range."""


#: Kafka's group config name -> (``ShareConfig`` field, type).
GROUP_CONFIGS: dict[str, tuple[str, type]] = {
    "share.session.timeout.ms": ("session_timeout_ms", int),
    "share.heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "share.record.lock.duration.ms": ("record_lock_duration_ms", int),
    "share.delivery.count.limit": ("delivery_count_limit", int),
    "share.auto.offset.reset": ("auto_offset_reset", str),
    "share.isolation.level": ("isolation_level", str),
}
#: Kafka's ranges for the group configs (KIP-932).
_RANGES = {
    "share.session.timeout.ms": (1, 24 * 3600 * 1000),
    "share.heartbeat.interval.ms": (1, 24 * 3600 * 1000),
    "share.record.lock.duration.ms": (1_000, 3_600_000),
    "share.delivery.count.limit": (2, 10),
}


def check_group_config_name(name: str) -> None:
    """``GroupConfigError`` unless ``name`` is a share group's config."""
    if name not in GROUP_CONFIGS:
        raise GroupConfigError(f"unknown group config {name!r} (share groups take "
                               f"{', '.join(sorted(GROUP_CONFIGS))})")


def checked_group_config(name: str, value: str | None) -> str:
    """``value`` as stored for group config ``name``; ``GroupConfigError`` with the reason."""
    check_group_config_name(name)
    if value is None:
        raise GroupConfigError(f"group config {name!r} needs a value")
    if GROUP_CONFIGS[name][1] is int:
        try:
            number = int(value)
        except ValueError:
            raise GroupConfigError(f"{name} must be an integer, got {value!r}") from None
        low, high = _RANGES[name]
        if not low <= number <= high:
            raise GroupConfigError(f"{name} must be in [{low}, {high}], got {number}")
        return str(number)
    allowed = (("latest", "earliest") if name == "share.auto.offset.reset"
               else ("read_uncommitted", "read_committed"))
    if value not in allowed:
        raise GroupConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value
