"""Kafka's dynamic broker configs that a Folio broker honours live: the connection limits.

AlterConfigs and IncrementalAlterConfigs on the BROKER resource set them,
for the whole cluster (resource name "", Kafka's cluster-wide default) or for
one broker (its node id); every broker applies a change without a restart.
The keys (Kafka's, each dynamic in Kafka too):

- ``max.connections``, ``max.connections.per.ip`` (ints >= 0);
- ``max.connections.per.ip.overrides`` (``address:count,...``, IP addresses);
- ``max.connection.creation.rate`` (int >= 0, new connections a second,
  broker-wide);
- ``listener.name.<name>.max.connections`` and
  ``listener.name.<name>.max.connection.creation.rate`` (one listener's, by
  its name, lower case in the key as Kafka writes it).

A value in force is, first found: this broker's (DYNAMIC_BROKER_CONFIG), the
cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG), the start-up flag when it
differs from the built-in default (STATIC_BROKER_CONFIG), the built-in
default (DEFAULT_CONFIG); DescribeConfigs lists those synonyms in that
order, as Kafka does. A listener's own keys are described only where set.

Stored in one metadata-store node, ``/folio/kafka/broker_configs``
(versioned JSON: scope -> key -> value, scope "" or a node id), kept as
``broker.watched_table`` keeps such a table, so each broker reads the table in
memory when it accepts a connection. A change whose outcome is unknown
(``LedgerError``) is passed up (AlterConfigs answers its error code); a retry
is safe (setting the same values again changes nothing).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Self

from broker.kafka.quotas.limits import UNLIMITED, ConnectionLimits, ListenerLimits, parse_overrides
from broker.kafka.topic_configs import (
    DEFAULT_CONFIG,
    INT,
    STATIC_BROKER_CONFIG,
    STRING,
    DescribedConfig,
    DescribedSynonym,
)
from broker.metadata_paths import BROKER_CONFIGS_PATH
from broker.watched_table import WatchedTable
from ledger.api import MetadataStore

__all__ = ["DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG", "DynamicBrokerConfigs",
           "DynamicConfigTable", "InvalidConfigError", "NotDynamicError", "check_config"]

#: DescribeConfigs' sources of a dynamic broker config (Kafka's ``ConfigSource``).
DYNAMIC_BROKER_CONFIG: Final = 2
DYNAMIC_DEFAULT_BROKER_CONFIG: Final = 3

log = logging.getLogger(__name__)

_MAX_CONNECTIONS = "max.connections"
_PER_IP = "max.connections.per.ip"
_OVERRIDES = "max.connections.per.ip.overrides"
_RATE = "max.connection.creation.rate"
#: The keys a broker takes for itself (the listener ones are matched by ``_LISTENER``).
_BROKER_KEYS: Final = (_MAX_CONNECTIONS, _PER_IP, _OVERRIDES, _RATE)
_LISTENER: Final = re.compile(
    r"listener\.name\.([A-Za-z0-9_-]+)\.(max\.connections|max\.connection\.creation\.rate)")


class NotDynamicError(ValueError):
    """A key Folio does not change at runtime (Kafka's INVALID_REQUEST)."""


class InvalidConfigError(ValueError):
    """A dynamic key's value of the wrong type or range (Kafka's INVALID_CONFIG)."""


def canonical_key(name: str) -> str:
    """``name`` as stored (a listener's name lower case); ``NotDynamicError`` if not dynamic."""
    if name in _BROKER_KEYS:
        return name
    match = _LISTENER.fullmatch(name)
    if match is None:
        raise NotDynamicError(
            f"cannot update {name!r} dynamically: a Folio broker changes only "
            f"{', '.join(_BROKER_KEYS)}, listener.name.<name>.max.connections and "
            "listener.name.<name>.max.connection.creation.rate at runtime (its other settings "
            "are read at start: flags, FOLIO_BROKER_*, --config)")
    return f"listener.name.{match[1].lower()}.{match[2]}"


def check_config(name: str, value: str) -> tuple[str, str]:
    """(key, value) as stored, checked. ``NotDynamicError``, ``InvalidConfigError``."""
    key = canonical_key(name)
    if key == _OVERRIDES:
        try:
            overrides = parse_overrides(value, key)
        except ValueError as error:
            raise InvalidConfigError(f"Invalid value {value!r} for configuration {key}: "
                                     f"{error}") from None
        return key, ",".join(f"{address}:{count}" for address, count in overrides.items())
    try:
        number = int(value.strip())
    except ValueError:
        raise InvalidConfigError(f"Invalid value {value!r} for configuration {key}: not a "
                                 "number of type INT") from None
    if not 0 <= number <= UNLIMITED:
        raise InvalidConfigError(f"Invalid value {value!r} for configuration {key}: Value "
                                 f"must be at least 0 and at most {UNLIMITED}")
    return key, str(number)


@dataclass(frozen=True, slots=True)
class DynamicConfigTable:
    """Every dynamic broker config: scope ("" or a node id) -> key -> value."""

    scopes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    version: int = -1

    def encode(self) -> bytes:
        return json.dumps({"scopes": {scope: dict(configs)
                                      for scope, configs in self.scopes.items()}},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, version: int) -> Self:
        if not data:
            return cls(version=version)
        raw = json.loads(data)
        return cls({str(scope): {str(k): str(v) for k, v in configs.items()}
                    for scope, configs in raw.get("scopes", {}).items()}, version)

    def scope(self, scope: str) -> Mapping[str, str]:
        """The configs set for ``scope`` ("": the cluster default)."""
        return self.scopes.get(scope, {})

    def changed(self, scope: str, sets: Mapping[str, str], deletes: Iterable[str], *,
                replace: bool) -> DynamicConfigTable:
        """A copy with ``scope``'s keys set and deleted (``replace``: the others dropped)."""
        configs = {} if replace else dict(self.scope(scope))
        for key in deletes:
            configs.pop(key, None)
        configs.update(sets)
        scopes = {name: dict(each) for name, each in self.scopes.items() if name != scope}
        if configs:
            scopes[scope] = configs
        return DynamicConfigTable(scopes, self.version)


@dataclass(frozen=True, slots=True)
class StaticConnectionSettings:
    """The connection limits the broker's flags set (``--kafka-max-connections``, ...)."""

    max_connections: int = UNLIMITED
    max_per_ip: int = UNLIMITED
    per_ip_overrides: str = ""


class DynamicBrokerConfigs:
    """The dynamic broker configs in the metadata store, and the limits in force here."""

    def __init__(self, store: MetadataStore, static: StaticConnectionSettings,
                 node_id: Callable[[], int]) -> None:
        self._node = WatchedTable(store, BROKER_CONFIGS_PATH, DynamicConfigTable(),
                                  "kafka: the dynamic broker configs")
        self._static = static
        self._node_id = node_id
        self._cached: tuple[int, int, ConnectionLimits] | None = None

    @property
    def table(self) -> DynamicConfigTable:
        """The configs as last read or changed here."""
        return self._node.table

    async def start(self) -> None:
        """Create the node if missing, read it and watch it (``LedgerError`` if unreachable)."""
        await self._node.start()

    async def close(self) -> None:
        """Stop watching."""
        await self._node.close()

    async def change(self, edit: Callable[[DynamicConfigTable], DynamicConfigTable]) -> None:
        """Apply ``edit`` by compare-and-set (``LedgerError``: maybe applied)."""
        await self._node.change(edit)

    def limits(self) -> ConnectionLimits:
        """The connection limits in force on this broker now (cached per table version)."""
        table, node_id = self._node.table, self._node_id()
        cached = self._cached
        if cached is not None and cached[0] == table.version and cached[1] == node_id:
            return cached[2]
        try:
            limits = _limits(resolved(table, node_id, self._static))
        except ValueError as error:  # written by hand past the checks: the flags alone
            log.warning("kafka: the dynamic broker configs (version %d) do not parse, the "
                        "start-up settings apply: %s", table.version, error)
            limits = _limits(resolved(DynamicConfigTable(), node_id, self._static))
        self._cached = (table.version, node_id, limits)
        return limits

    def described(self) -> list[DescribedConfig]:
        """DescribeConfigs' entries of the dynamic keys for this broker, synonyms in order."""
        return described(self._node.table, self._node_id(), self._static)


def _limits(values: Mapping[str, str]) -> ConnectionLimits:
    """The limits of the values in force (``ValueError`` if one does not parse)."""
    listeners: dict[str, ListenerLimits] = {}
    for key, value in values.items():
        match = _LISTENER.fullmatch(key)
        if match is None:
            continue
        name = match[1].upper()
        before = listeners.get(name, ListenerLimits())
        listeners[name] = (ListenerLimits(int(value), before.connection_rate)
                           if match[2] == _MAX_CONNECTIONS
                           else ListenerLimits(before.max_connections, int(value)))
    return ConnectionLimits(
        int(values[_MAX_CONNECTIONS]), int(values[_PER_IP]),
        parse_overrides(values[_OVERRIDES], _OVERRIDES), int(values[_RATE]), listeners)


def _layers(table: DynamicConfigTable, node_id: int, static: StaticConnectionSettings,
            key: str) -> list[DescribedSynonym]:
    """Every place ``key`` has a value, the one in force first (Kafka's synonyms' order)."""
    found = [DescribedSynonym(key, value, source) for value, source in (
        (table.scope(str(node_id)).get(key), DYNAMIC_BROKER_CONFIG),
        (table.scope("").get(key), DYNAMIC_DEFAULT_BROKER_CONFIG)) if value is not None]
    built_in, flag = _BUILT_IN.get(key, str(UNLIMITED)), _static_value(static, key)
    if flag is not None and flag != built_in:
        found.append(DescribedSynonym(key, flag, STATIC_BROKER_CONFIG))
    found.append(DescribedSynonym(key, built_in, DEFAULT_CONFIG))
    return found


_BUILT_IN: Final = {_MAX_CONNECTIONS: str(UNLIMITED), _PER_IP: str(UNLIMITED), _OVERRIDES: "",
                    _RATE: str(UNLIMITED)}


def _static_value(static: StaticConnectionSettings, key: str) -> str | None:
    return {_MAX_CONNECTIONS: str(static.max_connections), _PER_IP: str(static.max_per_ip),
            _OVERRIDES: ",".join(f"{a}:{c}" for a, c in parse_overrides(
                static.per_ip_overrides, _OVERRIDES).items())}.get(key)


def _keys(table: DynamicConfigTable, node_id: int) -> list[str]:
    listener_keys = {key for scope in ("", str(node_id)) for key in table.scope(scope)
                     if _LISTENER.fullmatch(key)}
    return [*_BROKER_KEYS, *sorted(listener_keys)]


def resolved(table: DynamicConfigTable, node_id: int,
             static: StaticConnectionSettings) -> dict[str, str]:
    """Each dynamic key's value in force on broker ``node_id`` (listener keys where set)."""
    return {key: _layers(table, node_id, static, key)[0].value for key in _keys(table, node_id)}


def described(table: DynamicConfigTable, node_id: int,
              static: StaticConnectionSettings) -> list[DescribedConfig]:
    """The dynamic keys as DescribeConfigs reports them on broker ``node_id``."""
    entries = []
    for key in _keys(table, node_id):
        synonyms = _layers(table, node_id, static, key)
        if _LISTENER.fullmatch(key):  # a listener's key: only where it is set
            synonyms = [each for each in synonyms if each.source != DEFAULT_CONFIG]
        entries.append(DescribedConfig(
            key, synonyms[0].value, synonyms[0].source, STRING if key == _OVERRIDES else INT,
            read_only=False, synonyms=tuple(synonyms)))
    return entries
