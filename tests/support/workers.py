"""How ``make test`` shares the tests between its two pytest-xdist workers.

``make test`` runs ``pytest -n 2 --dist loadgroup``: a worker takes a whole
group at a time. Every test file is its own group, so a module's fixtures (a
standalone, a cluster) start once, as in one process. The heaviest files form
one group, ``heavy``, so they never run beside each other: the Spark tests
(a JVM each, whose Python workers connect back to it on a deadline), the
nemesis run and the peers benchmark's smoke test (it measures). Without
xdist (``make unit``, a single test file) the marks do nothing.
"""

from __future__ import annotations

import pytest

#: Test paths (prefixes of node ids) that share the one ``heavy`` group.
HEAVY = ("tests/spark/", "tests/nemesis/", "tests/bench/test_peers_smoke.py")


def group_of(nodeid: str) -> str:
    """The xdist group of a test: ``heavy``, or its file."""
    path = nodeid.split("::", 1)[0]
    return "heavy" if path.startswith(HEAVY) else path


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (its own hook)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every test with its group (``xdist_group``)."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item.nodeid)))
