"""``folio topic create|list|describe|scale|seal|delete``: topic administration through the SDK."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import folio
from folio.cli._common import (
    add_endpoint_option,
    limit_or_unlimited,
    non_negative_int,
    positive_int,
    run_with_client,
)

__all__ = ["register", "topic_json"]

#: Config keys in the order ``describe`` prints them.
_CONFIG_KEYS = ("retention_ms", "retention_bytes", "max_event_bytes",
                "ledger_rollover_bytes", "ledger_rollover_ms", "scale_target_events_per_s",
                "scale_min_segments", "scale_cooldown_ms")


def segment_json(segment: folio.SegmentRange) -> dict[str, Any]:
    """The stable machine-readable form of a segment."""
    return {
        "name": segment.name,
        "number": segment.number,
        "key_low": segment.key_low,
        "key_high": segment.key_high,
        "state": "sealed" if segment.sealed else "open",
        "sealed": segment.sealed,
        "start_offset": segment.start_offset,
        "end_offset": segment.end_offset,
        "length": segment.end_offset - segment.start_offset,
        "predecessors": list(segment.predecessors),
        "successors": list(segment.successors),
    }


def topic_json(topic: folio.TopicInfo,
               segments: Sequence[folio.SegmentRange] | None = None) -> dict[str, Any]:
    """The stable machine-readable form of a topic (``folio topic describe --json``).

    ``segments``: the ones to list (``describe`` gives every segment, sealed
    ones included); by default the topic's active ones.
    """
    return {
        "name": topic.name,
        "created_ms": topic.created_ms,
        "sealed": topic.sealed,
        "config": {key: getattr(topic.config, key) for key in _CONFIG_KEYS},
        "segments": [segment_json(s) for s in (topic.segments if segments is None
                                                else segments)],
    }


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _numbers(names: Sequence[str]) -> str:
    return ",".join(name.rpartition("/")[2] for name in names) or "-"


def _print_segments(segments: Sequence[folio.SegmentRange], *, indent: str = "  ") -> None:
    rows = [("SEGMENT", "KEY RANGE", "STATE", "START OFFSET", "END OFFSET", "LENGTH",
             "PREDECESSORS", "SUCCESSORS")]
    rows += [(s.name, f"[{s.key_low:.6g}, {s.key_high:.6g})",
              "sealed" if s.sealed else "open", str(s.start_offset), str(s.end_offset),
              str(s.length), _numbers(s.predecessors), _numbers(s.successors))
             for s in segments]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(indent + "  ".join(cell.ljust(width)
                                 for cell, width in zip(row, widths, strict=True)).rstrip())


def _print_topic(topic: folio.TopicInfo, segments: Sequence[folio.SegmentRange]) -> None:
    sealed = ", sealed" if topic.sealed else ""
    print(f"topic {topic.name} (created {_utc(topic.created_ms)}{sealed})")
    print("config:")
    for key in _CONFIG_KEYS:
        value = getattr(topic.config, key)
        unlimited = " (no limit)" if value == -1 and key.startswith("retention_") else ""
        off = " (auto-scaling off)" if value == 0 and key == "scale_target_events_per_s" \
            else ""
        print(f"  {key:<26} {value}{unlimited}{off}")
    active = sum(not s.sealed for s in segments)
    print(f"segments ({len(segments)}, {active} open):")
    _print_segments(segments)


def _create(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        topic = client.create_topic(
            args.name, args.segments, retention_ms=args.retention_ms,
            retention_bytes=args.retention_bytes, max_event_bytes=args.max_event_bytes,
            scale_target_events_per_s=args.scale_target_events_per_s,
            scale_min_segments=args.scale_min_segments,
            scale_cooldown_ms=args.scale_cooldown_ms,
        )
        config = ", ".join(f"{key} {getattr(topic.config, key)}" for key in _CONFIG_KEYS)
        print(f"created topic {topic.name} with {len(topic.segments)} segment"
              f"{'' if len(topic.segments) == 1 else 's'} ({config})")
        return 0

    return run_with_client("folio topic create", args, body)


def _list(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        topics = client.list_topics(include_internal=args.internal)
        for topic in sorted(topics, key=lambda t: t.name):
            active = sum(1 for segment in topic.segments if not segment.sealed)
            print(f"{topic.name}\t{active}")
        return 0

    return run_with_client("folio topic list", args, body)


def _describe(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        topic = client.get_topic(args.name)
        segments = client.get_segments(args.name, include_sealed=True)
        if args.json:
            json.dump(topic_json(topic, segments), sys.stdout, indent=2)
            print()
        else:
            _print_topic(topic, segments)
        return 0

    return run_with_client("folio topic describe", args, body)


def segment_list(text: str) -> list[str]:
    """``--seal``: segment numbers or names, comma-separated (argparse type)."""
    items = [item.strip() for item in text.split(",")]
    if not items or any(not item for item in items):
        raise argparse.ArgumentTypeError(
            f"expected SEGMENT[,SEGMENT...] (numbers or <topic>/<number> names), got {text!r}")
    return items


def range_list(text: str) -> list[tuple[float, float]]:
    """``--ranges``: ``LOW-HIGH[,LOW-HIGH...]`` key ranges (argparse type)."""
    ranges = []
    for item in text.split(","):
        low, sep, high = item.strip().partition("-")
        try:
            if not sep:
                raise ValueError(item)
            ranges.append((float(low), float(high)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected LOW-HIGH[,LOW-HIGH...] like 0.0-0.5,0.5-1.0, got {text!r}") from None
    return ranges


def _scale(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        seal = [item if "/" in item else f"{args.name}/{item}" for item in args.seal]
        result = client.scale_topic(args.name, seal, args.ranges)
        print(f"scaled topic {args.name}: sealed {len(result.sealed)}, "
              f"created {len(result.created)}")
        _print_segments([*result.sealed, *result.created])
        return 0

    return run_with_client("folio topic scale", args, body)


def _seal(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        client.seal_topic(args.name)
        print(f"sealed topic {args.name}: it takes no more events")
        return 0

    return run_with_client("folio topic seal", args, body)


def _delete(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        client.delete_topic(args.name)
        print(f"deleted topic {args.name}")
        return 0

    return run_with_client("folio topic delete", args, body)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio topic`` and its sub-commands."""
    parser = subparsers.add_parser(
        "topic", help="create, list, describe, scale, seal and delete topics",
        description="Administer topics on a broker. Errors (an existing or unknown topic, "
        "an invalid name, no broker) print one line 'folio topic CMD: error: ...' and "
        "exit 1.",
    )
    commands = parser.add_subparsers(dest="topic_command", metavar="COMMAND", required=True)

    create = commands.add_parser(
        "create", help="create a topic",
        description="Create topic NAME with --segments segments splitting the routing-key "
        "space evenly, and print what was created. Options not given take the broker's "
        "defaults.",
    )
    create.add_argument("name", metavar="NAME", help="the topic's name")
    create.add_argument("--segments", type=positive_int, default=1, metavar="N",
                        help="number of segments, the unit of parallelism (default 1)")
    create.add_argument("--retention-ms", type=limit_or_unlimited, metavar="MS",
                        help="delete events older than this, a whole ledger at a time; "
                        "-1 keeps them forever (default: the broker's)")
    create.add_argument("--retention-bytes", type=limit_or_unlimited, metavar="BYTES",
                        help="keep at most about this many bytes per segment, deleting the "
                        "oldest ledgers; -1 for no limit (default: the broker's)")
    create.add_argument("--max-event-bytes", type=positive_int, metavar="BYTES",
                        help="refuse events larger than this (default: the broker's)")
    create.add_argument("--scale-target-events-per-s", type=non_negative_int, metavar="N",
                        help="auto-scaling: split a segment taking more events/s than this, "
                        "merge neighbours taking together less than half; 0 turns it off "
                        "(default: off)")
    create.add_argument("--scale-min-segments", type=positive_int, metavar="N",
                        help="auto-scaling keeps at least this many open segments (default 1)")
    create.add_argument("--scale-cooldown-ms", type=non_negative_int, metavar="MS",
                        help="auto-scaling changes the topic at most once per this long "
                        "(default 60000)")
    add_endpoint_option(create)
    create.set_defaults(func=_create)

    list_ = commands.add_parser(
        "list", help="list topics",
        description="Print every topic, one per line, sorted: its name, a tab, and its "
        "number of active (unsealed) segments.",
    )
    list_.add_argument("--internal", action="store_true",
                       help="also list the broker's system topics (names starting with "
                       "'_': _txnlog, _txncommitkeys, _txnbuffer_snapshots); they can be "
                       "read for diagnosis, never written")
    add_endpoint_option(list_)
    list_.set_defaults(func=_list)

    describe = commands.add_parser(
        "describe", help="show a topic's config and segments",
        description="Show topic NAME: its config, and every segment it ever had (sealed "
        "ones too, by number) with its routing-key range [low, high), its state (open or "
        "sealed), start offset (first retained), end offset (next to be written; final once "
        "sealed), length (end - start) and its predecessors and successors across scaling.",
    )
    describe.add_argument("name", metavar="NAME", help="the topic's name")
    describe.add_argument("--json", action="store_true",
                          help="print one JSON object with stable keys: name, created_ms, "
                          "sealed, config {retention_ms, retention_bytes, max_event_bytes, "
                          "ledger_rollover_bytes, ledger_rollover_ms, "
                          "scale_target_events_per_s, scale_min_segments, scale_cooldown_ms}, "
                          "segments [{name, number, key_low, key_high, state, sealed, "
                          "start_offset, end_offset, length, predecessors, successors}]")
    add_endpoint_option(describe)
    describe.set_defaults(func=_describe)

    scale = commands.add_parser(
        "scale", help="seal segments and create successors (split, merge)",
        description="Seal the --seal segments of topic NAME and create one new segment per "
        "--ranges range. The new ranges must exactly cover the sealed segments' ranges: "
        "one segment into several is a split, neighbours into one a merge. Writers and "
        "readers follow by themselves, in per-key order. Example: folio topic scale orders "
        "--seal 0 --ranges 0.0-0.5,0.5-1.0",
    )
    scale.add_argument("name", metavar="NAME", help="the topic's name")
    scale.add_argument("--seal", type=segment_list, required=True,
                       metavar="SEGMENT[,SEGMENT...]",
                       help="the open segments to seal, by number (0) or name (orders/0)")
    scale.add_argument("--ranges", type=range_list, required=True,
                       metavar="LOW-HIGH[,LOW-HIGH...]",
                       help="the new segments' routing-key ranges [LOW, HIGH), e.g. "
                       "0.0-0.5,0.5-1.0")
    add_endpoint_option(scale)
    scale.set_defaults(func=_scale)

    seal = commands.add_parser(
        "seal", help="seal a topic: no more events",
        description="Seal every open segment of topic NAME without successors: writers "
        "fail from then on, readers read it to its end. Cannot be undone.",
    )
    seal.add_argument("name", metavar="NAME", help="the topic's name")
    add_endpoint_option(seal)
    seal.set_defaults(func=_seal)

    delete = commands.add_parser(
        "delete", help="delete a topic and its events",
        description="Delete topic NAME and all its events. This cannot be undone.",
    )
    delete.add_argument("name", metavar="NAME", help="the topic's name")
    add_endpoint_option(delete)
    delete.set_defaults(func=_delete)
