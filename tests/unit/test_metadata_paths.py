"""One module per layer names every metadata path (``ledger.metadata.paths``, the broker's).

The broker's module is ``broker.metadata_paths``.

A module-level constant holding a metadata path (a string that starts with
``/`` and names no gRPC method) anywhere else in ``ledger`` or ``broker``
fails here: add the name to its layer's module (and its docstring's table),
and import it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType

import pytest

import broker.metadata_paths
import ledger.metadata.paths

REPO = Path(__file__).resolve().parents[2]
PATH_MODULES = {
    Path("ledger/metadata/paths.py"): ledger.metadata.paths,
    Path("broker/metadata_paths.py"): broker.metadata_paths,
}
_METADATA_PATH = re.compile(r"^/[a-z][a-z0-9_/-]*$")


def _path_constants(source: Path) -> list[tuple[int, str, str]]:
    """``(line, name, value)`` of each module-level str constant that looks like a path."""
    found = []
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant) \
                and isinstance(value.value, str) and _METADATA_PATH.match(value.value):
            found.append((node.lineno, target.id, value.value))
    return found


def test_no_metadata_path_is_named_outside_its_layers_module() -> None:
    strays = [f"{source.relative_to(REPO)}:{line}: {name} = {value!r}"
              for package in ("ledger", "broker")
              for source in sorted((REPO / package).rglob("*.py"))
              if source.relative_to(REPO) not in PATH_MODULES and "_proto" not in source.parts
              for line, name, value in _path_constants(source)]
    assert strays == []


@pytest.mark.parametrize("module", list(PATH_MODULES.values()), ids=str)
def test_every_name_is_in_its_modules_table(module: ModuleType) -> None:
    names = [name for name in module.__all__ if name.endswith(("_PATH", "_ROOT"))]
    assert names, module.__name__
    table = module.__doc__ or ""
    for name in names:
        value = getattr(module, name)
        assert isinstance(value, str) and value.startswith("/")
        assert f"``{value}" in table, f"{module.__name__}.{name} = {value!r} is not in its table"
