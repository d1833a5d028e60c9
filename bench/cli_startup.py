"""CLI start-up benchmark: how long ``folio --version``, ``--help`` and a first request take.

Run ``python -m bench.cli_startup [--runs 15] [--json]`` against ``--endpoint
HOST:PORT``, or without it against a ``folio standalone`` it starts on free
ports (and stops) itself. ``--baseline DIR`` also runs each ``folio`` command
with ``DIR`` first on ``PYTHONPATH`` (an older ``folio`` package, e.g. from
``git archive main folio | tar -x -C DIR``; run from another directory than
the repository's, so that it is not on the path first), in the same turns,
so that before and after meet the same load. Each command runs as its own process, ``--runs``
times, the commands taking turns (so a burst of load on a shared machine
hits them alike); the report is each one's median wall time and median CPU
time (the child's user + system time, from ``getrusage``: steadier than wall
time when other work shares the cores).

The commands:

* ``python -c pass``: the floor every command pays, the interpreter and its
  ``site`` (the ``.pth`` files of site-packages: an editable install's import
  finder is one);
* ``python -S -c pass``: the interpreter without ``site``, for comparison;
* ``folio --version``, ``folio --help``, ``folio topic --help``: the console
  script ``pip`` installed beside this interpreter (``python -m folio.cli``
  where there is none), and ``python -m folio.cli --version`` beside it
  (``runpy`` costs a little more than the console script);
* ``folio topic list``: the first request, connecting to the broker included.

The children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` is
dropped from their environment, as a package installed by ``pip`` has its
``.pyc`` files) after one warm-up run each, so what is measured is start-up,
not compiling.
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
from pathlib import Path
from typing import Any

from bench._standalone import start_standalone

__all__ = ["commands", "main", "measure"]


def _folio() -> list[str]:
    """The ``folio`` console script of this interpreter, else ``python -m folio.cli``."""
    script = Path(sys.executable).parent / "folio"
    return [str(script)] if script.exists() else [sys.executable, "-m", "folio.cli"]


def commands(endpoint: str) -> dict[str, list[str]]:
    """What is measured, by the name the report gives it."""
    folio = _folio()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
        "folio --version": [*folio, "--version"],
        "python -m folio.cli --version": [sys.executable, "-m", "folio.cli", "--version"],
        "folio --help": [*folio, "--help"],
        "folio topic --help": [*folio, "topic", "--help"],
        "folio topic list": [*folio, "--endpoint", endpoint, "topic", "list"],
    }


def _child_environment(pythonpath: str | None = None) -> dict[str, str]:
    environment = dict(os.environ)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath is not None:
        environment["PYTHONPATH"] = os.pathsep.join(
            [pythonpath, *filter(None, [environment.get("PYTHONPATH")])])
    return environment


def _run_once(argv: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """One run of ``argv``: (wall seconds, CPU seconds of the child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=environment, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(endpoint: str, runs: int, baseline: str | None = None) -> dict[str, Any]:
    """Every command of :func:`commands`, ``runs`` times each in turns; the report.

    With ``baseline`` (a directory), each ``folio`` command is run with it on
    ``PYTHONPATH`` too, as ``NAME [baseline]``.
    """
    chosen = {name: (argv, _child_environment()) for name, argv in commands(endpoint).items()}
    if baseline is not None:
        chosen.update({f"{name} [baseline]": (argv, _child_environment(baseline))
                       for name, argv in commands(endpoint).items() if name.startswith("folio")})
    load_before = [round(load, 2) for load in os.getloadavg()]
    for argv, environment in chosen.values():  # warm-up: writes the .pyc files
        _run_once(argv, environment)
    walls: dict[str, list[float]] = {name: [] for name in chosen}
    cpus: dict[str, list[float]] = {name: [] for name in chosen}
    for _ in range(runs):
        for name, (argv, environment) in chosen.items():
            wall, cpu = _run_once(argv, environment)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return {
        "runs": runs,
        "load_average_before": load_before,
        "load_average_after": [round(load, 2) for load in os.getloadavg()],
        "cpus": os.cpu_count(),
        "folio": " ".join(_folio()),
        "commands": {
            name: {"median_wall_s": round(statistics.median(walls[name]), 3),
                   "min_wall_s": round(min(walls[name]), 3),
                   "median_cpu_s": round(statistics.median(cpus[name]), 3)}
            for name in chosen},
    }


def _print_table(report: dict[str, Any]) -> None:
    print(f"{report['runs']} runs each; load average (1, 5, 15 min) "
          f"{report['load_average_before']} before, {report['load_average_after']} after, on "
          f"{report['cpus']} CPUs; folio = {report['folio']}")
    print(f"{'command':<33} {'median wall':>12} {'min wall':>9} {'median CPU':>11}")
    for name, figures in report["commands"].items():
        print(f"{name:<33} {figures['median_wall_s']:>10.3f} s {figures['min_wall_s']:>7.3f} s "
              f"{figures['median_cpu_s']:>9.3f} s")


def main(argv: list[str] | None = None) -> int:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.cli_startup",
        description="Median start-up time of folio --version, --help and a first request.")
    parser.add_argument("--endpoint", help="a running broker; default: start a standalone")
    parser.add_argument("--runs", type=int, default=15, help="runs of each command")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run each folio command with DIR first on PYTHONPATH "
                        "(an older folio package), in the same turns")
    args = parser.parse_args(argv)
    if args.endpoint:
        report = measure(args.endpoint, args.runs, args.baseline)
    else:
        with tempfile.TemporaryDirectory(prefix="folio-cli-startup-") as base:
            server, endpoint = start_standalone(Path(base) / "data")
            try:
                report = measure(endpoint, args.runs, args.baseline)
            finally:
                server.terminate()
                try:
                    server.wait(30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait(10)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
