"""The fast tier (``make unit``): tests that start no process, and a guard that holds them to it.

A test that starts another process (a ZooKeeper JVM, a Python subprocess,
``make``) carries the ``processes`` marker: by hand, or here for every test
that uses a fixture which starts one (``PROCESS_FIXTURES``). ``make unit``
runs ``tests/unit`` with ``-m "not processes" --no-processes``; with
``--no-processes`` every way of starting a process (``subprocess``, hence
``asyncio``'s subprocesses; ``os.fork``, ``os.posix_spawn``, hence
``multiprocessing``) raises instead, so a test that starts one without the
marker fails there, naming the marker, instead of slowing the tier down.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any, NoReturn

import pytest

#: Fixtures that start a process: a test using one is marked ``processes``.
PROCESS_FIXTURES = frozenset({"zookeeper", "zk_url", "make_zookeeper", "bookie_processes"})

_MESSAGE = ("this test started a process ({how}) under --no-processes (make unit): "
            "mark it @pytest.mark.processes, or keep it in-process")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-processes", action="store_true", default=False,
        help="fail any test that starts a process (subprocess, fork, spawn): the fast tier")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.processes)


def _refuse(how: str) -> Any:
    def refuse(*_args: object, **_kwargs: object) -> NoReturn:
        raise RuntimeError(_MESSAGE.format(how=how))
    return refuse


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("--no-processes"):
        return
    patches: list[tuple[object, str, object]] = [
        (subprocess.Popen, "_execute_child", _refuse("subprocess")),
        (os, "fork", _refuse("os.fork")),
        (os, "posix_spawn", _refuse("os.posix_spawn")),
        (os, "posix_spawnp", _refuse("os.posix_spawnp")),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, replacement in patches:
        setattr(owner, name, replacement)

    def restore() -> None:
        for owner, name, original in saved:
            setattr(owner, name, original)

    config.add_cleanup(restore)
