"""The client quota table: entities, their quota values, Kafka's rules to change and find them.

An entity is what Kafka's client quotas (KIP-55, KIP-546) name: a ``user``,
a ``client-id``, or both, each either a name or the *default* (None on the
wire, ``<default>`` in Kafka's tools), or an ``ip`` alone (an address, or
the default ip). Its values are quota keys and numbers, Kafka's:

- a user and/or client-id: ``producer_byte_rate`` and ``consumer_byte_rate``
  (bytes per second, whole numbers, Kafka's LONG configs; enforced by
  ``broker.kafka.quotas.enforcer``), ``request_percentage`` (percent of one
  thread's time, a DOUBLE; the enforcer too) and ``controller_mutation_rate``
  (partitions created or deleted per second, a DOUBLE;
  ``broker.kafka.quotas.mutations``);
- an ip: ``connection_creation_rate`` (connections accepted per second, a
  whole number, Kafka's INT; ``broker.kafka.quotas.connections``).

Everything here is pure (no store, no clock), so the rules are tested alone:

- ``check_entity`` / ``check_ops``: what AlterClientQuotas refuses, with
  Kafka's codes (INVALID_REQUEST for an unknown entity type, an ip combined
  with a user or client-id, an ip that is not an address, a name that is
  empty, a type named twice, a key the entity's type does not have, a key
  changed twice, a value not above 0, a fraction for a whole-number key).
- ``QuotaTable.altered``: the table after one entity's ops (a removal of an
  absent key does nothing; an entity left with no values is gone).
- ``QuotaTable.describe``: DescribeClientQuotas' filter (exact name, the
  default, any name; strict or not), as Kafka's ``ClientQuotasImage``.
- ``QuotaTable.resolve``: the quota of one (user, client-id) for one key, by
  Kafka's precedence (``PRECEDENCE``), and the tags its usage is counted
  under (so a default quota is each user's or client's own, not shared).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from kio.schema.errors import ErrorCode

from broker.metadata_paths import QUOTAS_PATH
from ledger.records import dump_record, load_record

__all__ = [
    "CLIENT_ID",
    "CONNECTION_CREATION_RATE",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "ENFORCED_KEYS",
    "IP",
    "PRECEDENCE",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "USER",
    "Entity",
    "Filter",
    "QuotaError",
    "QuotaTable",
    "check_entity",
    "check_ops",
]

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"
#: The keys of user and client-id entities, each with whether it is a whole
#: number (Kafka's LONG) rather than a DOUBLE.
_CLIENT_KEYS: Final = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                       REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}
#: The keys of ip entities (Kafka's INT).
_IP_KEYS: Final = {CONNECTION_CREATION_RATE: True}
#: The keys Folio stores and enforces: all of Kafka's client quota keys.
ENFORCED_KEYS: Final = frozenset(_CLIENT_KEYS) | frozenset(_IP_KEYS)
_INT_MAX: Final = 2**31 - 1

#: An entity: ((type, name or None for the default), ...), sorted by type.
Entity = tuple[tuple[str, str | None], ...]

#: A component of an entity to look up: absent (None), the default, or the name itself.
_ABSENT: Final = 0
_DEFAULT: Final = 1
_NAME: Final = 2
#: Kafka's order (``ClientQuotaManager``): the first entity with the key wins.
#: Each row: (user component, client-id component).
PRECEDENCE: Final = (
    (_NAME, _NAME),
    (_NAME, _DEFAULT),
    (_NAME, _ABSENT),
    (_DEFAULT, _NAME),
    (_DEFAULT, _DEFAULT),
    (_DEFAULT, _ABSENT),
    (_ABSENT, _NAME),
    (_ABSENT, _DEFAULT),
)
_FORMAT: Final = 1
#: DescribeClientQuotas' match types.
MATCH_EXACT: Final = 0
MATCH_DEFAULT: Final = 1
MATCH_SPECIFIED: Final = 2


class QuotaError(Exception):
    """A request Kafka refuses: its error code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_entity(components: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of AlterClientQuotas' components; ``QuotaError`` as Kafka refuses one."""
    seen: dict[str, str | None] = {}
    for entity_type, name in components:
        if entity_type in seen:
            raise QuotaError(ErrorCode.invalid_request,
                             f"Invalid client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.invalid_request,
                             f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
        if entity_type == IP and name is not None and ip_address_or_none(name) is None:
            # Kafka also resolves a host name here; Folio takes addresses only
            # (a lookup would block the broker's loop, and may change later).
            raise QuotaError(ErrorCode.invalid_request,
                             f"{name} is not a valid IP address (Folio takes ip entities as "
                             "literal IPv4 or IPv6 addresses)")
        seen[entity_type] = name
    if not seen:
        raise QuotaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    if IP in seen and len(seen) > 1:
        raise QuotaError(ErrorCode.invalid_request, "Invalid quota entity combination, IP "
                         "quota should not combine with user or clientId")
    return tuple(sorted(seen.items()))


def ip_address_or_none(name: str) -> str | None:
    """``name`` as a normalised IP address (``ipaddress``'s text), None if it is not one."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return None


def check_ops(ops: Iterable[tuple[str, float, bool]],
              entity: Entity = ()) -> dict[str, float | None]:
    """key -> value (None: remove) of AlterClientQuotas' ops; ``QuotaError`` as Kafka refuses.

    The keys allowed are those of ``entity``'s types: an ip entity's, or
    (any other, or none given) a user and client-id entity's.
    """
    keys = _IP_KEYS if any(entity_type == IP for entity_type, _ in entity) else _CLIENT_KEYS
    changes: dict[str, float | None] = {}
    for key, value, remove in ops:
        if key in changes:
            raise QuotaError(ErrorCode.invalid_request, f"Duplicate quota key {key}")
        if remove:  # as Kafka: removing what is not set (any key) does nothing
            changes[key] = None
            continue
        if key not in keys:
            raise QuotaError(ErrorCode.invalid_request, f"Invalid configuration key {key}")
        whole = keys[key]
        if not math.isfinite(value) or (whole and abs(value - round(value)) > 1e-6):
            kind = "Long" if keys is _CLIENT_KEYS else "Integer"
            raise QuotaError(ErrorCode.invalid_request,
                             f"Configuration {key} must be a {kind if whole else 'Double'} value")
        if value <= 0:
            raise QuotaError(ErrorCode.invalid_request, f"Quota {key} must be greater than 0")
        if keys is _IP_KEYS and value > _INT_MAX:
            raise QuotaError(ErrorCode.invalid_request,
                             f"Proposed value for {key} is too large for a INT.")
        changes[key] = float(round(value)) if whole else float(value)
    return changes


@dataclass(frozen=True, slots=True)
class Filter:
    """DescribeClientQuotas' filter, checked (``Filter.of``)."""

    #: type -> name (None: the default) that must match exactly.
    exact: Mapping[str, str | None]
    #: types that must be present with a name (any name).
    specified: frozenset[str]
    strict: bool

    @classmethod
    def of(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> Filter:
        """The filter of (type, match type, match) components; ``QuotaError`` as Kafka refuses."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise QuotaError(ErrorCode.invalid_request, "Invalid empty entity type.")
            if entity_type in exact or entity_type in specified:
                raise QuotaError(ErrorCode.invalid_request, f"Entity type {entity_type} cannot "
                                 "appear more than once in the filter.")
            if entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(ErrorCode.unsupported_version,
                                 f"Unsupported entity type {entity_type}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError(ErrorCode.invalid_request, "Request specified "
                                     "MATCH_TYPE_EXACT, but set match string to null.")
                exact[entity_type] = match
            elif match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
                if match is not None:
                    name = "DEFAULT" if match_type == MATCH_DEFAULT else "SPECIFIED"
                    raise QuotaError(ErrorCode.invalid_request, f"Request specified "
                                     f"MATCH_TYPE_{name}, but also specified a match string.")
                if match_type == MATCH_DEFAULT:
                    exact[entity_type] = None
                else:
                    specified.add(entity_type)
            else:
                raise QuotaError(ErrorCode.invalid_request, f"Unknown match type {match_type}")
        types = set(exact) | specified
        if IP in types and types & {USER, CLIENT_ID}:
            raise QuotaError(ErrorCode.invalid_request, "Invalid entity filter component "
                             "combination. IP filter component should not be used with user "
                             "or clientId filter component.")
        return cls(exact, frozenset(specified), strict)

    def matches(self, entity: Entity) -> bool:
        """Whether ``entity`` passes (Kafka's ``ClientQuotasImage.matches``)."""
        names = dict(entity)
        if not self.exact and not self.specified:
            return not self.strict
        for entity_type, name in self.exact.items():
            if entity_type not in names or names[entity_type] != name:
                return False
        for entity_type in self.specified:
            if names.get(entity_type) is None:  # absent, or the default
                return False
        return not self.strict or len(names) == len(self.exact) + len(self.specified)


@dataclass(frozen=True)
class QuotaTable:
    """Every entity's quota values (immutable: a change makes a new table)."""

    entries: Mapping[Entity, Mapping[str, float]] = field(default_factory=dict)
    #: The store's version of the node it was read from (-1: not read).
    version: int = -1

    def altered(self, entity: Entity, changes: Mapping[str, float | None]) -> QuotaTable:
        """The table with ``changes`` (key -> value, None: removed) applied to ``entity``."""
        values = dict(self.entries.get(entity, {}))
        for key, value in changes.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        entries = dict(self.entries)
        if values:
            entries[entity] = values
        else:
            entries.pop(entity, None)
        return QuotaTable(entries, self.version)

    def describe(self, wanted: Filter) -> list[tuple[Entity, Mapping[str, float]]]:
        """The entities ``wanted`` matches, with their values, in a stable order."""
        return [(entity, values) for entity, values in sorted(self.entries.items(), key=_order)
                if wanted.matches(entity)]

    def has(self, key: str) -> bool:
        """Whether any entity has a quota for ``key`` (none: nothing to count)."""
        return key in self.keys

    @cached_property
    def keys(self) -> frozenset[str]:
        """The keys some entity has a quota for (computed once per table)."""
        return frozenset(key for values in self.entries.values() for key in values)

    def resolve_ip(self, address: str) -> tuple[float, str] | None:
        """(connection_creation_rate, the address) of a client ``address``, None if unbounded.

        Kafka's order: the address's own quota, else the default ip's. Names
        are compared as normalised addresses (``::1`` and ``0:0::1`` alike).
        """
        normal = ip_address_or_none(address) or address
        default = None
        for entity, values in self.entries.items():
            if len(entity) != 1 or entity[0][0] != IP or CONNECTION_CREATION_RATE not in values:
                continue
            name = entity[0][1]
            if name is None:
                default = values[CONNECTION_CREATION_RATE]
            elif (ip_address_or_none(name) or name) == normal:
                return values[CONNECTION_CREATION_RATE], normal
        return None if default is None else (default, normal)

    def resolve(self, key: str, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """(quota, (user tag, client-id tag)) of ``key`` for this client, None if it has none.

        The tags name the usage the quota bounds, as Kafka's metric tags do:
        the client's own user and client id for the components the matching
        entity has (a default quota is then each one's own), "" for the others.
        """
        for user_part, client_part in PRECEDENCE:
            entity = _entity(user_part, user, client_part, client_id)
            values = self.entries.get(entity)
            if values is not None and key in values:
                return values[key], (user if user_part != _ABSENT else "",
                                     client_id if client_part != _ABSENT else "")
        return None

    def encode(self) -> bytes:
        """The node's bytes."""
        entries = [{"entity": [[entity_type, name] for entity_type, name in entity],
                    "values": dict(sorted(values.items()))}
                   for entity, values in sorted(self.entries.items(), key=_order)]
        return dump_record(_FORMAT, {"entries": entries})

    @classmethod
    def decode(cls, data: bytes, version: int) -> QuotaTable:
        """The table in a node's bytes (empty: none). ``ValueError`` if malformed."""
        if not data:
            return cls({}, version)
        try:
            raw: Any = load_record(data, QUOTAS_PATH, (_FORMAT,))
            entries = {tuple((str(t), None if n is None else str(n)) for t, n in e["entity"]):
                       {str(k): float(v) for k, v in e["values"].items()}
                       for e in raw["entries"]}
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise ValueError(f"{QUOTAS_PATH} is not a client quota table ({error})") from None
        return cls(entries, version)


def _entity(user_part: int, user: str, client_part: int, client_id: str) -> Entity:
    parts: list[tuple[str, str | None]] = []
    if client_part != _ABSENT:
        parts.append((CLIENT_ID, client_id if client_part == _NAME else None))
    if user_part != _ABSENT:
        parts.append((USER, user if user_part == _NAME else None))
    return tuple(parts)


def _order(item: tuple[Entity, Mapping[str, float]]) -> list[tuple[str, int, str]]:
    return [(entity_type, name is not None, name or "") for entity_type, name in item[0]]
