"""The nemesis's workload: exactly-once writers and a transactional writer, on threads.

Writers write rounds of one event per key (payload ``w<i>.<generation>:k<j>:<n>``,
routing key ``k<j>``) and wait for each round's acknowledgements, so every
acknowledged event and where it was stored is known. An error that reaches
the application is recorded (it is what the issue counts: transient errors
must not surface) and the payloads it left unacknowledged are *uncertain*:
they may be stored once or not at all, never twice. The writer then goes on
with a new writer id (a new generation).

The transactional writer commits transactions of one event per key and
aborts every fourth. A commit whose outcome is unknown (an error) is
resolved afterwards from ``status()``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import folio

__all__ = ["Ack", "TxnRecord", "TxnWriter", "Writers"]

KEYS = 8


@dataclass(frozen=True)
class Ack:
    """An acknowledged event: where it was stored and when the ack arrived (monotonic)."""

    segment: str
    offset: int
    at: float


@dataclass
class TxnRecord:
    """One transaction: its payloads, what was asked, and the final status (once known)."""

    txn_id: str
    payloads: list[str]
    abort: bool
    status: str = "UNKNOWN"


@dataclass
class Writers:
    """``count`` exactly-once writers on threads until ``stop``."""

    endpoint: str
    topic: str
    count: int = 3
    acked: dict[str, Ack] = field(default_factory=dict)
    uncertain: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True,
                                          name=f"nemesis-writer-{i}")
                         for i in range(self.count)]
        for thread in self._threads:
            thread.start()

    def _run(self, index: int) -> None:
        generation = 0
        while not self._stop.is_set():
            try:
                self._write(index, generation)
            except Exception as error:  # the application saw it: record, go on
                with self._lock:
                    self.errors.append(f"writer {index}: {type(error).__name__}: {error}")
                self._stop.wait(0.5)
            generation += 1

    def _write(self, index: int, generation: int) -> None:
        writer_id = f"w{index}.{generation}"
        with folio.Client(self.endpoint, timeout_s=30) as client, \
                client.writer(self.topic, linger_ms=2, writer_id=writer_id) as writer:
            n = 0
            while not self._stop.is_set():
                round_ = [(f"{writer_id}:k{k}:{n}",
                           writer.write_event(f"{writer_id}:k{k}:{n}".encode(),
                                              routing_key=f"k{k}")) for k in range(KEYS)]
                with self._lock:
                    self.uncertain.update(payload for payload, _ in round_)
                for payload, future in round_:
                    result = future.result(300)
                    with self._lock:
                        self.acked[payload] = Ack(result.segment, result.offset,
                                                  time.monotonic())
                        self.uncertain.discard(payload)
                n += 1

    def count_acked(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(400)
            assert not thread.is_alive(), "a writer did not finish"

    def stalls_ms(self) -> dict[str, float]:
        """The longest gap between two acknowledgements, per segment (ms)."""
        times: dict[str, list[float]] = defaultdict(list)
        with self._lock:
            for ack in self.acked.values():
                times[ack.segment].append(ack.at)
        return {segment: max((b - a for a, b in zip(sorted(t), sorted(t)[1:], strict=False)),
                             default=0.0) * 1000 for segment, t in times.items()}


@dataclass
class TxnWriter:
    """One transactional writer committing (and every fourth time aborting) until ``stop``."""

    endpoint: str
    topic: str
    records: list[TxnRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="nemesis-txn")
        self._thread.start()

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            try:
                with folio.Client(self.endpoint, timeout_s=30) as client, \
                        client.transactional_writer(self.topic, txn_timeout_ms=30_000) as w:
                    while not self._stop.is_set():
                        self._one(w, number)
                        number += 1
            except Exception as error:
                self.errors.append(f"txn writer setup: {type(error).__name__}: {error}")
                self._stop.wait(0.5)

    def _one(self, writer: folio.TransactionalWriter[bytes], number: int) -> None:
        txn = writer.begin()
        record = TxnRecord(txn.txn_id.hex(), [f"t{number}:k{k}" for k in range(KEYS)],
                           abort=number % 4 == 3)
        self.records.append(record)
        try:
            for k, payload in enumerate(record.payloads):
                txn.write_event(payload.encode(), routing_key=f"k{k}")
            # Bounded waits: a flush or commit that never ends is a hang the
            # run reports (as an error that reached the application).
            txn.flush(timeout=120)
            if record.abort:
                txn.abort(timeout=120)  # as the commit: both decide until their deadline
            else:
                txn.commit(timeout=120)
        except Exception as error:
            self.errors.append(f"txn {record.txn_id}: {type(error).__name__}: {error}")
        try:
            record.status = txn.status().value
        except Exception as error:  # resolved again at the end
            self.errors.append(f"txn status {record.txn_id}: {type(error).__name__}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(400)
        assert not self._thread.is_alive(), "the transactional writer did not finish"
