"""After the faults: read everything back independently and check every promise.

The history (what writers were told, what transactions ended as, what the
group's members read) is compared with the segments as a fresh reader sees
them, up to the segments' end offsets:

- lost: an acknowledged event not stored; misplaced: stored elsewhere than
  its acknowledgement said; doubled: any writer event stored twice (an
  uncertain one, whose future failed, may be stored once or not at all);
- order: each writer's events of a key stored in the order written;
- transactions: none left unfinished (COMMITTING, ABORTING, OPEN), every
  committed one visible whole to ``read_committed``, no aborted one visible;
- progress: ``read_committed`` readers and the group reach a sentinel
  written to every segment after the faults (a transaction stuck open or
  aborting would hold them back);
- coverage: the group's members together read every committed event.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import folio
from folio.read.reader import Isolation
from tests.nemesis.workload import TxnRecord, TxnWriter, Writers
from tests.support.catch_up import read_to_sentinels

__all__ = ["Report", "check"]

TERMINAL = {"COMMITTED", "ABORTED", "TIMED_OUT"}


@dataclass
class Report:
    """The run's figures and its failures (empty: every promise held)."""

    acknowledged: int = 0
    uncertain: int = 0
    lost: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    duplicate_acks: int = 0
    doubled: list[str] = field(default_factory=list)
    disorder: list[str] = field(default_factory=list)
    committed: int = 0
    aborted: int = 0
    stuck: list[str] = field(default_factory=list)
    txn_broken: list[str] = field(default_factory=list)
    progress: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stalls_ms: dict[str, float] = field(default_factory=dict)
    kafka_delivered: int = 0
    kafka_failures: dict[str, list[str]] = field(default_factory=dict)

    def failures(self) -> dict[str, list[str]]:
        found = {"lost": self.lost, "misplaced": self.misplaced, "doubled": self.doubled,
                 "disorder": self.disorder, "stuck transactions": self.stuck,
                 "transactions": self.txn_broken, "progress": self.progress,
                 "coverage": self.coverage}
        return {**{name: items[:10] for name, items in found.items() if items},
                **self.kafka_failures}


def _final_status(client: folio.Client, record: TxnRecord, timeout_s: float) -> str:
    """The transaction's status once terminal, else what was last seen at the deadline."""
    deadline = time.monotonic() + timeout_s
    status, error_text = record.status, ""
    while True:
        try:
            status, error_text = client.transaction_status(
                bytes.fromhex(record.txn_id)).value, ""
        except folio.TxnNotFoundError:
            return "NOT_FOUND"  # began, then lost before anything of it was logged
        except folio.FolioError as error:
            error_text = f" ({type(error).__name__}: {error})"[:300]
        if status in TERMINAL:
            return status
        if time.monotonic() > deadline:
            return f"{status}{error_text} at the deadline"
        time.sleep(0.2)


def _read(client: folio.Client, topic: str, isolation: Isolation, sentinel: bytes,
          report: Report) -> list[folio.Event[Any]]:
    with client.reader(topic, isolation=isolation) as reader:
        try:
            return read_to_sentinels(client, topic, reader, sentinel, timeout_s=120)
        except AssertionError as error:
            report.progress.append(f"{isolation}: {error}")
            return []


def check(endpoint: str, topic: str, writers: Writers, txns: TxnWriter,
          member_payloads: Callable[[], set[str]]) -> Report:
    """Every promise of the module's docstring, against a fresh read of ``topic``."""
    report = Report(acknowledged=len(writers.acked), uncertain=len(writers.uncertain),
                    errors=[*writers.errors, *txns.errors], stalls_ms=writers.stalls_ms())
    with folio.Client(endpoint, timeout_s=60) as client:
        for record in txns.records:
            record.status = _final_status(client, record, 120)
            if record.status not in TERMINAL and record.status != "NOT_FOUND":
                report.stuck.append(f"{record.txn_id} {record.status}")
        everything = _read(client, topic, "read_uncommitted", b"sentinel-1", report)
        visible = _read(client, topic, "read_committed", b"sentinel-2", report)
    stored = Counter(event.payload.decode() for event in everything)
    where = {event.payload.decode(): (event.segment, event.offset) for event in everything}
    for payload, ack in writers.acked.items():
        report.duplicate_acks += ack.offset == -1
        if payload not in stored:
            report.lost.append(payload)
        elif where[payload] != (ack.segment, ack.offset) and not (
                # -1: acknowledged as a duplicate of a lost acknowledgement
                # (documented in folio.WriteResult): stored, offset not repeated.
                ack.offset == -1 and where[payload][0] == ack.segment):
            report.misplaced.append(f"{payload} acked at {ack.segment}@{ack.offset}, "
                                    f"stored at {where[payload]}")
    report.doubled = sorted(p for p, n in stored.items() if n > 1 and not p.startswith("sent"))
    last: dict[str, int] = {}
    for event in everything:
        payload = event.payload.decode()
        if payload.startswith("w"):
            writer_id, key, number = payload.split(":")
            if last.get(f"{writer_id}:{key}", -1) >= int(number):
                report.disorder.append(f"{payload} at {event.segment}@{event.offset}")
            last[f"{writer_id}:{key}"] = int(number)
    seen = Counter(event.payload.decode() for event in visible)
    for record in txns.records:
        if record.status == "COMMITTED":
            report.committed += 1
            counts = {seen[p] for p in record.payloads}
            if counts != {1}:
                report.txn_broken.append(f"committed {record.txn_id}: seen {counts} times")
        elif record.status in ("ABORTED", "TIMED_OUT", "NOT_FOUND"):
            report.aborted += 1
            if any(seen[p] for p in record.payloads):
                report.txn_broken.append(f"aborted {record.txn_id} visible")
    expected = {p for p, n in seen.items() if not p.startswith("sent")}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not expected <= member_payloads():
        time.sleep(0.5)
    missing = expected - member_payloads()
    if missing:
        report.coverage.append(f"{len(missing)} committed events never read by the group, "
                               f"e.g. {sorted(missing)[:3]}")
    by_segment: dict[str, list[int]] = defaultdict(list)
    for event in everything:
        by_segment[event.segment].append(event.offset)
    for segment, offsets in by_segment.items():
        if offsets != sorted(offsets):
            report.disorder.append(f"{segment}: offsets out of order")
    return report
