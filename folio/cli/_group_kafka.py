"""``folio group`` for groups of both kinds: tables and JSON, and a Kafka group's reset and delete.

A reader group (``kind`` reader) and a Kafka consumer group (``kind``
kafka) may share a name; ``find`` describes whichever exist, ``kind_of``
says which one a reset or delete acts on (both: ``--kind`` must say).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import folio
from folio.errors import InvalidArgumentError, ReaderGroupNotEmptyError

if TYPE_CHECKING:  # folio.read loads gRPC: not needed to build the parser
    from folio.cli._group_reset import Move
    from folio.read.groups import GroupDescription
    from folio.read.kafka_groups import GroupKind, KafkaGroupDescription, ResetTo

__all__ = ["as_reader", "delete_kafka", "find", "is_kafka", "kind_of", "list_json",
           "list_rows", "print_kafka", "reset_kafka", "table"]

def table(rows: Sequence[Sequence[str]], indent: str = "") -> None:
    """Print ``rows`` as left-aligned columns (the first row is the header)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths,
                                                                          strict=True)).rstrip())


def _known(value: int | None) -> str:
    return "-" if value is None else str(value)


def find(client: folio.Client, name: str, kind: GroupKind | None,
         ) -> list[GroupDescription | KafkaGroupDescription]:
    """The groups named ``name`` (of ``kind``, or both kinds), reader group first.

    Raises ``ReaderGroupNotFoundError`` when there is none.
    """
    found: list[GroupDescription | KafkaGroupDescription] = []
    missing: folio.ReaderGroupNotFoundError | None = None
    if kind in (None, "reader"):
        try:
            found.append(client.reader_group(name).describe())
        except folio.ReaderGroupNotFoundError as error:
            missing = error
    if kind in (None, "kafka"):
        try:
            found.append(client.kafka_group(name).describe())
        except folio.ReaderGroupNotFoundError as error:
            missing = missing or error
    if missing is not None and not found:
        if kind is not None:
            raise missing
        raise folio.ReaderGroupNotFoundError(
            f"group {name!r} does not exist (neither a reader group nor a Kafka consumer "
            "group)", context=missing.context)
    return found


def _topics(group: GroupDescription | KafkaGroupDescription) -> list[str]:
    if is_kafka(group):
        return sorted({p.topic for p in group.partitions})
    return list(as_reader(group).topics)


def as_reader(group: GroupDescription | KafkaGroupDescription) -> GroupDescription:
    """``group``, known not to be a Kafka group's description."""
    from folio.read.groups import GroupDescription  # noqa: PLC0415

    if not isinstance(group, GroupDescription):
        raise TypeError(f"not a reader group's description: {type(group).__name__}")
    return group


def _state(group: GroupDescription | KafkaGroupDescription) -> str | None:
    return group.state if is_kafka(group) else None


def _kind(group: GroupDescription | KafkaGroupDescription) -> str:
    return "kafka" if is_kafka(group) else "reader"


def is_kafka(group: GroupDescription | KafkaGroupDescription,
             ) -> TypeGuard[KafkaGroupDescription]:
    """Whether ``group`` is a Kafka consumer group's description."""
    from folio.read.kafka_groups import KafkaGroupDescription  # noqa: PLC0415

    return isinstance(group, KafkaGroupDescription)


def list_json(found: Sequence[GroupDescription | KafkaGroupDescription]) -> list[dict[str, Any]]:
    """``folio group list --json``: {name, kind, state, topics, members, lag} each."""
    return [{"name": g.name, "kind": _kind(g), "state": _state(g), "topics": _topics(g),
             "members": len(g.members), "lag": g.lag} for g in found]


def list_rows(found: Sequence[GroupDescription | KafkaGroupDescription],
              ) -> list[tuple[str, ...]]:
    """``folio group list``'s table, with its header."""
    header: list[tuple[str, ...]] = [("GROUP", "KIND", "STATE", "TOPICS", "MEMBERS", "LAG")]
    return header + [
        (g.name, _kind(g), _state(g) or "-", ",".join(_topics(g)), str(len(g.members)),
         str(g.lag)) for g in found]


def print_kafka(described: KafkaGroupDescription) -> None:
    """``folio group describe`` of a Kafka consumer group, as kafka-consumer-groups shows it."""
    protocol = "/".join(p for p in (described.protocol_type, described.protocol) if p) or "-"
    print(f"kafka group {described.name}: state {described.state}; protocol {protocol}; "
          f"generation {described.generation}; {len(described.members)} member(s); "
          f"lag {described.lag}")
    if described.members:
        print("members:")
        table([("MEMBER", "CLIENT ID", "HOST", "PARTITIONS")] +
              [(m.member_id, m.client_id, m.client_host or "-",
                ",".join(f"{t}/{p}" for t, p in m.assigned) or "-")
               for m in described.members], indent="  ")
    if described.partitions:
        print("partitions:")
        table([("TOPIC", "PARTITION", "COMMITTED", "END OFFSET", "LAG", "MEMBER")] +
              [(p.topic, str(p.partition), _known(p.committed_offset), _known(p.end_offset),
                _known(p.lag), p.member_id or "-") for p in described.partitions],
              indent="  ")


def kind_of(client: folio.Client, name: str, kind: GroupKind | None) -> GroupKind:
    """The kind of group ``name`` a reset or delete acts on: ``kind``, or the one that exists.

    Without ``kind``: reader when no Kafka group has the name (a missing name
    is then the reader group's NOT_FOUND, as before Kafka groups were shown);
    ``InvalidArgumentError`` when both kinds have it.
    """
    if kind is not None:
        return kind
    kinds = {g.kind for g in client.list_groups() if g.name == name}
    if kinds == {"reader", "kafka"}:
        raise InvalidArgumentError(f"{name!r} is both a reader group and a Kafka consumer "
                                   "group: say which with --kind reader or --kind kafka")
    return "kafka" if kinds == {"kafka"} else "reader"


def _not_empty(name: str, error: ReaderGroupNotEmptyError) -> ReaderGroupNotEmptyError:
    if error.context.get("kind") == "share":  # a share group (KIP-932)
        return ReaderGroupNotEmptyError(
            f"Kafka share group {name!r} has members: {', '.join(error.members) or 'some'}; "
            "close its share consumers first (Kafka refuses the same: "
            "AlterShareGroupOffsets needs an empty group; a share consumer that stops "
            "without closing leaves after share.session.timeout.ms, 45 s by default)",
            context=error.context)
    return ReaderGroupNotEmptyError(
        f"Kafka consumer group {name!r} has members: {', '.join(error.members) or 'some'}; "
        "stop its consumers first (Kafka refuses the same; a dead consumer leaves after its "
        "session timeout)", context=error.context)


def reset_kafka(client: folio.Client, name: str, move: Move, topics: list[str],
                partitions: list[tuple[str, int]], dry_run: bool) -> list[tuple[str, int, int]]:
    """``folio group reset`` of a Kafka group; (topic, partition, new offset)s.

    Refused while it has members (a dry run too, as kafka-consumer-groups).
    """
    if move.to == "checkpoint":
        raise InvalidArgumentError("a Kafka consumer group has no checkpoints: reset it "
                                   "--to-earliest, --to-latest, --to-offset, --shift-by, "
                                   "--to-datetime, --by-duration or --to-current")
    to: ResetTo = ("earliest" if move.to == "earliest" else "latest" if move.to == "latest"
                   else "offset" if move.to == "offset" else "shift" if move.to == "shift"
                   else "timestamp" if move.to == "timestamp" else "current")
    try:
        described = client.kafka_group(name).reset(to, topics, value=move.value,
                                                   partitions=partitions, dry_run=dry_run)
    except ReaderGroupNotEmptyError as error:
        raise _not_empty(name, error) from None
    return [(p.topic, p.partition, p.committed_offset or 0) for p in described.reset]


def delete_kafka(client: folio.Client, name: str, force: bool) -> None:
    """``folio group delete --kind kafka``: refused while it has members, whatever ``force``."""
    if force:
        raise InvalidArgumentError("--force does not apply to a Kafka consumer group: Kafka "
                                   "deletes one only once its consumers have stopped")
    try:
        client.kafka_group(name).delete()
    except ReaderGroupNotEmptyError as error:
        raise _not_empty(name, error) from None
    print(f"Kafka consumer group {name} deleted with its committed offsets")
