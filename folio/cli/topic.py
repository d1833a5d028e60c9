"""``folio topic create|list|describe|alter|truncate|scale|seal|delete``: topic administration.

``scale`` lives in :mod:`folio.cli._topic_scale`, ``alter`` and ``truncate``
in :mod:`folio.cli._topic_change`; this module registers them with the rest.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import folio
from folio.cli import _topic_change, _topic_scale
from folio.cli._common import (
    add_endpoint_option,
    limit_or_unlimited,
    non_negative_int,
    positive_int,
    run_with_client,
)
from folio.cli._topic_scale import print_segments, range_list, segment_list
from folio.errors import TopicExistsError

__all__ = ["range_list", "register", "segment_list", "topic_json"]

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
        "owner": segment.owner or None,
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
    print_segments(segments)


def _create(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        try:
            topic = _create_topic(client, args)
        except TopicExistsError:
            if not args.if_not_exists:
                raise
            topic = client.get_topic(args.name)
            count = len(topic.segments)
            print(f"topic {topic.name} exists already ({count} open "
                  f"segment{'' if count == 1 else 's'}); left as it is")
            return 0
        config = ", ".join(f"{key} {getattr(topic.config, key)}" for key in _CONFIG_KEYS)
        print(f"created topic {topic.name} with {len(topic.segments)} segment"
              f"{'' if len(topic.segments) == 1 else 's'} ({config})")
        return 0

    return run_with_client("folio topic create", args, body)


def _create_topic(client: folio.Client, args: argparse.Namespace) -> folio.TopicInfo:
    return client.create_topic(
        args.name, args.segments, retention_ms=args.retention_ms,
        retention_bytes=args.retention_bytes, max_event_bytes=args.max_event_bytes,
        scale_target_events_per_s=args.scale_target_events_per_s,
        scale_min_segments=args.scale_min_segments,
        scale_cooldown_ms=args.scale_cooldown_ms,
    )


def _list(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        topics = sorted(client.list_topics(include_internal=args.internal),
                        key=lambda t: t.name)
        if args.json:
            json.dump([topic_json(topic) for topic in topics], sys.stdout, indent=2)
            print()
            return 0
        for topic in topics:
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
        "defaults. An existing NAME is an error (exit 1) unless --if-not-exists.",
    )
    create.add_argument("name", metavar="NAME", help="the topic's name, Kafka's rule: 1 to 249 "
                        "of [A-Za-z0-9._-], not . or .. (a name starting with - after --)")
    create.add_argument("--if-not-exists", action="store_true",
                        help="if NAME exists already, leave it as it is (whatever its "
                        "segments and config) and exit 0, like kafka-topics "
                        "--if-not-exists; scripts can then be run twice")
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
        "number of active (unsealed) segments. System topics are left out (see --internal).",
    )
    list_.add_argument("--internal", action="store_true",
                       help="also list the broker's system topics (names starting with "
                       "__folio_, and _txnlog, _txncommitkeys, _txnbuffer_snapshots, "
                       "_kafka_offsets, _kafka_txn_state); they can be read for diagnosis, "
                       "never written")
    list_.add_argument("--json", action="store_true",
                       help="print one JSON array of topics, sorted by name, each as "
                       "`topic describe --json` prints it but with only its active "
                       "segments")
    add_endpoint_option(list_)
    list_.set_defaults(func=_list)

    describe = commands.add_parser(
        "describe", help="show a topic's config and segments",
        description="Show topic NAME: its config, and every segment it ever had (sealed "
        "ones too, by number) with its routing-key range [low, high) (exact: each bound "
        "as Python's repr of the float, so it can be pasted into `topic scale --ranges`), "
        "its state (open or "
        "sealed), start offset (first retained), end offset (next to be written; final once "
        "sealed), length (end - start), its predecessors and successors across scaling, "
        "and its owner: the broker serving it (as Kafka's Leader; '-' for none).",
    )
    describe.add_argument("name", metavar="NAME", help="the topic's name")
    describe.add_argument("--json", action="store_true",
                          help="print one JSON object with stable keys: name, created_ms, "
                          "sealed, config {retention_ms, retention_bytes, max_event_bytes, "
                          "ledger_rollover_bytes, ledger_rollover_ms, "
                          "scale_target_events_per_s, scale_min_segments, scale_cooldown_ms}, "
                          "segments [{name, number, key_low, key_high, state, sealed, "
                          "start_offset, end_offset, length, predecessors, successors, owner "
                          "(host:port or null)}]")
    add_endpoint_option(describe)
    describe.set_defaults(func=_describe)

    _topic_scale.register(commands)
    _topic_change.register(commands)

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
