"""Which modules a real ``folio`` process imported: the start-up tests' evidence.

The command runs as its own process through an entry point (``python -m
folio.cli`` or the ``folio`` console script), and at exit (``atexit``, so after
``SystemExit`` too) it writes ``sys.modules`` to a file. ``python -X importtime``
would miss modules loaded by ``importlib.import_module`` (the CLI's commands,
``folio``'s lazy names): it times only ``import`` statements.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ENTRY_POINTS", "run_recording_imports"]

#: How a user starts the CLI: ``python -m folio.cli``, and the ``folio`` console
#: script beside this interpreter when it is installed.
_SCRIPT = Path(sys.executable).parent / "folio"
ENTRY_POINTS: tuple[tuple[str, ...], ...] = (
    (("-m", "folio.cli"),) + (((str(_SCRIPT),),) if _SCRIPT.exists() else ()))

_RECORDER = """\
import atexit, json, runpy, sys
out, way, *argv = sys.argv[1:]
def record():
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
atexit.register(record)
if way == "-m":
    sys.argv = [argv[0], *argv[1:]]
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = [way, *argv]
    runpy.run_path(way, run_name="__main__")
"""


def run_recording_imports(entry: tuple[str, ...], *args: str, stdin: str | None = None,
                          env: Mapping[str, str] | None = None,
                          timeout_s: float = 120) -> tuple[subprocess.CompletedProcess[str],
                                                           set[str]]:
    """Runs ``folio ARGS`` by ``entry`` (one of :data:`ENTRY_POINTS`); the process and the
    modules it had imported when it exited."""
    with tempfile.TemporaryDirectory(prefix="folio-imports-") as directory:
        out = Path(directory) / "modules.json"
        done = subprocess.run([sys.executable, "-c", _RECORDER, str(out), *entry, *args],
                              input=stdin, capture_output=True, text=True,
                              env=None if env is None else dict(env), timeout=timeout_s,
                              check=False)
        assert out.exists(), f"no module list recorded: {done.stderr[-2000:]}"
        modules: set[str] = set(json.loads(out.read_text()))
    return done, modules
