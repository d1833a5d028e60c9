"""``folio group list|describe|reset|offline|delete``: reader groups, as kafka-consumer-groups.

Everything goes through the SDK (``Client.list_groups``,
``ReaderGroup.describe``, ``Client.kafka_group(name)``,
``reset(only_if_empty=True)``, ``reader_offline``, ``delete``). Like Kafka, a
reset or a delete is refused while the group has members: stop them first,
or declare dead ones offline. The Kafka listener's consumer groups are
listed, described, reset and deleted too (KIND kafka; ``_group_kafka``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import folio
from folio.cli._common import add_endpoint_option, run_with_client
from folio.cli._group_kafka import (
    as_reader,
    delete_kafka,
    find,
    is_kafka,
    kind_of,
    list_json,
    list_rows,
    print_kafka,
    reset_kafka,
    table,
)
from folio.cli._group_reset import Move, add_reset_options, move_of, print_plan, targets
from folio.errors import InvalidArgumentError, ReaderGroupNotEmptyError

if TYPE_CHECKING:  # folio.read loads gRPC: not needed to build the parser
    from folio.read.groups import GroupDescription, GroupStart, ReaderGroup, SegmentLag
    from folio.read.kafka_groups import KafkaGroupDescription

__all__ = ["register"]


def _known(value: int | None) -> str:
    return "-" if value is None else str(value)


def _list(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        found: list[GroupDescription | KafkaGroupDescription] = []
        for listed in client.list_groups(args.kind):
            try:
                found.append(client.reader_group(listed.name).describe()
                             if listed.kind == "reader"
                             else client.kafka_group(listed.name).describe())
            except folio.ReaderGroupNotFoundError:
                continue  # deleted meanwhile
        if args.json:
            json.dump(list_json(found), sys.stdout, indent=2)
            print()
        else:  # the header even with no group, so an empty list reads as one
            table(list_rows(found))
        return 0
    return run_with_client("folio group list", args, body)


def _segment_rows(owner: str, segments: Sequence[SegmentLag]) -> list[tuple[str, ...]]:
    return [(owner, s.segment, str(s.position), _known(s.end_offset), _known(s.lag))
            for s in segments]


def _print(described: GroupDescription) -> None:
    print(f"group {described.name}: topics {', '.join(described.topics)}; session timeout "
          f"{described.session_timeout_ms} ms; {len(described.members)} member(s); "
          f"lag {described.lag}")
    if described.members:
        print("members:")
        table([("READER", "HEARTBEAT", "DECLARED OFFLINE IN", "SEGMENTS")] +
               [(m.reader_id,
                 f"{m.silent_ms} ms ago" if m.heartbeated else
                 f"none yet ({m.silent_ms} ms)", f"{m.expires_in_ms} ms if silent",
                 str(len(m.segments))) for m in described.members], indent="  ")
    rows: list[tuple[str, ...]] = [("READER", "SEGMENT", "POSITION", "END OFFSET", "LAG")]
    for member in described.members:
        rows += _segment_rows(member.reader_id, member.segments)
    rows += _segment_rows("(free)", described.unassigned)
    if len(rows) > 1:
        print("segments:")
        table(rows, indent="  ")
    for segment, waiting_for in described.waiting.items():
        print(f"waiting: {segment} until {', '.join(waiting_for)} read to the end")
    if described.checkpoints:
        print(f"checkpoints: {', '.join(described.checkpoints)}")
    if described.pending_checkpoints:
        print(f"checkpoints in progress: {', '.join(described.pending_checkpoints)}")


def _describe(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        found = find(client, args.name, args.kind)
        if len(found) > 1:  # one name, both kinds: say so, show both
            print(f"folio group describe: {args.name!r} is both a reader group and a Kafka "
                  "consumer group; showing both (--kind picks one)", file=sys.stderr)
        if args.json:
            shown = [{"kind": "reader", **g.to_json()} if not is_kafka(g) else g.to_json()
                     for g in found]
            json.dump(shown[0] if len(shown) == 1 else shown, sys.stdout, indent=2)
            print()
        else:
            for index, described in enumerate(found):
                if index:
                    print()
                if is_kafka(described):
                    print_kafka(described)
                else:
                    _print(as_reader(described))
        return 0
    return run_with_client("folio group describe", args, body)


def _reset(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        move = move_of(args)
        topics, partitions = targets(args.topic)
        if args.checkpoint is not None and move.to != "checkpoint":
            raise InvalidArgumentError("--checkpoint goes with --to checkpoint")
        kind = kind_of(client, args.name, args.kind)
        if kind == "kafka":
            rows = reset_kafka(client, args.name, move, topics, partitions, args.dry_run)
        else:
            rows = _reset_reader(client, args.name, move, topics, partitions, args.dry_run)
        print_plan(kind, args.name, move, rows, args.dry_run, args.json)
        return 0
    return run_with_client("folio group reset", args, body)


def _reset_reader(client: folio.Client, name: str, move: Move, topics: list[str],
                  partitions: list[tuple[str, int]], dry_run: bool,
                  ) -> list[tuple[str, int, int]]:
    """A reader group's reset: start over, or move its positions; (topic, segment, offset)s."""
    group = client.reader_group(name)
    try:
        if move.to == "timestamp":
            raise InvalidArgumentError(
                "--to-datetime and --by-duration reset Kafka consumer groups only: a reader "
                "group's positions would need the offset at a time in each segment, which "
                "the gRPC API cannot look up (only the Kafka listener's ListOffsets can); "
                "use --to-offset, --shift-by or a checkpoint")
        if move.to in ("offset", "shift", "current"):
            moved = group.move_positions("offset" if move.to == "offset" else
                                         "shift" if move.to == "shift" else "current",
                                         move.value, topics=topics, partitions=partitions,
                                         dry_run=dry_run)
        else:
            if topics or partitions:
                raise InvalidArgumentError(
                    f"a reader group starts over at {move.to} as a whole (its successors "
                    "and finished segments follow from it): --topic goes with --to-offset, "
                    "--shift-by and --to-current, or a Kafka consumer group")
            moved = group.reset(_start(group, name, move), only_if_empty=True,
                                dry_run=dry_run)
    except ReaderGroupNotEmptyError as error:
        members = error.context.get("members")
        names = ", ".join(map(str, members)) if isinstance(members, list) else "some"
        first = members[0] if isinstance(members, list) and members else "READER"
        raise ReaderGroupNotEmptyError(
            f"reader group {name!r} has members online: {names}; stop them first "
            f"(a dead member is declared offline after the session timeout), or declare "
            f"one offline now: `folio group offline {name} {first}`",
            context=error.context) from None
    rows = []
    for segment, offset in moved.items():
        topic, number = segment.rsplit("/", 1)
        rows.append((topic, int(number), offset))
    return rows


def _start(group: ReaderGroup, name: str, move: Move) -> GroupStart:
    """Where ``--to earliest|latest|checkpoint`` starts the reader group over."""
    if move.to != "checkpoint":
        return "earliest" if move.to == "earliest" else "latest"
    kept = group.checkpoints()
    wanted = move.checkpoint
    if wanted is not None:
        kept = [c for c in kept if c.name == wanted]
    if not kept:
        which = "" if wanted is None else f" named {wanted!r}"
        raise InvalidArgumentError(f"reader group {name!r} has no completed "
                                   f"checkpoint{which} to reset to")
    return kept[-1]


def _offline(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        client.reader_group(args.name).reader_offline(args.reader)
        print(f"reader {args.reader} of group {args.name} declared offline; its segments are "
              "free for the other members from its last reported position")
        return 0
    return run_with_client("folio group offline", args, body)


def _delete(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        if kind_of(client, args.name, args.kind) == "kafka":
            delete_kafka(client, args.name, args.force)
            return 0
        group = client.reader_group(args.name)
        members = group.online_readers()
        if members and not args.force:
            raise ReaderGroupNotEmptyError(
                f"reader group {args.name!r} has members online: {', '.join(members)}; stop "
                "them first, or --force", group=args.name, members=members)
        group.delete()
        print(f"reader group {args.name} deleted")
        return 0
    return run_with_client("folio group delete", args, body)


def _json_help(what: str) -> str:
    return f"print {what} as JSON (stable keys; see docs/sdk.md)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio group`` and its sub-commands."""
    parser = subparsers.add_parser(
        "group", help="list, describe, reset, declare offline and delete reader groups",
        description="Administer reader groups (like kafka-consumer-groups); list and "
        "describe show the Kafka listener's consumer groups too. A member the "
        "broker has not heard from for the group's session timeout is declared offline by "
        "the broker; its segments go to the others. Errors print one line "
        "'folio group CMD: error: ...' and exit 1.",
    )
    commands = parser.add_subparsers(dest="group_command", metavar="COMMAND", required=True)

    list_ = commands.add_parser(
        "list", help="list reader groups and Kafka consumer groups",
        description="Print every group: reader groups (KIND reader) and the Kafka "
        "listener's consumer groups (KIND kafka; STATE is Kafka's), with their topics, "
        "number of members and lag (reader groups: events still to read in the segments "
        "they hold or have free; Kafka groups: end offset - committed offset, summed over "
        "the partitions they committed). In a cluster every broker is asked.")
    list_.add_argument("--kind", choices=("reader", "kafka"), default=None,
                       help="only groups of this kind (default: both)")
    list_.add_argument("--json", action="store_true", help=_json_help(
        "a list of {name, kind, state, topics, members, lag} (state: null for a reader "
        "group)"))
    add_endpoint_option(list_)
    list_.set_defaults(func=_list)

    describe = commands.add_parser(
        "describe", help="show a group's members, segments or partitions, offsets and lag",
        description="Show group NAME. A reader group: its members with how long since the "
        "broker last heard from each (and when it would be declared offline if it stays "
        "silent), every segment held or free with its position (next offset to read: the "
        "later of the recorded and the last reported one), end offset and lag (end offset "
        "- position), successors waiting for predecessors, and checkpoints. A Kafka "
        "consumer group: its state, protocol and generation, its members (member id, "
        "client id, host, assigned partitions) and every partition it committed or has "
        "assigned with its committed offset, end offset and lag. A name that is both "
        "shows both (a note on stderr) unless --kind picks one.")
    describe.add_argument("name", metavar="NAME", help="the group's name")
    describe.add_argument("--kind", choices=("reader", "kafka"), default=None,
                          help="only look for a group of this kind (default: both)")
    describe.add_argument("--json", action="store_true", help=_json_help(
        "one object (a list of two when the name is both kinds): a reader group's {kind, "
        "name, topics, session_timeout_ms, lag, members [{reader_id, silent_ms, "
        "heartbeated, expires_in_ms, segments [{segment, position, end_offset, lag}]}], "
        "unassigned, waiting, checkpoints, pending_checkpoints}; a Kafka group's {kind, "
        "name, state, protocol_type, protocol, generation, lag, members [{member_id, "
        "group_instance_id, client_id, client_host, assigned [{topic, partition}]}], "
        "partitions [{topic, partition, committed_offset, end_offset, lag, member_id, "
        "metadata}]}"))
    add_endpoint_option(describe)
    describe.set_defaults(func=_describe)

    reset = commands.add_parser(
        "reset", help="move a group's offsets or start it over (no members allowed)",
        description="Move the offsets of group NAME as kafka-consumer-groups "
        "--reset-offsets does, for both kinds of group: --to-earliest, --to-latest, "
        "--to-offset N, --shift-by N, --to-datetime, --by-duration, --to-current (one of "
        "them, or the older --to earliest|latest|checkpoint). Each new offset is brought "
        "into its partition's [start, end], as Kafka does. Prints GROUP TOPIC PARTITION "
        "NEW-OFFSET per partition (a reader group: per segment). Writes at once (Kafka's "
        "tool needs --execute): --dry-run prints the plan and writes nothing. Refused "
        "while the group has members, as Kafka does ('not inactive'), a dry run too: stop "
        "them first (a dead one is declared offline after the session timeout, or at once "
        "with `folio group offline`). A Kafka consumer group (--kind kafka, or the only "
        "group of that name): its committed offsets, for --topic TOPIC[:P,P] or every "
        "topic it committed; --to-datetime / --by-duration take each partition's first "
        "offset with a timestamp at or after the time (ListOffsets by time), its end if "
        "none. A Kafka share group (KIP-932): its share partitions' start offsets, as "
        "AlterShareGroupOffsets moves them (every share partition it has without --topic), "
        "refused until its share consumers are closed. A reader group: --to-earliest / "
        "--to-latest / --to checkpoint start it over "
        "as a whole (every topic's first segments or ends, or a completed checkpoint); "
        "--to-offset, --shift-by, --to-current move the positions it records (per segment, "
        "event offsets; --topic TOPIC[:SEGMENT,...] chooses); --to-datetime and "
        "--by-duration are refused (no offset-by-time lookup for its segments).")
    reset.add_argument("name", metavar="NAME", help="the group's name")
    add_reset_options(reset)
    reset.add_argument("--kind", choices=("reader", "kafka"), default=None,
                       help="the kind of group NAME is (needed when it is both)")
    add_endpoint_option(reset)
    reset.set_defaults(func=_reset)

    offline = commands.add_parser(
        "offline", help="declare a member offline now",
        description="Declare member READER of reader group NAME offline without waiting "
        "for its session timeout (it is dead, say). Its segments go back to the group at "
        "the last position it reported (or the recorded one): at-least-once, nothing "
        "skipped. If it is in fact alive it stops at its next sync.")
    offline.add_argument("name", metavar="NAME", help="the group's name")
    offline.add_argument("reader", metavar="READER", help="the member's reader id")
    add_endpoint_option(offline)
    offline.set_defaults(func=_offline)

    delete = commands.add_parser(
        "delete", help="delete a reader group or a Kafka consumer group",
        description="Delete reader group NAME (its positions and checkpoints). Refused while "
        "it has members unless --force (its members then fail at their next sync). A Kafka "
        "consumer group (--kind kafka, or the only group of that name) is deleted with its "
        "committed offsets, only once it has no consumers (as Kafka: no --force).")
    delete.add_argument("name", metavar="NAME", help="the group's name")
    delete.add_argument("--force", action="store_true",
                        help="a reader group: delete even with members online")
    delete.add_argument("--kind", choices=("reader", "kafka"), default=None,
                        help="the kind of group NAME is (needed when it is both)")
    add_endpoint_option(delete)
    delete.set_defaults(func=_delete)
