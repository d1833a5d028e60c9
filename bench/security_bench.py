"""What security costs: ``folio perf produce`` over TLS with a token against plain text.

``python -m bench.security_bench`` starts two ``folio standalone`` processes
in the same run, one plain and one secured (TLS with a certificate made on
the fly by ``trustme``, token authentication with a super-user token, so the
permission check runs too), and runs ``folio perf produce`` against them in
alternation (``--rounds`` each, plain first), the same load each time. It
prints, and writes under ``bench/results/``, each run's events/s and the
ratio of the secured median to the plain one. The check is once per call or
stream, so the ratio should be close to 1 (the issue's target: within 10%).
TLS itself costs encryption per byte. Each round also times ``--unary-calls``
GetTopic calls one after another on each server, where the per-call check
(token and permission) weighs most.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trustme

import folio
from bench._standalone import start_standalone
from ledger.security.tokens import create_token

__all__ = ["main"]

_RESULTS = Path(__file__).parent / "results"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _perf(endpoint: str, topic: str, args: argparse.Namespace, *extra: str,
          server_pid: int) -> dict[str, Any]:
    """One ``perf produce`` run; its report plus the CPU the server and the client spent.

    CPU per event is far steadier than events/s on a shared machine: other
    processes slow a run down but do not make it burn more CPU per event.
    """
    server_before = _cpu_s(server_pid)
    client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "folio.cli", "perf", "produce", "--json", "--endpoint",
               endpoint, "--topic", topic, "--segments", str(args.segments),
               "--event-bytes", str(args.event_bytes), "--duration-s", str(args.duration_s),
               "--writers", str(args.writers), *extra]
    done = subprocess.run(command, capture_output=True, text=True, check=False,
                          timeout=args.duration_s * 10 + 120)
    if done.returncode != 0:
        raise RuntimeError(f"perf produce failed: {done.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    events = max(1, result["events"])
    result["server_cpu_us_per_event"] = (_cpu_s(server_pid) - server_before) * 1e6 / events
    result["client_cpu_us_per_event"] = (
        (client_after.ru_utime + client_after.ru_stime)
        - (client_before.ru_utime + client_before.ru_stime)) * 1e6 / events
    return result


def _unary_calls_per_s(make: Callable[[], folio.Client], calls: int) -> float:
    """GetTopic calls per second, one after another, on a warm connection."""
    with make() as client:
        client.get_topic("bench")
        started = time.perf_counter()
        for _ in range(calls):
            client.get_topic("bench")
        return calls / (time.perf_counter() - started)


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """Both servers, ``args.rounds`` alternating runs each; the report."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    ca_file, cert_file, key_file = base / "ca.pem", base / "server.crt", base / "server.key"
    ca.cert_pem.write_to_path(str(ca_file))
    issued.private_key_pem.write_to_path(str(key_file))
    cert_file.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    secret = base / "secret"
    secret.write_text("bench-secret-0123456789abcdef0123456789abcdef")
    token_file = base / "token"
    token_file.write_text(create_token("bench", secret.read_bytes(), "HS256"))
    plain, plain_endpoint = start_standalone(base / "plain")
    secured, secured_endpoint = start_standalone(
        base / "secured", "--tls-cert", str(cert_file), "--tls-key", str(key_file),
        "--auth-token-secret-file", str(secret), "--super-users", "bench")
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "tls_token": []}
    unary: dict[str, list[float]] = {"plain": [], "tls_token": []}
    clients = {
        "plain": lambda: folio.Client(plain_endpoint),
        "tls_token": lambda: folio.Client(secured_endpoint, tls=folio.TLS(ca=str(ca_file)),
                                          token_file=str(token_file)),
    }
    try:
        for _round in range(args.rounds):
            runs["plain"].append(_perf(plain_endpoint, "bench", args, server_pid=plain.pid))
            runs["tls_token"].append(_perf(secured_endpoint, "bench", args, "--tls-ca",
                                           str(ca_file), "--token-file", str(token_file),
                                           server_pid=secured.pid))
            for name, make in clients.items():
                unary[name].append(_unary_calls_per_s(make, args.unary_calls))
    finally:
        for process in (plain, secured):
            process.terminate()
            process.wait(60)
    medians = {name: statistics.median(run["events_per_s"] for run in results)
               for name, results in runs.items()}
    return {
        "load": {"event_bytes": args.event_bytes, "duration_s": args.duration_s,
                 "writers": args.writers, "segments": args.segments, "rounds": args.rounds},
        "events_per_s": {name: [round(run["events_per_s"]) for run in results]
                         for name, results in runs.items()},
        "p50_ms": {name: [run["latency_ms"]["p50"] for run in results]
                   for name, results in runs.items()},
        "median_events_per_s": {name: round(value) for name, value in medians.items()},
        "server_cpu_us_per_event": _per_event(runs, "server_cpu_us_per_event"),
        "client_cpu_us_per_event": _per_event(runs, "client_cpu_us_per_event"),
        "ratio_tls_token_to_plain": round(medians["tls_token"] / medians["plain"], 3),
        # Unary admin calls (GetTopic) one after another: what a per-call check costs.
        "get_topic_per_s": {name: [round(value) for value in values]
                            for name, values in unary.items()},
        "get_topic_ratio_tls_token_to_plain": round(
            statistics.median(unary["tls_token"]) / statistics.median(unary["plain"]), 3),
    }


def _per_event(runs: dict[str, list[dict[str, Any]]], key: str) -> dict[str, Any]:
    values = {name: [round(run[key], 2) for run in results] for name, results in runs.items()}
    medians = {name: statistics.median(found) for name, found in values.items()}
    return {"runs": values, "median": medians,
            "ratio_tls_token_to_plain": round(medians["tls_token"] / medians["plain"], 3)}


def _markdown(report: dict[str, Any]) -> str:
    load = report["load"]
    lines = [f"# Security cost: folio perf produce, {load['event_bytes']}-byte events, "
             f"{load['writers']} writer(s), {load['duration_s']} s per run, "
             f"{load['rounds']} alternating rounds", "",
             "| server | events/s per run | median | p50 ms per run |", "|---|---|---|---|"]
    for name in ("plain", "tls_token"):
        runs = ", ".join(f"{value:,}" for value in report["events_per_s"][name])
        p50 = ", ".join(f"{value:.2f}" for value in report["p50_ms"][name])
        lines.append(f"| {name} | {runs} | {report['median_events_per_s'][name]:,} | {p50} |")
    lines += ["", f"Ratio (TLS + token / plain, medians): "
              f"**{report['ratio_tls_token_to_plain']}**", "",
              "Unary GetTopic calls/s, one after another (the per-call token and "
              "permission check): plain "
              + ", ".join(f"{value:,}" for value in report["get_topic_per_s"]["plain"])
              + "; TLS + token "
              + ", ".join(f"{value:,}" for value in report["get_topic_per_s"]["tls_token"])
              + f"; ratio of medians **{report['get_topic_ratio_tls_token_to_plain']}**", ""]
    for side in ("server", "client"):
        cpu = report[f"{side}_cpu_us_per_event"]
        lines += [f"{side.capitalize()} CPU µs per event (user + system; steadier than "
                  f"events/s on a shared machine): plain {cpu['runs']['plain']}, TLS + token "
                  f"{cpu['runs']['tls_token']}; ratio of medians "
                  f"**{cpu['ratio_tls_token_to_plain']}**", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the report (``--json``: the JSON only)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration-s", type=float, default=10.0, help="each run (default 10)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per server (default 3)")
    parser.add_argument("--event-bytes", type=int, default=100)
    parser.add_argument("--writers", type=int, default=1)
    parser.add_argument("--segments", type=int, default=1)
    parser.add_argument("--unary-calls", type=int, default=2000,
                        help="GetTopic calls timed per round (default 2000)")
    parser.add_argument("--json", action="store_true", help="print the JSON report only")
    parser.add_argument("--no-save", action="store_true",
                        help="do not write the report under bench/results")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="folio-security-bench-") as directory:
        report = run(args, Path(directory))
    if not args.no_save:
        _RESULTS.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        (_RESULTS / f"security-{stamp}.json").write_text(json.dumps(report, indent=2) + "\n")
        (_RESULTS / f"security-{stamp}.md").write_text(_markdown(report))
    print(json.dumps(report, indent=2) if args.json else _markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
