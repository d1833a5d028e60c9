"""Run the image `make image` built (build/folio-image.tar) with buildah, as tests need.

The same storage as ``scripts/build_image.sh`` (vfs under build/containers/,
chroot isolation): a working container is made from the OCI archive, and
commands run in it with ``buildah run``, which shares the host's network, so
a server in the container listens on the host's loopback. Nothing here needs
a Docker engine or a registry.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ARCHIVE", "Buildah", "Container"]

ROOT = Path(__file__).resolve().parents[2]
#: What `make image` writes.
ARCHIVE = ROOT / "build" / "folio-image.tar"
_STORE = ROOT / "build" / "containers"
#: Deadline of one short `buildah` command (inspect, run of a CLI command).
COMMAND_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Buildah:
    """The ``buildah`` command on the project's own storage."""

    root: Path = _STORE / "root"
    runroot: Path = _STORE / "run"

    def argv(self, *args: str) -> list[str]:
        """The command line of ``buildah ARGS`` on this storage."""
        return ["buildah", "--root", str(self.root), "--runroot", str(self.runroot),
                "--storage-driver", "vfs", *args]

    def run(self, *args: str, stdin: bytes | None = None,
            timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
        """Run ``buildah ARGS`` to completion (stdout and stderr captured)."""
        return subprocess.run(self.argv(*args), input=stdin, capture_output=True,
                              timeout=timeout_s, check=False,
                              env={**os.environ, "BUILDAH_ISOLATION": "chroot"})

    def from_archive(self, archive: Path = ARCHIVE) -> Container:
        """A new working container of the image in ``archive``."""
        name = f"folio-test-{uuid.uuid4().hex[:8]}"
        result = self.run("from", "--quiet", "--pull-never", "--name", name,
                          f"oci-archive:{archive}")
        if result.returncode != 0:
            raise AssertionError(f"buildah from {archive} failed: {result.stderr.decode()}")
        return Container(self, name)


@dataclass(frozen=True)
class Container:
    """One working container (``buildah from``); ``remove`` when done."""

    buildah: Buildah
    name: str

    def config(self) -> dict[str, Any]:
        """The image's OCI config (``Entrypoint``, ``Cmd``, ``User``, ``Volumes`` ...)."""
        result = self.buildah.run("inspect", "--type", "container", self.name)
        assert result.returncode == 0, result.stderr.decode()
        config: dict[str, Any] = json.loads(result.stdout)["OCIv1"]["config"]
        return config

    def drop_image_volumes(self) -> None:
        """Forget the image's ``VOLUME`` paths in this container (``buildah config --volume P-``).

        With both the image's anonymous volume and a ``--volume HOST:PATH`` at one
        path, ``buildah run`` mounts them in no fixed order, so the process may
        write into the anonymous one; a pod's volume mount replaces it instead.
        """
        for path in self.config().get("Volumes") or {}:
            result = self.buildah.run("config", "--volume", f"{path}-", self.name)
            assert result.returncode == 0, result.stderr.decode()

    def run_argv(self, argv: Sequence[str], options: Sequence[str] = ()) -> list[str]:
        """The ``buildah run`` command line of ``argv`` in this container.

        ``options``: more ``buildah run`` options (``--volume HOST:PATH``, ``--env K=V``).
        """
        return self.buildah.argv("run", "--isolation", "chroot", *options, self.name, "--",
                                 *argv)

    def exec(self, argv: Sequence[str], *, stdin: bytes | None = None,
             options: Sequence[str] = (),
             timeout_s: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` in the container to completion (as the image's user)."""
        return subprocess.run(self.run_argv(argv, options), input=stdin, capture_output=True,
                              timeout=timeout_s, check=False)

    def start(self, argv: Sequence[str], log_path: Path,
              options: Sequence[str] = ()) -> subprocess.Popen[bytes]:
        """Start ``argv`` in the container; stdout a pipe, stderr to ``log_path``.

        In a session of its own, so ``stop`` signals buildah and the process
        it runs together.
        """
        with log_path.open("ab") as log:
            return subprocess.Popen(self.run_argv(argv, options), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=log, bufsize=0,
                                    start_new_session=True)

    @staticmethod
    def stop(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> int:
        """SIGTERM the command ``start`` ran, wait for buildah to end; its exit code.

        The signal goes to the innermost process (the command itself): buildah's
        chroot helpers between it and ``process`` kill it outright when they get
        SIGTERM, which would not be the clean stop under test. After
        ``timeout_s`` the whole group is SIGKILLed.
        """
        for leaf in _leaves(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(leaf, signal.SIGTERM)
        try:
            return process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            return process.wait(timeout_s)
        finally:
            # Whatever of the group outlived buildah (it should not) goes too.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            if process.stdout is not None:
                process.stdout.close()

    def remove(self) -> None:
        """Delete the working container."""
        self.buildah.run("rm", self.name)


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            children.extend(int(child) for child in (task / "children").read_text().split())
    return children


def _leaves(pid: int) -> list[int]:
    """The descendants of ``pid`` that have no children of their own (``pid`` if none)."""
    children = _children(pid)
    if not children:
        return [pid]
    return [leaf for child in children for leaf in _leaves(child)]
