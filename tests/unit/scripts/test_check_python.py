"""The Makefile's Python check (scripts/check_python.py), through ``make -n`` and directly.

No network and no pip: ``make -n`` prints the recipes without running them,
and the check runs at parse time, before any recipe. An "old Python" is the
real interpreter told it is 3.9 (a wrapper sets ``sys.version_info`` and runs
the script), which is what the check reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Every test here runs make or a Python subprocess.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "check_python.py"



def _fake_python(tmp_path: Path, version: tuple[int, int]) -> Path:
    """An executable that runs the real Python as if it were ``version``."""
    fake = tmp_path / f"python{version[0]}.{version[1]}"
    fake.write_text(
        "#!/bin/sh\n"
        f"exec {sys.executable} -c 'import runpy, sys; "
        f"sys.version_info = ({version[0]}, {version[1]}, 0, \"final\", 0); "
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name=\"__main__\")' \"$@\"\n")
    fake.chmod(0o755)
    return fake


def _make_n(goal: str, **variables: str) -> subprocess.CompletedProcess[str]:
    args = ["make", "-n", "--no-print-directory", "-C", str(ROOT), goal,
            *(f"{name}={value}" for name, value in variables.items())]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def test_make_run_installs_only_the_runtime(tmp_path: Path) -> None:
    result = _make_n("run", VENV=str(tmp_path / "venv"))
    assert result.returncode == 0, result.stderr
    installs = [line for line in result.stdout.splitlines() if "pip install" in line]
    # The runtime: cluster mode, token authentication and the Kafka listener, nothing else.
    assert installs[-1].endswith("pip install --quiet -e '.[cluster,security,kafka]'")
    assert "[dev" not in result.stdout and "spark" not in result.stdout
    assert result.stdout.splitlines()[-1].endswith("folio standalone")


def test_make_test_installs_everything(tmp_path: Path) -> None:
    result = _make_n("test", VENV=str(tmp_path / "venv"))
    assert result.returncode == 0, result.stderr
    assert "pip install --quiet -e '.[dev,spark]'" in result.stdout


def test_old_python_fails_early_with_a_clear_message(tmp_path: Path) -> None:
    old = _fake_python(tmp_path, (3, 9))
    result = _make_n("run", PYTHON=str(old), VENV=str(tmp_path / "venv"))
    assert result.returncode != 0
    assert "Folio needs Python 3.11 or newer" in result.stderr
    assert "is Python 3.9" in result.stderr
    assert "pip install" not in result.stdout  # stopped before any recipe
    assert not (tmp_path / "venv").exists()


def test_dangling_venv_python_is_reported_by_make_n_and_removed_by_the_check(
        tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(tmp_path / "gone" / "python3.10")
    result = _make_n("run", VENV=str(venv))
    assert result.returncode == 0, result.stderr
    assert "would be rebuilt: its bin/python is a dangling link" in result.stderr
    assert venv.exists()  # -n changes nothing
    checked = subprocess.run([sys.executable, str(SCRIPT), str(venv)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0
    assert "rebuilding" in checked.stderr
    assert not os.path.lexists(venv)


def test_venv_of_another_python_version_is_rebuilt(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # All the check asks a venv's python is its version.
    (venv / "bin" / "python").write_text("#!/bin/sh\necho 3.12\n")
    (venv / "bin" / "python").chmod(0o755)
    checked = subprocess.run([sys.executable, str(SCRIPT), str(venv)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stderr
    mine = "{}.{}".format(*sys.version_info[:2])
    assert f"it was made by Python 3.12, not by this Python {mine}" in checked.stderr
    assert not venv.exists()


def test_own_venv_is_kept(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    checked = subprocess.run([sys.executable, str(SCRIPT), str(venv)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert (checked.returncode, checked.stderr) == (0, "")
    assert venv.exists()


def test_make_itself_removes_a_stale_venv_before_any_rule(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(tmp_path / "gone" / "python3.10")
    # A goal with no rule: make parses the Makefile (and checks) and stops, installing nothing.
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), f"VENV={venv}",
                             "no-such-goal"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert "rebuilding" in result.stderr and "dangling link" in result.stderr
    assert "No rule to make target 'no-such-goal'" in result.stderr
    assert not os.path.lexists(venv)
