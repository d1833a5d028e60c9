"""``folio topic alter`` and ``folio topic truncate``: change a topic's config, drop old events.

``alter`` is Kafka's ``kafka-configs --alter --add-config``: only the given
values change (``Client.update_topic_config``). ``truncate`` is Kafka's
``kafka-delete-records``: a segment's events before an offset are deleted,
whole ledgers at a time (``Client.truncate_segment``), so the new start
offset may be below the one asked for.
"""

from __future__ import annotations

import argparse

import folio
from folio.cli._common import (
    add_endpoint_option,
    limit_or_unlimited,
    non_negative_int,
    positive_int,
    run_with_client,
)

__all__ = ["ALTERABLE", "register"]

#: ``alter``'s options: config key -> (argparse type, help).
ALTERABLE = {
    "retention_ms": (limit_or_unlimited, "delete events older than this, a whole ledger at "
                     "a time; -1 keeps them forever"),
    "retention_bytes": (limit_or_unlimited, "keep at most about this many bytes per "
                        "segment; -1 for no limit"),
    "max_event_bytes": (positive_int, "refuse events larger than this from now on"),
    "ledger_rollover_bytes": (positive_int, "roll to a new ledger past this size (retention "
                              "and truncation delete whole ledgers)"),
    "ledger_rollover_ms": (positive_int, "roll to a new ledger past this age"),
    "scale_target_events_per_s": (non_negative_int, "auto-scaling target per segment; 0 "
                                  "turns auto-scaling off"),
    "scale_min_segments": (positive_int, "auto-scaling keeps at least this many open "
                           "segments"),
    "scale_cooldown_ms": (non_negative_int, "auto-scaling changes the topic at most once "
                          "per this long"),
}


def _alter(args: argparse.Namespace) -> int:
    changes = {key: getattr(args, key) for key in ALTERABLE if getattr(args, key) is not None}
    if not changes:
        args.usage_error("give at least one value to change, e.g. --retention-ms 3600000")

    def body(client: folio.Client) -> int:
        topic = client.update_topic_config(args.name, **changes)
        print(f"altered topic {topic.name}: " + ", ".join(
            f"{key} {getattr(topic.config, key)}" for key in changes))
        return 0

    return run_with_client("folio topic alter", args, body)


def _truncate(args: argparse.Namespace) -> int:
    segment = args.segment if "/" in args.segment else f"{args.name}/{args.segment}"

    def body(client: folio.Client) -> int:
        info = client.truncate_segment(segment, args.before).segment
        print(f"truncated segment {segment} before offset {args.before}: start offset now "
              f"{info.start_offset}, end offset {info.end_offset}")
        return 0

    return run_with_client("folio topic truncate", args, body)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio topic alter`` and ``folio topic truncate``."""
    alter = commands.add_parser(
        "alter", help="change some of a topic's config values",
        description="Change the given config values of topic NAME; the others keep "
        "theirs. Prints the changed values as the broker now has them. Example: folio "
        "topic alter orders --retention-ms 3600000 --max-event-bytes 65536",
    )
    alter.add_argument("name", metavar="NAME", help="the topic's name")
    for key, (kind, text) in ALTERABLE.items():
        alter.add_argument(f"--{key.replace('_', '-')}", dest=key, type=kind, default=None,
                           metavar="BYTES" if key.endswith("_bytes") else
                           "MS" if key.endswith("_ms") else "N", help=text)
    add_endpoint_option(alter)
    alter.set_defaults(func=_alter, usage_error=alter.error)

    truncate = commands.add_parser(
        "truncate", help="delete a segment's events before an offset",
        description="Delete the events of one segment of topic NAME before offset "
        "--before, like kafka-delete-records. Storage is freed a whole ledger at a time, "
        "so the new start offset (printed) is the first offset of the oldest ledger kept "
        "and may be below --before; readers never see offsets below it again. An offset "
        "beyond the segment's end is refused. Cannot be undone.",
    )
    truncate.add_argument("name", metavar="NAME", help="the topic's name")
    truncate.add_argument("--segment", required=True, metavar="SEGMENT",
                          help="the segment, by number (0) or name (orders/0)")
    truncate.add_argument("--before", required=True, type=non_negative_int, metavar="OFFSET",
                          help="delete events with offsets below this")
    add_endpoint_option(truncate)
    truncate.set_defaults(func=_truncate)
