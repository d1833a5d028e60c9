"""``folio topic create|list|describe|delete``: topic administration through the SDK."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import folio
from folio.cli._common import (
    add_endpoint_option,
    limit_or_unlimited,
    positive_int,
    run_with_client,
)

__all__ = ["register", "topic_json"]

#: Config keys in the order ``describe`` prints them.
_CONFIG_KEYS = ("retention_ms", "retention_bytes", "max_event_bytes",
                "ledger_rollover_bytes", "ledger_rollover_ms")


def topic_json(topic: folio.TopicInfo) -> dict[str, Any]:
    """The stable machine-readable form of a topic (``folio topic describe --json``)."""
    return {
        "name": topic.name,
        "created_ms": topic.created_ms,
        "config": {key: getattr(topic.config, key) for key in _CONFIG_KEYS},
        "segments": [
            {
                "name": segment.name,
                "number": segment.number,
                "key_low": segment.key_low,
                "key_high": segment.key_high,
                "sealed": segment.sealed,
                "start_offset": segment.start_offset,
                "end_offset": segment.end_offset,
            }
            for segment in topic.segments
        ],
    }


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _print_topic(topic: folio.TopicInfo) -> None:
    print(f"topic {topic.name} (created {_utc(topic.created_ms)})")
    print("config:")
    for key in _CONFIG_KEYS:
        value = getattr(topic.config, key)
        unlimited = " (no limit)" if value == -1 and key.startswith("retention_") else ""
        print(f"  {key:<22} {value}{unlimited}")
    rows = [("SEGMENT", "KEY RANGE", "START OFFSET", "END OFFSET", "SEALED")]
    rows += [(s.name, f"[{s.key_low:.6g}, {s.key_high:.6g})", str(s.start_offset),
              str(s.end_offset), "yes" if s.sealed else "no") for s in topic.segments]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(f"segments ({len(topic.segments)}):")
    for row in rows:
        print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip())


def _create(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        topic = client.create_topic(
            args.name, args.segments, retention_ms=args.retention_ms,
            retention_bytes=args.retention_bytes, max_event_bytes=args.max_event_bytes,
        )
        config = ", ".join(f"{key} {getattr(topic.config, key)}" for key in _CONFIG_KEYS)
        print(f"created topic {topic.name} with {len(topic.segments)} segment"
              f"{'' if len(topic.segments) == 1 else 's'} ({config})")
        return 0

    return run_with_client("folio topic create", args, body)


def _list(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        for topic in sorted(client.list_topics(), key=lambda t: t.name):
            active = sum(1 for segment in topic.segments if not segment.sealed)
            print(f"{topic.name}\t{active}")
        return 0

    return run_with_client("folio topic list", args, body)


def _describe(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        topic = client.get_topic(args.name)
        if args.json:
            json.dump(topic_json(topic), sys.stdout, indent=2)
            print()
        else:
            _print_topic(topic)
        return 0

    return run_with_client("folio topic describe", args, body)


def _delete(args: argparse.Namespace) -> int:
    def body(client: folio.Client) -> int:
        client.delete_topic(args.name)
        print(f"deleted topic {args.name}")
        return 0

    return run_with_client("folio topic delete", args, body)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio topic`` and its sub-commands."""
    parser = subparsers.add_parser(
        "topic", help="create, list, describe and delete topics",
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
    add_endpoint_option(create)
    create.set_defaults(func=_create)

    list_ = commands.add_parser(
        "list", help="list topics",
        description="Print every topic, one per line, sorted: its name, a tab, and its "
        "number of active (unsealed) segments.",
    )
    add_endpoint_option(list_)
    list_.set_defaults(func=_list)

    describe = commands.add_parser(
        "describe", help="show a topic's config and segments",
        description="Show topic NAME: its config, and each segment with its routing-key "
        "range [low, high), its start offset (first retained) and end offset (next to "
        "be written), and whether it is sealed.",
    )
    describe.add_argument("name", metavar="NAME", help="the topic's name")
    describe.add_argument("--json", action="store_true",
                          help="print one JSON object with stable keys: name, created_ms, "
                          "config {retention_ms, retention_bytes, max_event_bytes, "
                          "ledger_rollover_bytes, ledger_rollover_ms}, segments [{name, "
                          "number, key_low, key_high, sealed, start_offset, end_offset}]")
    add_endpoint_option(describe)
    describe.set_defaults(func=_describe)

    delete = commands.add_parser(
        "delete", help="delete a topic and its events",
        description="Delete topic NAME and all its events. This cannot be undone.",
    )
    delete.add_argument("name", metavar="NAME", help="the topic's name")
    add_endpoint_option(delete)
    delete.set_defaults(func=_delete)
