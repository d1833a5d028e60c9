"""scripts/class_sizes.py: a class counts its bases' methods and fields (mixins are one object)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("class_sizes",
                                                  ROOT / "scripts" / "class_sizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["class_sizes"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_mixins_count_as_one_object(tmp_path: Path) -> None:
    package = tmp_path / "broker"
    package.mkdir()
    (package / "core.py").write_text(
        "class Core:\n"
        "    def __init__(self):\n"
        "        self._a = 1\n"
        "        self._b: int = 2\n"
        "    def helper(self):\n"
        "        self._a += 1\n")
    (package / "part.py").write_text(
        "from broker.core import Core\n"
        "class Part(Core):\n"
        "    def helper(self):\n"  # overrides: counted once
        "        self._c = 3\n"
        "    async def run(self):\n"
        "        other.x = 1\n")  # not a field of self
    script = _script()
    classes = script.scan(tmp_path)
    [part] = classes["Part"]
    assert script.totals(part, classes) == (2, 3, 3)  # classes, methods, fields
    [core] = classes["Core"]
    assert script.totals(core, classes) == (1, 2, 2)


def test_the_segment_is_measured_and_an_unknown_class_is_an_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    assert script.main(["LedgerSegment"]) == 0
    assert "broker/segments/segment.py" in capsys.readouterr().out
    assert script.main(["NoSuchClassAnywhere"]) == 1
    assert "NoSuchClassAnywhere: no such class" in capsys.readouterr().err
