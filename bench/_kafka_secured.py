"""``python -m bench.kafka --security``: librdkafka over SASL_SSL against PLAINTEXT, one run.

Two ``folio standalone`` processes (sync durability) on fresh directories:
one with a PLAINTEXT Kafka listener, one with TLS on both ports, token
authentication and a SASL_SSL listener (certificates made by trustme for
the run, a token for the super-user ``bench``, SASL PLAIN with the token as
the password). For each event size, each round produces for ``duration_s``
into a fresh 1-partition topic of each broker (``bench.kafka.kafka_produce``)
and reads it all back (``kafka_consume``); the best rate and the lowest
broker CPU per event of the rounds are kept. The table gives both and the
SASL_SSL/PLAINTEXT ratio (the target: at least 0.9 of the rate, CPU per
event within 10%).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.kafka import _broker_cpu_s, kafka_consume, kafka_produce

__all__ = ["run_secured", "secured_table"]

_KAFKA = re.compile(r"kafka on (\S+):(\d+)\)")
_SECRET = b"bench-kafka-secured-secret-0123456789abcdef"


def _start(directory: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "folio.cli", "standalone", "--data-dir", str(directory / "data"),
         "--port", "0", "--metrics-port", "0", "--kafka-port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = _KAFKA.search(line)
    if match is None:
        process.kill()
        process.wait()
        raise RuntimeError(f"folio standalone did not start: {line!r}")
    return process, f"{match[1]}:{match[2]}"


def _secured(directory: Path) -> tuple[subprocess.Popen[str], str, dict[str, Any]]:
    import trustme  # noqa: PLC0415

    from ledger.security.tokens import create_token  # noqa: PLC0415

    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    directory.mkdir(parents=True)
    paths = {name: directory / name for name in ("ca.pem", "cert.pem", "key.pem", "secret")}
    ca.cert_pem.write_to_path(str(paths["ca.pem"]))
    issued.private_key_pem.write_to_path(str(paths["key.pem"]))
    paths["cert.pem"].write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    paths["secret"].write_bytes(_SECRET + b"\n")
    process, bootstrap = _start(
        directory, "--tls-cert", str(paths["cert.pem"]), "--tls-key", str(paths["key.pem"]),
        "--auth-token-secret-file", str(paths["secret"]), "--super-users", "bench",
        "--kafka-security-protocol", "SASL_SSL")
    settings = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                "sasl.username": "bench",
                "sasl.password": create_token("bench", _SECRET, "HS256"),
                "ssl.ca.location": str(paths["ca.pem"])}
    return process, bootstrap, settings


def run_secured(sizes: list[int], duration_s: float, rounds: int) -> list[dict[str, Any]]:
    """Per size: best rates and lowest broker CPU per event, PLAINTEXT and SASL_SSL."""
    results = []
    with tempfile.TemporaryDirectory(prefix="folio-kafka-secured-") as directory:
        plain, plain_bootstrap = _start(Path(directory) / "plain")
        secured, secured_bootstrap, settings = _secured(Path(directory) / "secured")
        listeners = {"plaintext": (plain, plain_bootstrap, {}),
                     "sasl_ssl": (secured, secured_bootstrap, settings)}
        try:
            for size in sizes:
                best: dict[str, float] = {}
                for number in range(rounds):
                    for name, (process, bootstrap, extra) in listeners.items():
                        topic = f"{name}-{size}-{number}"
                        before = _broker_cpu_s(process.pid)
                        rate, count = kafka_produce(bootstrap, topic, size, duration_s, extra)
                        middle = _broker_cpu_s(process.pid)
                        read = kafka_consume(bootstrap, topic, count, extra)
                        after = _broker_cpu_s(process.pid)
                        for key, value in ((f"{name}_produce_events_per_s", rate),
                                           (f"{name}_consume_events_per_s", read)):
                            best[key] = max(best.get(key, 0.0), value)
                        for key, value in (
                                (f"{name}_produce_broker_us_per_event",
                                 (middle - before) / count * 1e6),
                                (f"{name}_consume_broker_us_per_event",
                                 (after - middle) / count * 1e6)):
                            best[key] = min(best.get(key, float("inf")), value)
                results.append({"size_bytes": size, "rounds": rounds, **best})
        finally:
            for process, _bootstrap, _extra in listeners.values():
                process.terminate()
                process.wait(60)
    return results


def secured_table(results: list[dict[str, Any]]) -> str:
    """The figures as a Markdown table: rates, ratio, broker CPU per event."""
    lines = ["| event size | step | PLAINTEXT | SASL_SSL | SASL_SSL/PLAINTEXT "
             "| broker CPU/event PLAINTEXT | SASL_SSL | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for row in results:
        for step in ("produce", "consume"):
            plain = row[f"plaintext_{step}_events_per_s"]
            secured = row[f"sasl_ssl_{step}_events_per_s"]
            plain_cpu = row[f"plaintext_{step}_broker_us_per_event"]
            secured_cpu = row[f"sasl_ssl_{step}_broker_us_per_event"]
            lines.append(
                f"| {row['size_bytes']} B | {step} | {plain:,.0f}/s | {secured:,.0f}/s "
                f"| {secured / plain:.2f} | {plain_cpu:.2f} us | {secured_cpu:.2f} us "
                f"| {secured_cpu / plain_cpu:.2f} |")
    return "\n".join(lines)
