"""kafkajs (a Node.js Kafka client) for the tests: tests/kafkajs, ``npm ci`` the first time.

The package and its lock file are in tests/kafkajs; ``npm ci`` installs them
there from the npm registry when kafkajs is missing. Under a file lock: the two
workers of ``make test`` may both want it at once, and ``npm ci`` first removes
``node_modules``, which would pull kafkajs from under a test running it.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

__all__ = ["KAFKAJS", "kafkajs_folder"]

#: The folder with package.json, the lock file and the test scripts.
KAFKAJS = Path(__file__).resolve().parents[1] / "kafkajs"


def kafkajs_folder() -> Path:
    """The folder with kafkajs installed (``npm ci`` the first time, once per machine)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node is not None and npm is not None, "kafkajs tests need Node.js and npm"
    with open(KAFKAJS / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (KAFKAJS / "node_modules" / "kafkajs" / "package.json").exists():
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=KAFKAJS, check=True,
                           timeout=300, capture_output=True)
    return KAFKAJS
