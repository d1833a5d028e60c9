"""Where the broker's CPU per event goes, PLAINTEXT against SASL_SSL (Linux perf).

``python -m bench.kafka_tls_perf``: the two standalones of
``python -m bench.kafka --security`` (one PLAINTEXT
Kafka listener, one SASL_SSL), librdkafka producing for ``--duration-s``
into a fresh 1-partition topic of each and reading it back, as that bench
does; while each step runs, Linux ``perf record -F 1999 -p PID`` samples
the broker's CPU (every thread, native code included: OpenSSL, the
interpreter, libc's copies, the kernel). It prints, per step and listener,
the broker's CPU per event by shared object (``perf report --sort dso``),
and the difference SASL_SSL makes: what TLS itself costs (``libcrypto``,
``libssl``) and what it costs around it.

py-spy cannot tell this apart: a thread that released the GIL for
``SSLObject.read`` and waits to take it back shows as busy in that call.

Needs ``perf`` on the PATH and the right to attach to the broker (root, or
``kernel.perf_event_paranoid`` at most 1).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench._kafka_secured import _secured, _start
from bench.kafka import kafka_consume, kafka_produce

__all__ = ["main"]

_FREQUENCY_HZ = 1999


def _record(pid: int, path: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        ["perf", "record", "-q", "-F", str(_FREQUENCY_HZ), "-p", str(pid), "-o", str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # attached before the step starts
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    process.wait(60)


def _by_object(path: Path) -> Counter[str]:
    """Samples by shared object in one ``perf.data``."""
    report = subprocess.run(
        ["perf", "report", "-i", str(path), "--no-children", "--sort", "dso", "--stdio",
         "-F", "sample,dso"], capture_output=True, text=True, check=True).stdout
    samples: Counter[str] = Counter()
    for line in report.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        count, name = line.split(None, 1)
        samples[name.strip()] += int(count)
    return samples


def run(size: int, duration_s: float, rounds: int) -> list[dict[str, Any]]:
    """Per round, step and listener: events and broker µs per event by shared object."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="folio-kafka-tls-perf-") as directory:
        root = Path(directory)
        plain, plain_bootstrap = _start(root / "plain")
        secured, secured_bootstrap, settings = _secured(root / "secured")
        listeners: tuple[tuple[str, subprocess.Popen[str], str, dict[str, Any]], ...] = (
            ("plaintext", plain, plain_bootstrap, {}),
            ("sasl_ssl", secured, secured_bootstrap, settings))
        try:
            for number in range(rounds):
                for name, process, bootstrap, extra in listeners:
                    topic = f"{name}-{number}"
                    produced = root / f"{topic}-produce.data"
                    recorder = _record(process.pid, produced)
                    rate, count = kafka_produce(bootstrap, topic, size, duration_s, extra)
                    _stop(recorder)
                    consumed = root / f"{topic}-consume.data"
                    recorder = _record(process.pid, consumed)
                    read = kafka_consume(bootstrap, topic, count, extra)
                    _stop(recorder)
                    for step, path, events_per_s in (("produce", produced, rate),
                                                     ("consume", consumed, read)):
                        samples = _by_object(path)
                        rows.append({
                            "round": number, "listener": name, "step": step,
                            "size_bytes": size, "events": count,
                            "events_per_s": events_per_s,
                            "us_per_event": {
                                dso: n / _FREQUENCY_HZ / count * 1e6
                                for dso, n in samples.most_common()}})
        finally:
            for _name, process, _bootstrap, _extra in listeners:
                process.terminate()
                process.wait(60)
    return rows


def table(rows: list[dict[str, Any]], top: int = 6) -> str:
    """Per round and step: µs per event by shared object, both listeners and the difference."""
    lines: list[str] = []
    keyed = {(row["round"], row["step"], row["listener"]): row for row in rows}
    for number, step in sorted({(row["round"], row["step"]) for row in rows}):
        plain = keyed[(number, step, "plaintext")]["us_per_event"]
        secured = keyed[(number, step, "sasl_ssl")]["us_per_event"]
        names = sorted(set(plain) | set(secured),
                       key=lambda dso: -max(plain.get(dso, 0.0), secured.get(dso, 0.0)))
        lines += [f"round {number}, {step} ({keyed[(number, step, 'plaintext')]['size_bytes']}"
                  " B events), broker CPU per event:", "",
                  "| shared object | PLAINTEXT | SASL_SSL | difference |", "|---|---|---|---|"]
        for dso in names[:top]:
            a, b = plain.get(dso, 0.0), secured.get(dso, 0.0)
            lines.append(f"| {dso} | {a:.2f} µs | {b:.2f} µs | {b - a:+.2f} µs |")
        a, b = sum(plain.values()), sum(secured.values())
        lines += [f"| all | {a:.2f} µs | {b:.2f} µs | {b - a:+.2f} µs |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_tls_perf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1024, help="event size (default 1024)")
    parser.add_argument("--duration-s", type=float, default=3.0,
                        help="seconds each producer writes (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        parser.error("needs Linux perf on the PATH (linux-perf / linux-tools)")
    rows = run(args.size, args.duration_s, max(args.rounds, 1))
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
