"""Generate the Python stubs (with .pyi) from proto/ beside the package that owns them.

``proto/folio/v1/x.proto`` becomes ``folio/api/v1/x_pb2.py`` (the public API the
SDK ships) and ``proto/ledger/v1/x.proto`` becomes ``ledger/_proto/v1/x_pb2.py``
(the internal bookie and metadata protocol, which only the server packages use),
and ``proto/broker/v1/x.proto`` becomes ``broker/_proto/v1/x_pb2.py`` (the
brokers' internal protocol, broker to broker, never in the SDK's stubs):
the stubs live in a project package, never in a top-level ``proto`` or
``ledger.v1`` package, so protoc's imports are rewritten to match.

Usage: ``python scripts/gen_protos.py`` writes the stubs;
``python scripts/gen_protos.py --check`` exits 1 when the committed stubs are
stale (what ``make test`` runs).
"""

from __future__ import annotations

import argparse
import filecmp
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto"

# proto path prefix -> python package, most specific first.
PACKAGES = [("folio/v1", "folio.api.v1"), ("ledger/v1", "ledger._proto.v1"),
            ("broker/v1", "broker._proto.v1")]
# The directories that hold generated stubs; __init__.py files are made up to each.
OUTS = [ROOT / "folio" / "api", ROOT / "ledger" / "_proto", ROOT / "broker" / "_proto"]


def _target(relative: Path) -> Path:
    text = relative.as_posix()
    for prefix, package in PACKAGES:
        if text.startswith(prefix + "/"):
            rest = text[len(prefix) + 1 :]
            return ROOT / package.replace(".", "/") / rest
    raise SystemExit(f"gen_protos: no package for {relative}")


def _rewrite(source: str) -> str:
    for prefix, package in PACKAGES:
        dotted = prefix.replace("/", ".")
        source = re.sub(
            rf"^(\s*)from {re.escape(dotted)} import", rf"\1from {package} import", source,
            flags=re.M,
        )
        source = re.sub(
            rf"^(\s*)import {re.escape(dotted)}\.(\w+)",
            rf"\1import {package}.\2", source, flags=re.M,
        )
    return source


def generate(into: Path) -> list[Path]:
    """Run protoc into a scratch dir and lay the results out under ``into``."""
    protos = sorted(PROTO.rglob("*.proto"))
    # The mypy-protobuf plugins sit beside this interpreter (the venv's bin).
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as scratch:
        cmd = [
            sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}",
            f"--python_out={scratch}", f"--grpc_python_out={scratch}",
            f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
            f"--mypy_out={scratch}", f"--mypy_grpc_out={scratch}",
            *[str(p) for p in protos],
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"gen_protos: protoc failed:\n{done.stderr}")
        written: list[Path] = []
        for produced in sorted(Path(scratch).rglob("*")):
            if produced.is_dir():
                continue
            relative = produced.relative_to(scratch)
            target = into / _target(relative).relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_rewrite(produced.read_text()))
            written.append(target)
        tops = {into / out.relative_to(ROOT) for out in OUTS}
        for package_dir in {p.parent for p in written}:
            walk = package_dir
            while walk not in tops:
                init = walk / "__init__.py"
                if not init.exists():
                    init.write_text('"""Generated protocol stubs (scripts/gen_protos.py)."""\n')
                    written.append(init)
                walk = walk.parent
        return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the stubs are stale")
    args = parser.parse_args()
    if not args.check:
        generated_root = ROOT
        for out in OUTS:
            for old in out.rglob("*_pb2*.py*"):
                old.unlink()
        generate(generated_root)
        where = ", ".join(str(out.relative_to(ROOT)) for out in OUTS)
        print(f"gen_protos: stubs written under {where}")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        fresh = generate(Path(scratch))
        stale = []
        for path in fresh:
            committed = ROOT / path.relative_to(scratch)
            if not committed.exists() or not filecmp.cmp(path, committed, shallow=False):
                stale.append(committed.relative_to(ROOT))
        expected = {ROOT / p.relative_to(scratch) for p in fresh}
        extra = [
            p.relative_to(ROOT) for out in OUTS for p in out.rglob("*_pb2*.py*")
            if p not in expected and "__pycache__" not in p.parts  # bytecode is no stub
        ]
    if stale or extra:
        for path in stale:
            print(f"gen_protos: stale or missing: {path}", file=sys.stderr)
        for path in extra:
            print(f"gen_protos: no proto generates: {path}", file=sys.stderr)
        print("gen_protos: run `python scripts/gen_protos.py` and commit", file=sys.stderr)
        return 1
    print("gen_protos: stubs are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
