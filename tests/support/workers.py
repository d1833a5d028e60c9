"""How ``make test`` shares the tests between its pytest-xdist workers.

``make test`` runs ``pytest -n 3 --dist loadfile``: a worker takes a whole
group of tests at a time (xdist's *scope*). Every test file is its own group,
so a module's fixtures (a standalone, a cluster) start once, as in one
process. The heaviest files form one group, ``heavy``, so they never run
beside each other and share one SparkSession: the Spark tests (a JVM, whose
Python workers connect back to it on a deadline), the nemesis run and the
peers benchmark's smoke test (it measures). The grouping is this plugin's
scheduler (``pytest_xdist_make_scheduler``); without xdist (``make unit``, a
single test file) nothing changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from xdist.scheduler import LoadScopeScheduling

if TYPE_CHECKING:
    from xdist.remote import Producer

#: Test paths (prefixes of node ids) that share the one ``heavy`` group.
HEAVY = ("tests/spark/", "tests/nemesis/", "tests/bench/test_peers_smoke.py")


def group_of(nodeid: str) -> str:
    """The xdist group of a test: ``heavy``, or its file."""
    path = nodeid.split("::", 1)[0]
    return "heavy" if path.startswith(HEAVY) else path


class FileGroups(LoadScopeScheduling):  # type: ignore[misc]  # (xdist has no types)
    """xdist's ``loadfile`` scheduling, with the heaviest files as one group."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> FileGroups | None:
    """``--dist loadfile`` schedules by ``group_of``; other modes are xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    return FileGroups(config, log)
