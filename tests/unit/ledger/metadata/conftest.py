"""Helpers and fixtures shared by the tests of this folder (moved from test_rocksdb_store.py)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ledger.api import EventType
from ledger.metadata.rocksdb_store import RocksDBMetadataStore

REPO_ROOT = Path(__file__).resolve().parents[3]
THREAD_TIMEOUT_S = 30.0


class Recorder:
    """A watch callback that records what it saw."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, str]] = []

    def __call__(self, event: EventType, path: str) -> None:
        self.events.append((event, path))


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "metadata")


@pytest.fixture
async def store(data_dir: str) -> AsyncIterator[RocksDBMetadataStore]:
    metadata_store = RocksDBMetadataStore(data_dir)
    yield metadata_store
    await metadata_store.close()


def run_in_threads(count: int, target: object) -> list[object]:
    """Run ``target(index)`` on ``count`` threads started together; return results or errors."""
    assert callable(target)
    barrier = threading.Barrier(count, timeout=THREAD_TIMEOUT_S)
    results: list[object] = [None] * count

    def body(index: int) -> None:
        barrier.wait()
        try:
            results[index] = target(index)
        except Exception as error:
            results[index] = error

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_TIMEOUT_S)
        assert not thread.is_alive()
    return results
