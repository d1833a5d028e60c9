"""``folio topic scale``: seal segments and create successors, by ranges or by --split/--merge.

``--seal`` with ``--ranges`` says everything explicitly (ranges as printed by
``topic describe``, which prints each bound as Python's exact ``repr`` of the
float, so a pasted range is the broker's range to the last bit). ``--split
SEG [--parts N]`` and ``--merge SEG,SEG...`` compute the ranges from the
topic's current segments for the two common cases.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Sequence

import folio
from folio.cli._common import add_endpoint_option, fail, positive_int, run_with_client
from folio.errors import InvalidArgumentError

__all__ = ["format_range", "merge_range", "range_list", "register", "segment_list",
           "split_ranges"]

PROG = "folio topic scale"


def format_range(low: float, high: float) -> str:
    """``[low, high)`` with each bound exact (``repr``), pasteable into ``--ranges``."""
    return f"[{low!r}, {high!r})"


def segment_list(text: str) -> list[str]:
    """``--seal``/``--merge``: segment numbers or names, comma-separated (argparse type)."""
    items = [item.strip() for item in text.split(",")]
    if not items or any(not item for item in items):
        raise argparse.ArgumentTypeError(
            f"expected SEGMENT[,SEGMENT...] (numbers or <topic>/<number> names), got {text!r}")
    return items


def _split_low_high(item: str) -> tuple[str, str]:
    """``LOW-HIGH`` at the one '-' that is neither a leading sign nor an exponent's sign."""
    cuts = [i for i, char in enumerate(item)
            if char == "-" and i > 0 and item[i - 1] not in "eE-"]
    if len(cuts) != 1:
        raise ValueError(item)
    return item[:cuts[0]], item[cuts[0] + 1:]


def range_list(text: str) -> list[tuple[float, float]]:
    """``--ranges``: ``LOW-HIGH[,LOW-HIGH...]`` key ranges (argparse type).

    Bounds are any float Python reads, ``1e-05`` included.
    """
    ranges = []
    for item in text.split(","):
        try:
            low, high = _split_low_high(item.strip())
            ranges.append((float(low), float(high)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected LOW-HIGH[,LOW-HIGH...] like 0.0-0.5,0.5-1.0, got {text!r}") from None
    return ranges


def split_ranges(low: float, high: float, parts: int) -> list[tuple[float, float]]:
    """``[low, high)`` cut into ``parts`` equal ranges, ending exactly at ``low`` and ``high``."""
    bounds = [low + (high - low) * i / parts for i in range(parts)] + [high]
    return list(itertools.pairwise(bounds))


def merge_range(segments: Sequence[folio.SegmentRange]) -> tuple[float, float]:
    """The one range covering neighbouring ``segments``; InvalidArgumentError if they are not."""
    ordered = sorted(segments, key=lambda s: s.key_low)
    for before, after in itertools.pairwise(ordered):
        if before.key_high != after.key_low:
            raise InvalidArgumentError(
                f"segments {before.name} {format_range(before.key_low, before.key_high)} and "
                f"{after.name} {format_range(after.key_low, after.key_high)} are not "
                "neighbours; only adjacent key ranges can be merged")
    return ordered[0].key_low, ordered[-1].key_high


def _full_names(topic: str, items: Sequence[str]) -> list[str]:
    return [item if "/" in item else f"{topic}/{item}" for item in items]


def _open_segments(client: folio.Client, topic: str,
                   names: Sequence[str]) -> list[folio.SegmentRange]:
    by_name = {s.name: s for s in client.get_segments(topic)}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise InvalidArgumentError(
            f"{', '.join(missing)}: not an open segment of topic {topic!r} (open: "
            f"{', '.join(sorted(by_name, key=lambda n: by_name[n].number))})")
    return [by_name[name] for name in names]


def _plan(client: folio.Client, args: argparse.Namespace
          ) -> tuple[list[str], list[tuple[float, float]]]:
    """The segments to seal and the new ranges, from whichever form was given."""
    if args.split is not None:
        seal = _full_names(args.name, [args.split])
        (segment,) = _open_segments(client, args.name, seal)
        return seal, split_ranges(segment.key_low, segment.key_high, args.parts)
    if args.merge is not None:
        seal = _full_names(args.name, args.merge)
        if len(set(seal)) < 2:
            raise InvalidArgumentError("--merge needs at least two different segments")
        return seal, [merge_range(_open_segments(client, args.name, seal))]
    return _full_names(args.name, args.seal), args.ranges


def _scale(args: argparse.Namespace) -> int:
    if args.seal is not None and args.ranges is None:
        args.usage_error("--seal needs --ranges (or use --split SEG or --merge SEG,SEG)")
    if args.seal is None and args.ranges is not None:
        args.usage_error("--ranges goes with --seal")
    if args.parts != 2 and args.split is None:
        args.usage_error("--parts goes with --split")

    def body(client: folio.Client) -> int:
        try:
            seal, ranges = _plan(client, args)
        except InvalidArgumentError as error:
            return fail(PROG, str(error))
        result = client.scale_topic(args.name, seal, ranges)
        print(f"scaled topic {args.name}: sealed {len(result.sealed)}, "
              f"created {len(result.created)}")
        print_segments([*result.sealed, *result.created])
        return 0

    return run_with_client(PROG, args, body)


def _numbers(names: Sequence[str]) -> str:
    return ",".join(name.rpartition("/")[2] for name in names) or "-"


def print_segments(segments: Sequence[folio.SegmentRange], *, indent: str = "  ") -> None:
    """A table of segments with exact key ranges (shared with ``topic describe``).

    OWNER is the broker serving the segment as the answer said (Kafka's
    Leader column), ``-`` when none does (a sealed segment, a container being
    handed over).
    """
    rows = [("SEGMENT", "KEY RANGE", "STATE", "START OFFSET", "END OFFSET", "LENGTH",
             "PREDECESSORS", "SUCCESSORS", "OWNER")]
    rows += [(s.name, format_range(s.key_low, s.key_high),
              "sealed" if s.sealed else "open", str(s.start_offset), str(s.end_offset),
              str(s.length), _numbers(s.predecessors), _numbers(s.successors),
              s.owner or "-")
             for s in segments]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(indent + "  ".join(cell.ljust(width)
                                 for cell, width in zip(row, widths, strict=True)).rstrip())


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio topic scale``."""
    scale = commands.add_parser(
        "scale", help="seal segments and create successors (split, merge)",
        description="Seal segments of topic NAME and create successors whose key ranges "
        "exactly cover the sealed ones: one segment into several is a split, neighbours "
        "into one a merge. Writers and readers follow by themselves, in per-key order. "
        "Common cases: --split SEG (two equal halves; --parts N for N) and --merge "
        "SEG,SEG (neighbouring segments into one). General form: --seal SEGMENTS --ranges "
        "RANGES, where ranges can be pasted from `folio topic describe` (which prints "
        "exact bounds). Examples: folio topic scale orders --split 0; folio topic scale "
        "orders --merge 1,2; folio topic scale orders --seal 0 --ranges 0.0-0.25,0.25-0.5",
    )
    scale.add_argument("name", metavar="NAME", help="the topic's name")
    how = scale.add_mutually_exclusive_group(required=True)
    how.add_argument("--seal", type=segment_list, metavar="SEGMENT[,SEGMENT...]",
                     help="the open segments to seal, by number (0) or name (orders/0); "
                     "needs --ranges")
    how.add_argument("--split", metavar="SEGMENT",
                     help="split this open segment into --parts equal key ranges")
    how.add_argument("--merge", type=segment_list, metavar="SEGMENT,SEGMENT[,...]",
                     help="merge these open, neighbouring segments into one")
    scale.add_argument("--ranges", type=range_list, metavar="LOW-HIGH[,LOW-HIGH...]",
                       help="with --seal: the new segments' routing-key ranges [LOW, HIGH), "
                       "e.g. 0.0-0.5,0.5-1.0; together exactly the sealed segments' ranges")
    scale.add_argument("--parts", type=_at_least_two, default=2, metavar="N",
                       help="with --split: how many equal parts (default 2)")
    add_endpoint_option(scale)
    usage_error: Callable[[str], None] = scale.error
    scale.set_defaults(func=_scale, usage_error=usage_error)


def _at_least_two(text: str) -> int:
    value = positive_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2, got {text}")
    return value
