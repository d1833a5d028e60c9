"""The built image (build/folio-image.tar, `make image`), run with buildah.

Marked ``image``: ``make test`` leaves these out (they need root, buildah and
a built image); ``make test-image`` builds the image and runs them, and
``.ci/run`` runs it after ``make test``. Without the archive they fail,
saying to run ``make image``: never a skip.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from folio._version import __version__
from tests.support.bookies import START_TIMEOUT_S, wait_for_ready_line
from tests.support.buildah import ARCHIVE, ROOT, Buildah, Container

pytestmark = [pytest.mark.image, pytest.mark.timeout(600)]

VERSION = __version__  # pyproject.toml reads it there
_LISTENING = re.compile(r"listening on (?P<host>\S+):(?P<port>\d+)\b")


@pytest.fixture(scope="module")
def container() -> Iterator[Container]:
    """A working container of the built image, removed at the end."""
    assert ARCHIVE.is_file(), f"{ARCHIVE} is missing: run `make image` (or `make test-image`)"
    made = Buildah().from_archive()
    yield made
    made.remove()


def _entrypoint(container: Container) -> list[str]:
    entrypoint: list[str] = container.config()["Entrypoint"]
    return entrypoint


def test_image_config(container: Container) -> None:
    """`folio` is the entry point, the user is not root, data is a volume."""
    config = container.config()
    assert config["Entrypoint"] == ["folio"]
    assert config["User"] == "10001:10001"
    assert "/data" in config["Volumes"]
    assert config["WorkingDir"] == "/data"
    assert config["Cmd"] == ["standalone", "--host", "0.0.0.0", "--data-dir", "/data"]


def test_entry_point_version(container: Container) -> None:
    result = container.exec([*_entrypoint(container), "--version"])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip() == f"folio {VERSION}"


def test_cluster_commands_are_there(container: Container) -> None:
    """The chart's commands: bookie, broker and cluster init, with kazoo (the cluster extra)."""
    entry = _entrypoint(container)
    for command in (["bookie", "--help"], ["broker", "--help"], ["cluster", "init", "--help"]):
        result = container.exec([*entry, *command])
        assert result.returncode == 0, (command, result.stderr.decode())
        assert b"--metadata-url" in result.stdout, command
    kazoo = container.exec(["python3", "-c", "import kazoo.client"])
    assert kazoo.returncode == 0, kazoo.stderr.decode()


def test_every_runtime_extra_is_installed(container: Container) -> None:
    """What a chart value can turn on imports in the image: kazoo (cluster), PyJWT with
    its crypto (security: tokens), kio and the codecs (kafka: --kafka-port); the extras
    the Containerfile, scripts/build_image.sh and `make run` install are the same."""
    script = ("import kazoo.client, jwt, cryptography, kio, kafka.record, crc32c, snappy, "
              "lz4.frame, zstandard; print('ok')")
    result = container.exec(["python3", "-c", script])
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().strip() == "ok"
    extras = "cluster,security,kafka"
    assert f"'folio[{extras}]'" in (ROOT / "deploy" / "Containerfile").read_text()
    assert f"FOLIO_EXTRAS={extras}\n" in (ROOT / "scripts" / "build_image.sh").read_text()
    assert f"-e '.[{extras}]'" in (ROOT / "Makefile").read_text()


def test_runtime_only_and_not_root(container: Container) -> None:
    """No compiler in the image; its processes run as uid 10001; /data is theirs."""
    script = ("for tool in gcc cc c++ make; do command -v $tool && exit 1; done; "
              "id -u; test -w /data && echo writable")
    result = container.exec(["sh", "-c", script])
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
    assert result.stdout.decode().split() == ["10001", "writable"]


def test_standalone_answers_produce_and_consume(container: Container, tmp_path: Path) -> None:
    """The image's standalone serves; the image's CLI creates a topic, produces, consumes."""
    entry = _entrypoint(container)
    server = container.start(
        [*entry, "standalone", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0",
         "--data-dir", "/data/standalone"], tmp_path / "standalone.log")
    try:
        line = wait_for_ready_line(server, START_TIMEOUT_S, tmp_path / "standalone.log")
        match = _LISTENING.search(line)
        assert match is not None, line
        endpoint = f"127.0.0.1:{match['port']}"

        created = container.exec([*entry, "--endpoint", endpoint, "topic", "create", "orders"])
        assert created.returncode == 0, created.stderr.decode()
        produced = container.exec([*entry, "--endpoint", endpoint, "produce", "orders"],
                                  stdin=b"first\nsecond\nthird\n")
        assert produced.returncode == 0, produced.stderr.decode()
        assert b"3 events acknowledged" in produced.stderr
        consumed = container.exec([*entry, "--endpoint", endpoint, "consume", "orders",
                                   "--from-beginning", "--max-events", "3",
                                   "--timeout-ms", "30000"])
        assert consumed.returncode == 0, consumed.stderr.decode()
        assert consumed.stdout.decode().splitlines() == ["first", "second", "third"]
    finally:
        code = Container.stop(server)
    assert code == 0, (tmp_path / "standalone.log").read_text()
