"""A RocksDB store whose writes fail on demand: the storage fault a test can own.

Passed as ``open_kv`` to ``Bookie``: every store it opens (the first and each
reopen after a failure) is a real ``Rdict`` behind a wrapper whose ``write``
raises the message in ``failing`` while it is set, as RocksDB raises an I/O
error on a full disk or a read-only data dir (Pulsar's managed ledger tests
inject faults the same way, with ``fail_now`` on their fakes).
"""

from __future__ import annotations

from typing import Any

from rocksdict import Options, Rdict

__all__ = ["FaultyKV"]

#: What RocksDB says when the disk is full.
DISK_FULL = "IO error: No space left on device: While appending to file: 000009.log"


class FaultyKV:
    """Opens wrapped stores; ``fail_now()`` makes their writes fail, ``heal()`` stops it."""

    def __init__(self) -> None:
        self.failing: str | None = None
        self.failed_writes = 0

    def fail_now(self, message: str = DISK_FULL) -> None:
        """Every write fails with ``message`` from now on."""
        self.failing = message

    def heal(self) -> None:
        """Writes succeed again."""
        self.failing = None

    def open(self, path: str, options: Options) -> Any:
        """The ``open_kv`` seam of ``Bookie``."""
        return _FaultyRdict(Rdict(path, options), self)


class _FaultyRdict:
    def __init__(self, db: Rdict, faults: FaultyKV) -> None:
        self._db = db
        self._faults = faults

    def write(self, batch: Any, options: Any = None) -> None:
        if self._faults.failing is not None:
            self._faults.failed_writes += 1
            raise Exception(self._faults.failing)  # rocksdict raises plain Exception
        self._db.write(batch, options) if options is not None else self._db.write(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)
