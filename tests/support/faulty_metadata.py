"""A ``MetadataStore`` wrapper that fails chosen writes, for deterministic unknown outcomes.

A real store does the work; a rule (``fail``) picks the next matching write
(``create``, ``set`` or ``delete``, by operation and path) and fails it in one
of two ways, as a cut ZooKeeper connection can:

- ``LOST_ANSWER``: the write is applied, then ``MetadataUnavailableError`` is
  raised as if the answer was lost on the way back;
- ``BEFORE``: ``MetadataUnavailableError`` is raised and nothing is applied.

Reads can be failed the same way (``fail_reads``), to make a read-back after a
lost answer fail too. Every other call passes through.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.api import MetadataStore, SessionListener, Versioned, WatchCallback
from ledger.errors import MetadataUnavailableError

__all__ = ["Fault", "FaultyMetadataStore"]


def _any_path(path: str) -> bool:
    return True


class Fault(enum.Enum):
    """How a chosen write fails."""

    LOST_ANSWER = "applied, then the answer lost"
    BEFORE = "refused before it was applied"


@dataclass
class _Rule:
    operation: str
    matches: Callable[[str], bool]
    fault: Fault
    times: int
    fired: list[str] = field(default_factory=list)


class FaultyMetadataStore:
    """``store`` with injected write faults (implements ``ledger.api.MetadataStore``)."""

    def __init__(self, store: MetadataStore) -> None:
        self.inner = store
        self._rules: list[_Rule] = []
        self._failing_reads = 0
        self._failing_read_paths: Callable[[str], bool] = _any_path
        #: The paths of the reads failed so far (to assert a read fault fired).
        self.failed_reads: list[str] = []

    def fail(self, operation: str, matches: Callable[[str], bool], fault: Fault,
             times: int = 1) -> list[str]:
        """Fail the next ``times`` ``operation`` calls on a path ``matches`` accepts.

        Returns the list the failed paths are appended to (to assert it fired).
        """
        if operation not in ("create", "set", "delete"):
            raise ValueError(f"not a write: {operation}")
        rule = _Rule(operation, matches, fault, times)
        self._rules.append(rule)
        return rule.fired

    def fail_reads(self, count: int, matches: Callable[[str], bool] | None = None) -> None:
        """Fail the next ``count`` reads (``get``, ``exists``, ``children``) of matching paths."""
        self._failing_reads = count
        self._failing_read_paths = matches or _any_path

    def _rule(self, operation: str, path: str) -> _Rule | None:
        for rule in self._rules:
            if rule.operation == operation and rule.times > 0 and rule.matches(path):
                rule.times -= 1
                rule.fired.append(path)
                return rule
        return None

    def _check_read(self, path: str) -> None:
        if self._failing_reads > 0 and self._failing_read_paths(path):
            self._failing_reads -= 1
            self.failed_reads.append(path)
            raise MetadataUnavailableError(f"{path}: injected: no answer to a read")

    @staticmethod
    def _lost(path: str) -> MetadataUnavailableError:
        return MetadataUnavailableError(
            f"{path}: injected: connection lost; the change may or may not have been applied")

    async def create(self, path: str, data: bytes = b"", *, make_parents: bool = False,
                     sequential: bool = False, ephemeral: bool = False) -> str:
        rule = self._rule("create", path)
        if rule is not None and rule.fault is Fault.BEFORE:
            raise self._lost(path)
        created = await self.inner.create(path, data, make_parents=make_parents,
                                          sequential=sequential, ephemeral=ephemeral)
        if rule is not None:
            raise self._lost(path)
        return created

    async def set(self, path: str, data: bytes, expected_version: int) -> int:
        rule = self._rule("set", path)
        if rule is not None and rule.fault is Fault.BEFORE:
            raise self._lost(path)
        version = await self.inner.set(path, data, expected_version)
        if rule is not None:
            raise self._lost(path)
        return version

    async def delete(self, path: str, expected_version: int = -1) -> None:
        rule = self._rule("delete", path)
        if rule is not None and rule.fault is Fault.BEFORE:
            raise self._lost(path)
        await self.inner.delete(path, expected_version)
        if rule is not None:
            raise self._lost(path)

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> Versioned:
        self._check_read(path)
        return await self.inner.get(path, watch=watch)

    async def exists(self, path: str) -> bool:
        self._check_read(path)
        return await self.inner.exists(path)

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        self._check_read(path)
        return await self.inner.children(path, watch=watch)

    async def close(self) -> None:
        await self.inner.close()

    def add_session_listener(self, listener: SessionListener) -> None:
        self.inner.add_session_listener(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        self.inner.remove_session_listener(listener)
