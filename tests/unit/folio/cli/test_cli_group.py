"""`folio group` without a server: --help, bad usage exits 2; SIGTERM raised as Ctrl-C."""

from __future__ import annotations

import io
import os
import signal
from collections.abc import Iterator

import pytest

import folio
from folio.cli import main
from folio.cli._signals import install_sigterm_as_interrupt
from folio.cli.consume import _copy_events, _GroupEvents

HELP_MENTIONS = {
    ("group",): ["list", "describe", "reset", "offline", "delete", "session timeout"],
    ("group", "list"): ["--json", "lag", "--endpoint"],
    ("group", "describe"): ["--json", "lag", "end offset - position", "heard"],
    ("group", "reset"): ["--to", "earliest", "latest", "checkpoint", "members", "--to-offset",
                         "--shift-by", "--to-datetime", "--by-duration", "--to-current",
                         "--dry-run", "--execute", "NEW-OFFSET", "--json", "TOPIC[:P,P...]"],
    ("group", "offline"): ["READER", "position it reported"],
    ("group", "delete"): ["--force", "members"],
}


@pytest.mark.parametrize("command", sorted(HELP_MENTIONS))
def test_help_names_the_options(command: tuple[str, ...],
                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for mention in HELP_MENTIONS[command]:
        assert mention in text, (command, mention)


@pytest.mark.parametrize("argv", [
    ["group"],
    ["group", "describe"],
    ["group", "reset", "g"],
    ["group", "reset", "g", "--to", "yesterday"],
    ["group", "reset", "g", "--to-offset", "x"],
    ["group", "reset", "g", "--to-earliest", "--to-latest"],
    ["group", "reset", "g", "--shift-by", "1", "--to-offset", "2"],
    ["group", "reset", "g", "--to-latest", "--dry-run", "--execute"],
    ["group", "offline", "g"],
])
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "usage: folio group" in capsys.readouterr().err


@pytest.fixture
def restore_sigterm() -> Iterator[None]:
    before = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.mark.usefixtures("restore_sigterm")
def test_sigterm_raises_keyboard_interrupt_once_installed() -> None:
    install_sigterm_as_interrupt()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)  # the handler runs at the next bytecode boundary


def test_consume_group_flushes_printed_events_before_it_reads_on() -> None:
    """A member acknowledges at each read_next what it returned before: stdout comes first."""
    class _Out(io.BytesIO):
        flushed_at: list[int]

        def flush(self) -> None:
            self.flushed_at.append(len(self.getvalue()))

    class _Read:
        def __init__(self, payload: bytes) -> None:
            self.event = folio.Event(payload=payload, routing_key=None, headers={},
                                     segment="t/0", offset=0, timestamp=0)

    class _Member:
        def __init__(self, out: _Out) -> None:
            self.reads = [_Read(b"a"), _Read(b"b")]
            self.out = out
            self.seen_at_read: list[bytes] = []

        def read_next(self, timeout: float | None = None) -> _Read | None:
            self.seen_at_read.append(self.out.getvalue()[: self.out.flushed_at[-1]])
            return self.reads.pop(0) if self.reads else None

    out = _Out()
    out.flushed_at = [0]
    member = _Member(out)
    _copy_events(_GroupEvents(member, out), out, 2, None)  # type: ignore[arg-type]
    assert member.seen_at_read == [b"", b"a\n"]
    assert out.getvalue() == b"a\nb\n"
