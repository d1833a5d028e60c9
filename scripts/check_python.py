"""The Makefile's first step: is ``$(PYTHON)`` new enough, and is ``.venv`` its own?

Run by the interpreter the Makefile will build the venv with, before anything
else: ``python3 scripts/check_python.py .venv [--dry-run]``. It exits 1 with a
one-paragraph message when that interpreter is older than Python 3.11 (so an
old ``python3`` fails here, clearly, and not in the middle of a pip install).
A ``.venv`` that another interpreter made (a different major.minor version,
or a ``bin/python`` that is a dangling link or does not run) is removed, so
that make builds it afresh; ``--dry-run`` (``make -n``) only reports it.

This file must stay parseable by old Pythons (no f-strings, no annotations):
its job is to tell them they are too old.
"""

import os
import shutil
import subprocess
import sys

if False:  # typing only (mypy reads the type comments); old Pythons skip it
    from typing import List, Optional  # noqa: F401

REQUIRED = (3, 11)


def _version_of(python):
    # type: (str) -> Optional[str]
    """The "major.minor" of the interpreter ``python``, or None if it does not run."""
    try:
        output = subprocess.check_output(
            [python, "-c", "import sys; print('{}.{}'.format(*sys.version_info[:2]))"],
            stderr=subprocess.STDOUT)
    except (OSError, subprocess.CalledProcessError):
        return None
    return output.decode("ascii", "replace").strip()


def stale_reason(venv, version):
    # type: (str, str) -> Optional[str]
    """Why ``venv`` cannot be used with Python ``version`` ("3.11"), or None if it can."""
    if not os.path.lexists(venv):
        return None
    python = os.path.join(venv, "bin", "python")
    if not os.path.lexists(python):
        return "it has no bin/python"
    if not os.path.exists(python):
        return "its bin/python is a dangling link to {}".format(os.path.realpath(python))
    found = _version_of(python)
    if found is None:
        return "its bin/python does not run"
    if found != version:
        return "it was made by Python {}, not by this Python {}".format(found, version)
    return None


def main(argv):
    # type: (List[str]) -> int
    if len(argv) < 2:
        sys.stderr.write("usage: check_python.py VENV [--dry-run]\n")
        return 2
    venv = argv[1]
    dry_run = "--dry-run" in argv[2:]
    version = "{}.{}".format(*sys.version_info[:2])
    if tuple(sys.version_info[:2]) < REQUIRED:
        sys.stderr.write(
            "make: Folio needs Python {}.{} or newer, but {} is Python {}.\n"
            "  Install a newer Python (e.g. apt-get install python3.11 python3.11-venv)\n"
            "  and run make with it: make PYTHON=python3.11 run\n".format(
                REQUIRED[0], REQUIRED[1], sys.executable or "python3", version))
        return 1
    reason = stale_reason(venv, version)
    if reason is not None:
        if dry_run:
            sys.stderr.write("make: {} would be rebuilt: {}\n".format(venv, reason))
        else:
            sys.stderr.write("make: rebuilding {}: {}\n".format(venv, reason))
            shutil.rmtree(venv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
