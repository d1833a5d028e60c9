"""The largest classes of the tree: methods and fields, their bases' included.

``python scripts/class_sizes.py [--top N] [CLASS ...]`` reads every ``.py`` of
``broker``, ``ledger``, ``txnbuffer`` and ``folio`` (generated stubs left out)
with ``ast``, imports nothing, and prints per class the methods it has with
those of its bases in the tree (a class spread over mixins counts as one
object), and the fields: the distinct ``self.NAME = ...`` targets of those
methods. Bases are matched by name; a base outside the tree counts nothing.
Named classes are printed whatever their size; by default the top 15 by methods.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("broker", "ledger", "txnbuffer", "folio")


@dataclass
class ClassInfo:
    """One class as written: its own methods and fields, and its bases' names."""

    name: str
    path: str
    bases: list[str]
    methods: set[str] = field(default_factory=set)
    fields: set[str] = field(default_factory=set)


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _base_name(node.value)
    return ""


def _self_fields(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    found = set()
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                found.add(target.attr)
    return found


def scan(root: Path) -> dict[str, list[ClassInfo]]:
    """Every class under ``root``'s packages, by name (names may repeat)."""
    classes: dict[str, list[ClassInfo]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ClassDef):
                    continue
                info = ClassInfo(node.name, str(path.relative_to(root)),
                                 [_base_name(base) for base in node.bases])
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        info.methods.add(item.name)
                        info.fields |= _self_fields(item)
                classes.setdefault(node.name, []).append(info)
    return classes


def totals(info: ClassInfo, classes: dict[str, list[ClassInfo]]) -> tuple[int, int, int]:
    """``(classes, methods, fields)`` of ``info`` with its bases in the tree."""
    methods: set[str] = set()
    fields: set[str] = set()
    seen: set[int] = set()
    todo = [info]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        methods |= current.methods
        fields |= current.fields
        for base in current.bases:
            todo.extend(classes.get(base, [])[:1])
    return len(seen), len(methods), len(fields)


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit 1 when a named class is not found."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="CLASS", help="classes to show")
    parser.add_argument("--top", type=int, default=15, help="how many of the largest")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    classes = scan(root)
    rows = []
    for name, infos in classes.items():
        for info in infos:
            if args.names and name not in args.names:
                continue
            rows.append((*totals(info, classes), info))
    rows.sort(key=lambda row: (-row[1], -row[2], row[3].name))
    if not args.names:
        rows = rows[:args.top]
    print(f"{'class':<28} {'classes':>7} {'methods':>7} {'fields':>6}  file")
    for count, methods, fields, info in rows:
        print(f"{info.name:<28} {count:>7} {methods:>7} {fields:>6}  {info.path}")
    missing = set(args.names) - set(classes)
    for name in sorted(missing):
        print(f"{name}: no such class", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
