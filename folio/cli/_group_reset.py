"""``folio group reset``'s options as kafka-consumer-groups --reset-offsets takes them.

One reset for both kinds of group: ``--to-earliest``, ``--to-latest``,
``--to-offset N``, ``--shift-by N``, ``--to-datetime``, ``--by-duration``,
``--to-current`` (and the older ``--to earliest|latest|checkpoint``) are
parsed here into a ``Move``; ``--topic TOPIC[:P,P...]`` into topics and
(topic, partition)s; ``--dry-run`` prints the plan and writes nothing. Every
reset prints the same table, GROUP TOPIC PARTITION NEW-OFFSET, as Kafka's
tool does (``--json``: the same rows). A Kafka group's offsets are computed
and written by the broker (``KafkaGroup.reset``); a reader group's
positions by the SDK (``ReaderGroup.move_positions``), which cannot look up
an offset by time (``--to-datetime``, ``--by-duration`` are refused there).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from folio.cli._group_kafka import table
from folio.errors import InvalidArgumentError

__all__ = ["Move", "add_reset_options", "move_of", "print_plan", "targets"]

_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?(Z|[+-]\d{2}:\d{2})?")
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,9})?)S)?)?")
_PARTITIONS = re.compile(r"\d+(,\d+)*")


@dataclass(frozen=True, slots=True)
class Move:
    """Where a reset moves each offset: ``to`` (``KafkaGroup.reset``'s, or ``checkpoint``),
    ``value`` (offset, shift or ms since the epoch), ``said``: the option as given,
    ``checkpoint``: ``--checkpoint``'s name."""

    to: str
    value: int
    said: str
    checkpoint: str | None = None


def parse_datetime(text: str) -> int:
    """``--to-datetime``: ms since the epoch (no zone: this machine's, as Kafka's tool)."""
    if _DATETIME.fullmatch(text) is None:
        raise InvalidArgumentError(f"--to-datetime {text!r}: expected "
                                   "YYYY-MM-DDTHH:mm:SS[.sss][Z|+hh:mm|-hh:mm]")
    try:
        at = datetime.datetime.fromisoformat(text)
    except ValueError as error:
        raise InvalidArgumentError(f"--to-datetime {text!r}: {error}") from None
    return int(at.timestamp() * 1000)


def parse_duration(text: str, now_ms: int) -> int:
    """``--by-duration PnDTnHnMnS``: ``now_ms`` minus it, in ms since the epoch."""
    found = _DURATION.fullmatch(text)
    if found is None or text in ("P", "PT") or text.endswith("T"):
        raise InvalidArgumentError(f"--by-duration {text!r}: expected an ISO-8601 duration "
                                   "PnDTnHnMnS (e.g. P1DT2H, PT30M, PT1.5S)")
    days, hours, minutes, seconds = (float(part or 0) for part in found.groups())
    span = datetime.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    return now_ms - int(span.total_seconds() * 1000)


def move_of(args: argparse.Namespace) -> Move:
    """The move the options ask for (exactly one is given: argparse checks)."""
    if args.to == "checkpoint":
        said = "its latest completed checkpoint" if args.checkpoint is None \
            else f"checkpoint {args.checkpoint}"
        return Move("checkpoint", 0, said, args.checkpoint)
    if args.to is not None:
        return Move(args.to, 0, args.to)
    if args.to_earliest:
        return Move("earliest", 0, "earliest")
    if args.to_latest:
        return Move("latest", 0, "latest")
    if args.to_current:
        return Move("current", 0, "current")
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise InvalidArgumentError(f"--to-offset {args.to_offset}: must be 0 or more")
        return Move("offset", args.to_offset, f"offset {args.to_offset}")
    if args.shift_by is not None:
        return Move("shift", args.shift_by, f"a shift of {args.shift_by:+d}")
    now_ms = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
    if args.to_datetime is not None:
        at = parse_datetime(args.to_datetime)
        return Move("timestamp", at, f"the first offset at or after {args.to_datetime}")
    at = parse_duration(args.by_duration, now_ms)
    return Move("timestamp", at, f"the first offset at or after {args.by_duration} ago")


def targets(given: Sequence[str] | None) -> tuple[list[str], list[tuple[str, int]]]:
    """``--topic`` values: whole topics, and (topic, partition)s of ``TOPIC:P,P``."""
    topics: list[str] = []
    partitions: list[tuple[str, int]] = []
    for text in given or ():
        topic, colon, numbers = text.rpartition(":")
        if not colon:
            topics.append(text)
        elif topic and _PARTITIONS.fullmatch(numbers):
            partitions += [(topic, int(n)) for n in numbers.split(",")]
        else:
            raise InvalidArgumentError(f"--topic {text!r}: expected TOPIC or TOPIC:P[,P...] "
                                       "(partition numbers)")
    return topics, partitions


def print_plan(kind: str, group: str, move: Move, rows: Sequence[tuple[str, int, int]],
               dry_run: bool, as_json: bool) -> None:
    """The reset's table (GROUP TOPIC PARTITION NEW-OFFSET, as Kafka's tool) or JSON."""
    if as_json:
        json.dump({"group": group, "kind": kind, "dry_run": dry_run, "to": move.said,
                   "offsets": [{"topic": t, "partition": p, "new_offset": o}
                               for t, p, o in rows]}, sys.stdout, indent=2)
        print()
        return
    what = "Kafka consumer group" if kind == "kafka" else "reader group"
    if dry_run:
        print(f"{what} {group} would be reset to {move.said} (dry run: nothing written):")
    else:
        print(f"{what} {group} reset to {move.said}:")
    table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] +
          [(group, t, str(p), str(o)) for t, p, o in rows])


def add_reset_options(reset: argparse.ArgumentParser) -> None:
    """``folio group reset``'s options: one move, the topics, --dry-run, --json."""
    moves = reset.add_mutually_exclusive_group(required=True)
    moves.add_argument("--to", choices=("earliest", "latest", "checkpoint"), default=None,
                       help="where the group starts over (checkpoint: a reader group's latest "
                       "completed checkpoint, or --checkpoint)")
    moves.add_argument("--to-earliest", action="store_true",
                       help="each partition's (segment's) first retained offset")
    moves.add_argument("--to-latest", action="store_true",
                       help="each partition's end offset (only events written from now on)")
    moves.add_argument("--to-offset", type=int, metavar="N", default=None,
                       help="offset N in every partition, brought into its [start, end]")
    moves.add_argument("--shift-by", type=int, metavar="N", default=None,
                       help="each committed offset (reader group: position) moved by N "
                       "(negative: back), brought into [start, end]; a Kafka partition with "
                       "nothing committed is refused")
    moves.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", default=None,
                       help="Kafka groups: the first offset whose timestamp is at or after "
                       "it, the end if none (ListOffsets by time); optional Z or +hh:mm, "
                       "else local time")
    moves.add_argument("--by-duration", metavar="PnDTnHnMnS", default=None,
                       help="Kafka groups: as --to-datetime, at now minus this ISO-8601 "
                       "duration (P1D, PT2H30M, PT10S)")
    moves.add_argument("--to-current", action="store_true",
                       help="the committed offsets as they are (a Kafka partition with none: "
                       "its end); useful with --topic to fill in missing ones")
    reset.add_argument("--checkpoint", metavar="CHECKPOINT", default=None,
                       help="with --to checkpoint: this completed checkpoint instead of the "
                       "latest")
    reset.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]", default=None,
                       help="only this topic, or these partitions of it (repeat for more; "
                       "default: every topic the group committed or reads). Not with "
                       "--to/--to-earliest/--to-latest of a reader group, which starts "
                       "over as a whole")
    runs = reset.add_mutually_exclusive_group()
    runs.add_argument("--dry-run", action="store_true",
                      help="print the new offsets, write nothing (refused with members too)")
    runs.add_argument("--execute", action="store_true",
                      help="write the new offsets: the default here (kafka-consumer-groups "
                      "needs it; accepted for scripts written for it)")
    reset.add_argument("--json", action="store_true",
                       help="print {group, kind, dry_run, to, offsets [{topic, partition, "
                       "new_offset}]} instead of the table")
