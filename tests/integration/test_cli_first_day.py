"""What a new user tripped on, each fixed (issue 24, "small things"), against a real standalone.

Every command runs as a subprocess (``python -m folio.cli``) against the
module's ``folio standalone`` (tests/integration/conftest.py), or with no
server where none is needed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import folio
from tests.support.bookies import (
    START_TIMEOUT_S,
    BookieProcess,
    folio_argv,
    folio_env,
    wait_for_ready_line,
)
from tests.support.certs import Pki

RUN_TIMEOUT_S = 60.0
_SECRET = b"a-secret-of-at-least-thirty-two-bytes!!"


def run(*args: str, stdout: int | None = subprocess.PIPE, cwd: Path | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(folio_argv(*args), stdout=stdout, stderr=subprocess.PIPE, text=True,
                          env=folio_env(env), timeout=RUN_TIMEOUT_S, check=False, cwd=cwd)


def test_token_output_is_private_and_a_redirect_warns(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(_SECRET)
    target = tmp_path / "admin.jwt"
    made = run("token", "create", "--secret-file", str(secret), "--subject", "admin",
               "--output", str(target))
    assert made.returncode == 0, made.stderr
    assert made.stdout == ""
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert target.read_text().count(".") == 2  # header.claims.signature
    # Written again (a rotation): still mode 600, replaced whole.
    target.chmod(0o644)
    again = run("token", "create", "--secret-file", str(secret), "--subject", "ops",
                "--output", str(target))
    assert again.returncode == 0, again.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600

    redirected = tmp_path / "redirected.jwt"
    descriptor = os.open(redirected, os.O_WRONLY | os.O_CREAT, 0o644)
    os.fchmod(descriptor, 0o644)
    try:
        printed = run("token", "create", "--secret-file", str(secret), "--subject", "admin",
                      stdout=descriptor)
    finally:
        os.close(descriptor)
    assert printed.returncode == 0, printed.stderr
    assert "warning: stdout is a file readable by others (mode 644)" in printed.stderr
    assert "--output FILE" in printed.stderr
    assert redirected.read_text().count(".") == 2


def test_token_with_a_pem_key_as_secret_is_a_clear_error(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    key = pki.server().key
    made = run("token", "create", "--secret-file", str(key), "--subject", "admin")
    assert made.returncode == 1
    assert "Traceback" not in made.stderr
    assert made.stderr.startswith(f"folio token: error: --secret-file {key} holds a PEM key")
    assert "--private-key-file" in made.stderr


def test_kafka_words_get_a_hint() -> None:
    result = run("topic", "create", "t1", "--partitions", "3")
    assert result.returncode == 2
    assert "usage: folio topic create" in result.stderr
    assert result.stderr.rstrip().endswith(
        "folio topic create: error: unrecognized arguments: --partitions 3; "
        "did you mean --segments?")
    typo = run("topic", "list", "--jsn")
    assert typo.returncode == 2
    assert "did you mean --json?" in typo.stderr


def test_group_list_prints_its_header_with_no_group(server: BookieProcess) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        for name in client.list_reader_groups():
            client.reader_group(name).delete()
    listed = run("group", "list", "--endpoint", server.address)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["GROUP", "KIND", "STATE", "TOPICS", "MEMBERS", "LAG"]


def test_group_reset_names_the_cli_command(server: BookieProcess) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("first-day.reset", segments=1)
        group = client.reader_group("first-day.g", ["first-day.reset"],
                                    session_timeout_ms=60_000)
        reader = group.reader("r1")
        try:
            reset = run("group", "reset", "first-day.g", "--to", "earliest",
                        "--endpoint", server.address)
        finally:
            reader.close()
    assert reset.returncode == 1
    assert "reader_offline" not in reset.stderr
    assert "`folio group offline first-day.g r1`" in reset.stderr


def test_keyless_produce_spreads_over_segments(server: BookieProcess) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("first-day.keyless", segments=3)
    for _ in range(12):  # 12 runs, each one block: all on one segment has odds 3^-11
        produced = subprocess.run([*folio_argv("produce", "first-day.keyless"), "--endpoint",
                                   server.address], input="one event\n", capture_output=True,
                                  text=True, env=folio_env(), timeout=RUN_TIMEOUT_S,
                                  check=False)
        assert produced.returncode == 0, produced.stderr
    with folio.Client(server.address, timeout_s=30) as client:
        ends = [info.end_offset for info in client.get_segments("first-day.keyless")]
    assert sum(ends) == 12
    assert sum(1 for end in ends if end) >= 2, ends


def test_version_imports_no_grpc() -> None:
    code = ("import sys; from folio.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('grpc', 'google', 'prometheus_client')))")
    checked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=folio_env(), timeout=RUN_TIMEOUT_S, check=True)
    assert checked.stdout.splitlines()[0].startswith("folio ")
    assert json.loads(checked.stdout.splitlines()[1].replace("'", '"')) == []


def test_standalone_leaves_no_hypothesis_directory(tmp_path: Path) -> None:
    # The dev extras (installed here) bring Hypothesis, which the Kafka wire library
    # imports when present; the standalone serves Kafka, started from an empty cwd.
    work = tmp_path / "cwd"
    work.mkdir()
    log = tmp_path / "standalone.log"
    with log.open("wb") as errors:
        process = subprocess.Popen(
            folio_argv("standalone", "--data-dir", str(tmp_path / "data"), "--port", "0",
                       "--metrics-port", "0", "--kafka-port", "0"),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, env=folio_env(),
            cwd=work, bufsize=0)
    try:
        line = wait_for_ready_line(process, START_TIMEOUT_S, log)
        assert "kafka on" in line
    finally:
        process.terminate()
        process.wait(timeout=RUN_TIMEOUT_S)
        if process.stdout is not None:
            process.stdout.close()
    assert list(work.iterdir()) == []


def test_a_standalone_describes_itself_as_its_one_broker(server: BookieProcess) -> None:
    with folio.Client(server.address, timeout_s=30) as client:
        cluster = client.describe_cluster()
        client.create_topic("first-day.owned", segments=2)
        owners = {s.owner for s in client.get_segments("first-day.owned")}
    assert cluster.container_count == 0 and cluster.unowned_containers == ()
    assert [(b.address, b.containers) for b in cluster.brokers] == [(server.address, ())]
    assert owners == {server.address}
