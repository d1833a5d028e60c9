"""``folio bookie`` as a real process: crash safety, clean stops, refusals, settings.

Each test starts ``python -m folio.cli bookie --port 0`` (helpers in
``tests/support/bookies.py``), learns the bound port from its ready line, and
talks to it with ``GrpcBookieClient``. Kills are real SIGKILLs.
"""

from __future__ import annotations

import asyncio
import random
import signal
import tomllib
from pathlib import Path

import pytest

from ledger.api import NO_ENTRY, AddRequest, LedgerTail
from ledger.bookie.remote import GrpcBookieClient
from ledger.config import DEFAULT_MAX_ENTRY_BYTES
from ledger.errors import BookieUnavailableError, NoSuchLedgerError
from tests.support.bookies import BookieProcesses, run_folio

pytestmark = pytest.mark.faults


def _requests(ledger_id: int, datas: list[bytes], per_request: int) -> list[AddRequest]:
    """Consecutive add requests of ``per_request`` entries, each piggybacking the LAC so far."""
    requests = []
    length = 0
    for first in range(0, len(datas), per_request):
        chunk = datas[first:first + per_request]
        lengths = []
        for data in chunk:
            length += len(data)
            lengths.append(length)
        requests.append(AddRequest(ledger_id, range(first, first + len(chunk)), lengths, chunk,
                                   last_add_confirmed=first - 1))
    return requests


async def _read_all(client: GrpcBookieClient, ledger_id: int, last_entry_id: int) -> list[bytes]:
    datas: list[bytes] = []
    while len(datas) <= last_entry_id:
        result = await client.read_entries(ledger_id, len(datas), last_entry_id)
        assert result.entry_ids == list(range(len(datas), len(datas) + len(result.entry_ids)))
        datas.extend(result.datas)
    return datas


async def test_acknowledged_adds_survive_sigkill(
    tmp_path: Path, bookie_processes: BookieProcesses
) -> None:
    rng = random.Random(42)
    entries = 600
    datas = [rng.randbytes(rng.randrange(0, 16 * 1024)) for _ in range(entries)]
    bookie = bookie_processes.start(tmp_path / "bookie", "--durability", "sync")
    client = GrpcBookieClient(bookie.address)
    try:
        # Ledger 1: many requests in flight at once (they share group commits);
        # ledger 2: one entry per request, one after the other.
        await asyncio.gather(*(client.add_entries(request)
                               for request in _requests(1, datas, per_request=10)))
        for request in _requests(2, datas[:50], per_request=1):
            await client.add_entries(request)
        # Every add above is acknowledged: kill at once, nothing flushed on the way out.
        assert bookie.kill() == -signal.SIGKILL

        with pytest.raises(BookieUnavailableError) as unavailable:
            await client.read_last_add_confirmed(1)
        assert unavailable.value.retriable
    finally:
        await client.close()

    restarted = bookie_processes.start(tmp_path / "bookie")
    client = GrpcBookieClient(restarted.address)
    try:
        assert await _read_all(client, 1, entries - 1) == datas
        assert await _read_all(client, 2, 49) == datas[:50]
        tail = await client.read_last_add_confirmed(1)
        assert tail.last_entry_id == entries - 1
        assert tail.last_add_confirmed == entries - 11  # what the last request piggybacked
        assert not tail.fenced
        result = await client.read_entries(1, entries - 1, entries - 1)
        assert result.lengths == [sum(map(len, datas))]
    finally:
        await client.close()


async def test_sigterm_stops_cleanly_and_keeps_data(
    tmp_path: Path, bookie_processes: BookieProcesses
) -> None:
    bookie = bookie_processes.start(tmp_path / "bookie", "--durability", "async")
    assert bookie.ready_line.startswith(
        f"folio bookie listening on 127.0.0.1:{bookie.port} "
        f"(data dir {tmp_path / 'bookie'}, durability async, metrics on http://127.0.0.1:"
    )
    client = GrpcBookieClient(bookie.address)
    try:
        await client.add_entries(AddRequest(3, range(2), [1, 2], [b"a", b"b"], NO_ENTRY))
        await client.fence(3)
    finally:
        await client.close()

    assert bookie.terminate() == 0
    assert "bookie stopped" in bookie.log()
    assert "Traceback" not in bookie.log()

    restarted = bookie_processes.start(tmp_path / "bookie")
    client = GrpcBookieClient(restarted.address)
    try:
        assert await client.read_last_add_confirmed(3) == LedgerTail(NO_ENTRY, 1, True)
        with pytest.raises(NoSuchLedgerError):
            await client.read_last_add_confirmed(4)
    finally:
        await client.close()
    assert restarted.interrupt() == 0


async def test_second_bookie_on_the_same_data_dir_is_refused(
    tmp_path: Path, bookie_processes: BookieProcesses
) -> None:
    first = bookie_processes.start(tmp_path / "bookie")

    second = run_folio("bookie", "--data-dir", str(tmp_path / "bookie"), "--port", "0")

    assert second.returncode == 1
    assert second.stdout == ""
    assert "folio bookie: error: cannot open bookie storage" in second.stderr
    assert "is another bookie running on this data dir?" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.running()
    client = GrpcBookieClient(first.address)
    try:
        await client.add_entries(AddRequest(1, range(1), [1], [b"a"], NO_ENTRY))
    finally:
        await client.close()


def test_taken_port_is_refused(tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    first = bookie_processes.start(tmp_path / "first")

    second = run_folio("bookie", "--data-dir", str(tmp_path / "second"),
                       "--port", str(first.port))

    assert second.returncode == 1
    assert second.stdout == ""
    assert f"folio bookie: error: cannot listen on 127.0.0.1:{first.port}" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.running()


def test_print_config_layers_defaults_env_and_flags(tmp_path: Path) -> None:
    env = {
        "FOLIO_BOOKIE_DATA_DIR": str(tmp_path / "from-env"),
        "FOLIO_BOOKIE_DURABILITY": "async",
        "FOLIO_BOOKIE_MAX_ENTRY_BYTES": "1000",
        "FOLIO_BOOKIE_PORT": "4000",
    }

    shown = run_folio("bookie", "--durability", "sync", "--port", "0", "--print-config", env=env)

    assert shown.returncode == 0, shown.stderr
    assert tomllib.loads(shown.stdout)["bookie"] == {
        "data_dir": str(tmp_path / "from-env"),  # env over default
        "durability": "sync",                    # flag over env
        "max_entry_bytes": 1000,                 # env over default
        "max_batch_bytes": 8 * 1024 * 1024,      # default
        "read_max_bytes": 4 * 1024 * 1024,       # default
        "journal": "on",                         # default
        "journal_dir": "",                       # default: DATA_DIR/journal
        "journal_file_bytes": 64 * 1024 * 1024,   # default
        "host": "127.0.0.1",
        "port": 0,                               # flag over env
        "metrics_port": 8000,                    # default
        "tls_cert": "",                          # default: plain text
        "tls_key": "",
        "tls_ca": "",
        "metrics_tls": False,
        "auth_token_secret_file": "",            # default: no token authentication
        "auth_token_public_key_file": "",
        "super_users": "",
        "metadata_url": "",                      # default: not in a cluster
        "advertised_address": "",
        "metadata_session_timeout_ms": 6000,
        "auto_recovery": True,                   # default: on (only acts in a cluster)
        "auto_recovery_grace_ms": 30000,
        "auto_recovery_interval_ms": 5000,
        "auto_recovery_token_file": "",          # default: bookies check no tokens
        "gc": True,                              # default: on (only acts in a cluster)
        "gc_interval_ms": 900000,
        "gc_over_replicated": False,
        "gc_rate_per_s": 50.0,
    }
    assert not (tmp_path / "from-env").exists()  # printing opens nothing


def test_print_config_defaults(tmp_path: Path) -> None:
    shown = run_folio("bookie", "--data-dir", str(tmp_path), "--print-config")

    assert shown.returncode == 0, shown.stderr
    config = tomllib.loads(shown.stdout)["bookie"]
    assert (config["durability"], config["max_entry_bytes"], config["port"]) == (
        "sync", DEFAULT_MAX_ENTRY_BYTES, 3181)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "--data-dir (or FOLIO_BOOKIE_DATA_DIR) is required"),
        (("--data-dir", "d", "--max-entry-bytes", "0"), {}, "max_entry_bytes must be positive"),
        (("--data-dir", "d"), {"FOLIO_BOOKIE_PORT": "seventy"}, "FOLIO_BOOKIE_PORT='seventy'"),
        (("--data-dir", "d"), {"FOLIO_BOOKIE_DURABILITY": "maybe"},
         "FOLIO_BOOKIE_DURABILITY='maybe'"),
    ],
    ids=["no data dir", "bad flag value", "bad env int", "bad env enum"],
)
def test_bad_settings_are_usage_errors(args: tuple[str, ...], env: dict[str, str],
                                       message: str) -> None:
    shown = run_folio("bookie", *args, "--print-config", env=env)

    assert shown.returncode == 2
    assert message in shown.stderr
    assert "Traceback" not in shown.stderr


def test_help_describes_every_option() -> None:
    shown = run_folio("bookie", "--help")

    assert shown.returncode == 0
    for option in ("--data-dir", "--port", "--host", "--durability", "--max-entry-bytes",
                   "--metrics-port", "--print-config", "FOLIO_BOOKIE_"):
        assert option in shown.stdout
