"""Run one Markdown file's command blocks in order, as a reader would, on loopback.

``DocRun`` owns what a file's blocks share: a working directory (``pki/``,
``admin.jwt`` ... land there), the environment (exports carry from one block to
the next), the Python namespace of its ``python`` blocks, the servers its
``background`` blocks started, and a ``folio standalone`` playing ``make run``
(for files with no server of their own), stopped at the end.

The machine is shared, so the documented ports are moved: every port a block
names (``localhost:N``, ``127.0.0.1:N``, ``--port N``, ``--metrics-port N``,
``--kafka-port N``) becomes a free port, the same one for the same N throughout
the file (the port plan's consecutive ranges stay consecutive); ``.venv/bin/``
is this checkout's; ``make run`` is the shared standalone; ``make cluster`` and
``make cluster-down`` are ``scripts/cluster.py up|down`` on moved ports, under
the working directory. ``$FOLIO_ENDPOINT`` names the moved 7070, as the CLI's
default ``localhost:7070`` would.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.docs.blocks import ROOT, Block
from tests.support.bookies import folio_env, wait_for_ready_line
from tests.support.zookeeper import free_port

__all__ = ["DocRun"]

BLOCK_TIMEOUT_S = 300.0
_MARK = "@@docs-test-command@@"
_ADDRESS = re.compile(r"\b(?P<host>localhost|127\.0\.0\.1):(?P<port>\d{4,5})\b")
_PORT_FLAG = re.compile(r"(?P<flag>--(?:metrics-|kafka-)?port)(?P<sep>[ =])(?P<port>\d{2,5})\b")
_VENV = re.compile(r"(?<![\w/.])\.venv/bin/")
#: Consecutive ranges of the port plan (docs/cluster.md "Ports"): moved as a block.
_RANGES = [range(7081, 7084), range(9101, 9104), range(3181, 3184), range(8001, 8004)]
#: Ports a server takes when not told (flag appended to background commands).
_DEFAULT_PORTS = {"standalone": (7070, 7071), "broker": (7070, 7071), "bookie": (3181, 8000)}


def _free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free on 127.0.0.1 now (scripts/free_ports.py)."""
    return free_port(count=count)


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined."""
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return joined


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """Each command of an sh block with the comment lines right after it (its output)."""
    found: list[tuple[str, list[str]]] = []
    for line in _logical_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if found:
                found[-1][1].append(stripped[1:].strip())
            continue
        found.append((line, []))
    return found


def _matches(expected: str, actual: str) -> bool:
    """``...`` matches anything; blank runs match blank runs."""
    def blanks(text: str) -> str:
        return " ".join(text.split())
    parts = [re.escape(part) for part in blanks(expected).split("...")]
    return re.fullmatch(".*".join(parts), blanks(actual)) is not None


def _expectations(output: list[str], actual: list[str], where: str) -> None:
    """Each expected line matches the actual line at its index."""
    for index, expected in enumerate(output):
        got = actual[index] if index < len(actual) else "<no line>"
        assert _matches(expected, got), (
            f"{where}: documented output line {index + 1} differs\n"
            f"    documented: {expected}\n    actual:     {got}\n"
            f"    (all actual lines: {actual})")


class DocRun:
    """The shared state of one Markdown file's blocks; ``close()`` stops what they started."""

    def __init__(self, workdir: Path, *, shared_standalone: bool) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.ports: dict[int, int] = {}
        self.env = folio_env({"PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}"
                                      f"{os.environ['PATH']}"})
        self.env["FOLIO_ENDPOINT"] = f"localhost:{self.port(7070)}"
        self.servers: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.namespace: dict[str, Any] = {"__name__": "__docs__"}
        self.cluster_started = False
        self.client: Any = None
        if shared_standalone:
            self._start("standalone", f"folio standalone --data-dir {workdir / 'make-run-data'}"
                        f" --port {self.port(7070)} --metrics-port {self.port(7071)}")

    # --- ports and text ----------------------------------------------------------------

    def port(self, planned: int) -> int:
        """The free port standing in for ``planned`` in this file."""
        if planned not in self.ports:
            group = next((r for r in _RANGES if planned in r), range(planned, planned + 1))
            base = _free_ports(len(group))
            for offset, member in enumerate(group):
                self.ports.setdefault(member, base + offset)
        return self.ports[planned]

    def localize(self, text: str) -> str:
        """The block's text with ports moved, this checkout's venv and make targets."""
        text = _VENV.sub(f"{ROOT}/.venv/bin/", text)
        text = _ADDRESS.sub(lambda m: f"{m['host']}:{self.port(int(m['port']))}", text)
        text = _PORT_FLAG.sub(
            lambda m: f"{m['flag']}{m['sep']}{self.port(int(m['port']))}", text)
        # `make cluster 7081,7082` style lists after an address: moved with the range.
        text = re.sub(r"(?<=:)(7081|9101|3181|8001)(,)(\d{4})(,)(\d{4})", lambda m: ",".join(
            str(self.port(int(p))) for p in (m[1], m[3], m[5])), text)
        # The repository's scripts, run from the block's working directory.
        text = re.sub(r"(?<![/\w])scripts/", f"{ROOT}/scripts/", text)
        cluster = (f"{sys.executable} {ROOT / 'scripts' / 'cluster.py'} --dir folio-cluster")
        text = re.sub(r"\bmake cluster-down\b", f"{cluster} down", text)
        text = re.sub(r"\bmake cluster-status\b", f"{cluster} status", text)
        text = re.sub(r"\bmake cluster\b(?!-)", (
            f"{cluster} up --zk-port {self.port(2181)} --bookie-port {self.port(3181)}"
            f" --bookie-metrics-port {self.port(8001)} --broker-port {self.port(7081)}"
            f" --broker-metrics-port {self.port(9101)}"), text)
        return text

    # --- sh ------------------------------------------------------------------------------

    def run_sh(self, block: Block) -> None:
        """The block's commands in one bash (``set -e -o pipefail``), output checked."""
        commands = _commands(block.text)
        if block.background:
            for command, output in commands:
                line = self._start_documented(block, command)
                if block.compare and output:
                    _expectations([self.localize(o) for o in output], [line],
                                  f"{block.where}: `{command.strip()}`")
            return
        if "make cluster" in block.text:
            self.cluster_started = True
        env_file = self.workdir / ".docs-test-env"
        script = ["set -e -o pipefail"]
        for index, (command, _) in enumerate(commands):
            script += [f"printf '\\n{_MARK} {index}\\n'", self.localize(command)]
        script.append(f"env -0 > {env_file}")
        result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=self.workdir,
                                env=self.env, capture_output=True, text=True,
                                timeout=BLOCK_TIMEOUT_S, check=False)
        pieces = result.stdout.split(f"\n{_MARK} ")
        if result.returncode != 0:
            failed = int(pieces[-1].split("\n", 1)[0]) if len(pieces) > 1 else 0
            raise AssertionError(
                f"{block.where}: command {failed + 1} of the block failed "
                f"(exit {result.returncode}):\n    $ {commands[failed][0].strip()}\n"
                f"stdout (tail):\n{result.stdout[-2000:]}\nstderr (tail):\n"
                f"{result.stderr[-3000:]}")
        self.env = dict(item.split("=", 1) for item in
                        env_file.read_text().split("\0") if "=" in item)
        outputs = {int(p.split("\n", 1)[0]): p.split("\n", 1)[1] if "\n" in p else ""
                   for p in pieces[1:]}
        if block.compare:
            for index, (command, output) in enumerate(commands):
                if output:
                    _expectations([self.localize(o) for o in output],
                                  outputs.get(index, "").splitlines(),
                                  f"{block.where}: `{command.strip()}`")

    def _start_documented(self, block: Block, command: str) -> str:
        command = self.localize(command)
        words = command.split()
        kind = words[1] if len(words) > 1 and words[0].endswith("folio") else ""
        api, metrics = _DEFAULT_PORTS.get(kind, (0, 0))
        # A default port the file's shared standalone holds: the reader would have
        # stopped `make run` first; here the server gets free ports instead.
        taken = "standalone" in {name for name, _ in self.servers}
        if api and "--port" not in words:
            command += f" --port {_free_ports(1) if taken else self.port(api)}"
        if metrics and "--metrics-port" not in words:
            command += f" --metrics-port {_free_ports(1) if taken else self.port(metrics)}"
        try:
            return self._start(kind or "server", command)
        except AssertionError as error:
            raise AssertionError(f"{block.where}: `{command}` did not start: {error}") from None

    def _start(self, name: str, command: str) -> str:
        log = self.workdir / f"{name}-{len(self.servers)}.log"
        with log.open("ab") as stderr:
            process = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=self.workdir,
                                       env=self.env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=stderr, bufsize=0)
        self.servers.append((name, process))
        line: str = wait_for_ready_line(process, 120.0, log)
        return line

    # --- python ----------------------------------------------------------------------------

    def run_python(self, block: Block, client: Callable[[], Any] | None) -> None:
        """The block in the file's namespace, in the working directory; prints checked.

        ``client``: the file's ``folio.Client`` (of the shared standalone), bound
        to the name ``client`` before each block, as the docs' snippets assume.
        """
        if client is not None:
            self.namespace["client"] = client()
        code = self.localize(block.text)
        captured = io.StringIO()
        previous = Path.cwd()
        os.chdir(self.workdir)
        try:
            with contextlib.redirect_stdout(captured):
                exec(compile(code, block.where, "exec"), self.namespace)
        except Exception:  # any error of a documented snippet fails it
            raise AssertionError(f"{block.where} raised:\n{traceback.format_exc(limit=-4)}"
                                 f"\n{block.excerpt()}") from None
        finally:
            os.chdir(previous)
        if block.compare:
            expected = [line.split("#", 1)[1].strip() for line in code.splitlines()
                        if line.strip().startswith("print(") and "#" in line]
            _expectations(expected, captured.getvalue().splitlines(), block.where)

    # --- end ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the file's servers (SIGTERM, then SIGKILL) and a cluster it started."""
        if self.cluster_started:
            subprocess.run(["bash", "-c", self.localize("make cluster-down")], cwd=self.workdir,
                           env=self.env, capture_output=True, timeout=300, check=False)
        for _, process in reversed(self.servers):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            if process.stdout is not None:
                process.stdout.close()
