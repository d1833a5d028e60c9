"""The embedded ``MetadataStore``: ZooKeeper-shaped nodes kept in a RocksDB directory.

Standalone Folio keeps ledger metadata and its other coordination state here;
a cluster uses ZooKeeper behind the same ``ledger.api.MetadataStore`` Protocol.
Open a store with the plain constructor ``RocksDBMetadataStore(data_dir)`` and
``await store.close()`` it when done (it is also an async context manager).

The on-disk layout (key spaces, node records) is in ``_layout``.

Every change is one synced write (a ``WriteBatch`` when it touches several
keys), so it is durable and atomic before the call returns. One
``threading.Lock`` serialises all calls: metadata calls are rare, and the
methods are ``async`` only so that a ZooKeeper store fits the same Protocol.
The RocksDB work runs inline on the caller's thread (rocksdict keeps the GIL
through a synced write, so a worker thread would not help).

Watches are one-shot callbacks, called on the thread that made the change,
after the change is written and after the store's lock is released.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from ledger.api import EventType, SessionListener, Versioned, WatchCallback
from ledger.errors import (
    BadVersionError,
    InvalidArgumentError,
    MetadataError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from ledger.metadata._layout import (
    EPHEMERAL_PREFIX,
    MAX_SEQUENCE,
    SEQUENCE,
    SEQUENCE_DIGITS,
    Node,
    child_names,
    decode_node,
    encode_node,
    ephemeral_key,
    has_children,
    keys_with_prefix,
    node_key,
    sequence_key,
)
from ledger.metadata.paths import parent_path, validate_path

__all__ = ["RocksDBMetadataStore"]

logger = logging.getLogger(__name__)

# One event to deliver once the lock is released: (callback, event, path).
_Notification = tuple[WatchCallback, EventType, str]


def _check_data(data: object) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentError(f"node data must be bytes, got {type(data).__name__}")
    return bytes(data)


def _check_expected_version(expected_version: int) -> None:
    if expected_version < -1:
        raise InvalidArgumentError(
            f"expected_version must be -1 (any) or a version >= 0, got {expected_version}"
        )


class RocksDBMetadataStore:
    """A ``ledger.api.MetadataStore`` in a RocksDB directory, for one process.

    The store is its own session: its ephemeral nodes are deleted by
    ``close()``, and ephemeral nodes left by a previous process that crashed
    are deleted when the directory is opened again (as ZooKeeper expires a
    dead session). Ephemeral nodes cannot have children.

    Sequential names get a 10-digit, zero-padded counter kept per parent,
    starting at 0 and never reused while the parent exists, even after its
    children are deleted or the store is reopened.

    Args:
        data_dir: the RocksDB directory; created if missing.

    Raises:
        MetadataError: the directory cannot be opened, e.g. because another
            process (or another store in this process) holds it open.
    """

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self._data_dir = os.fspath(data_dir)
        self._lock = threading.Lock()
        self._data_watches: dict[str, list[WatchCallback]] = {}
        self._child_watches: dict[str, list[WatchCallback]] = {}
        self._write_options = WriteOptions()
        # Durable before return: every change is fsynced (the property is named
        # `sync`; rocksdict's docstring's `set_sync()` does not exist).
        self._write_options.sync = True
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        try:
            os.makedirs(self._data_dir, exist_ok=True)
            # rocksdict raises a plain Exception, e.g. when the LOCK file is held.
            self._db: Any = Rdict(self._data_dir, options)
        except Exception as error:
            hint = (
                " (another process, or another store in this process, holds it open)"
                if "lock" in str(error).lower()
                else ""
            )
            raise MetadataError(
                f"cannot open metadata store at {self._data_dir}{hint}: {error}"
            ) from error
        self._closed = False
        try:
            with self._lock:
                root_key = node_key("/")
                if self._db.get(root_key) is None:
                    self._db.put(root_key, encode_node(0, False, b""), self._write_options)
                removed = self._remove_ephemerals_locked()
        except BaseException:
            self._closed = True
            self._db.close()
            raise
        if removed:
            logger.info(
                "removed %d ephemeral nodes left by a previous session in %s",
                len(removed), self._data_dir,
            )

    @property
    def data_dir(self) -> str:
        """The RocksDB directory of this store."""
        return self._data_dir

    async def __aenter__(self) -> RocksDBMetadataStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- MetadataStore ---------------------------------------------------------------

    async def create(
        self, path: str, data: bytes = b"", *, make_parents: bool = False,
        sequential: bool = False, ephemeral: bool = False,
    ) -> str:
        """Create a node and return its path.

        With ``sequential`` the parent's next 10-digit counter is appended to
        ``path`` (``/q/item-`` -> ``/q/item-0000000000``). With
        ``make_parents`` missing ancestors are created, persistent and empty,
        in the same atomic write. Fires CREATED data watches on each created
        node and CHILDREN watches on each parent that gained a child.

        Raises:
            InvalidArgumentError: a bad path or data, or a parent that is ephemeral.
            NodeExistsError: the node exists (for ``sequential``: a node made
                with the next name by hand; the counter is then not advanced).
            NoNodeError: the parent is missing and ``make_parents`` is false.
            MetadataError: the store is closed or the write failed.
        """
        if sequential:
            # The counter completes the name, so `/q/` is a valid sequential prefix.
            validate_path(path + "0" * SEQUENCE_DIGITS)
        else:
            validate_path(path)
        data = _check_data(data)
        notifications: list[_Notification] = []
        with self._lock:
            db = self._require_open()
            batch = WriteBatch(raw_mode=True)
            parent = parent_path(path + "0" if sequential else path)
            created = self._add_parents_locked(db, batch, parent, make_parents)
            if sequential:
                counter_key = sequence_key(parent)
                raw_sequence = db.get(counter_key)
                sequence = 0 if raw_sequence is None else SEQUENCE.unpack(raw_sequence)[0]
                if sequence > MAX_SEQUENCE:
                    raise MetadataError(f"{parent}: sequential counter exhausted")
                path = f"{path}{sequence:0{SEQUENCE_DIGITS}d}"
                batch.put(counter_key, SEQUENCE.pack(sequence + 1))
            if path == "/" or db.get(node_key(path)) is not None:
                raise NodeExistsError(f"{path}: node exists")
            batch.put(node_key(path), encode_node(0, ephemeral, data))
            if ephemeral:
                batch.put(ephemeral_key(path), b"")
            created.append(path)
            self._write_locked(batch)
            for created_path in created:
                self._pop_watches_locked(
                    self._data_watches, created_path, EventType.CREATED, notifications
                )
                self._pop_watches_locked(
                    self._child_watches, parent_path(created_path), EventType.CHILDREN,
                    notifications,
                )
        _deliver(notifications)
        return path

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> Versioned:
        """The node's data and version.

        A ``watch`` is registered even when the node is missing; it fires
        once: CHANGED or DELETED, or CREATED if the node was missing.

        Raises:
            NoNodeError: the node does not exist.
            InvalidArgumentError: a bad path.
            MetadataError: the store is closed.
        """
        validate_path(path)
        with self._lock:
            db = self._require_open()
            node = self._read_locked(db, path)
            if watch is not None:
                _add_watch(self._data_watches, path, watch)
            if node is None:
                raise NoNodeError(f"{path}: no node")
            return Versioned(data=node.data, version=node.version)

    async def exists(self, path: str) -> bool:
        """Whether the node exists.

        Raises:
            InvalidArgumentError: a bad path.
            MetadataError: the store is closed.
        """
        validate_path(path)
        with self._lock:
            db = self._require_open()
            return db.get(node_key(path)) is not None

    async def set(self, path: str, data: bytes, expected_version: int) -> int:
        """Replace the node's data if its version is ``expected_version`` (-1: any).

        Returns the new version (the old one + 1) and fires CHANGED data watches.

        Raises:
            NoNodeError: the node does not exist.
            BadVersionError: the node's version is not ``expected_version``.
            InvalidArgumentError: a bad path, data or expected version.
            MetadataError: the store is closed or the write failed.
        """
        validate_path(path)
        data = _check_data(data)
        _check_expected_version(expected_version)
        notifications: list[_Notification] = []
        with self._lock:
            db = self._require_open()
            node = self._read_locked(db, path)
            if node is None:
                raise NoNodeError(f"{path}: no node")
            if expected_version not in (-1, node.version):
                raise BadVersionError(path, expected_version, node.version)
            new_version = node.version + 1
            batch = WriteBatch(raw_mode=True)
            batch.put(node_key(path), encode_node(new_version, node.ephemeral, data))
            self._write_locked(batch)
            self._pop_watches_locked(self._data_watches, path, EventType.CHANGED, notifications)
        _deliver(notifications)
        return new_version

    async def delete(self, path: str, expected_version: int = -1) -> None:
        """Delete a childless node if its version is ``expected_version`` (-1: any).

        Fires DELETED on the node's data and child watches and CHILDREN on
        its parent's child watches. The node's sequential counter goes with it.

        Raises:
            NoNodeError: the node does not exist.
            BadVersionError: the node's version is not ``expected_version``.
            NotEmptyError: the node has children.
            InvalidArgumentError: a bad path or version, or the root.
            MetadataError: the store is closed or the write failed.
        """
        validate_path(path)
        _check_expected_version(expected_version)
        if path == "/":
            raise InvalidArgumentError("the root node '/' cannot be deleted")
        notifications: list[_Notification] = []
        with self._lock:
            db = self._require_open()
            node = self._read_locked(db, path)
            if node is None:
                raise NoNodeError(f"{path}: no node")
            if expected_version not in (-1, node.version):
                raise BadVersionError(path, expected_version, node.version)
            if has_children(db, path):
                raise NotEmptyError(f"{path}: node has children")
            batch = WriteBatch(raw_mode=True)
            self._delete_node(batch, path)
            self._write_locked(batch)
            self._collect_deletion_locked(path, notifications)
        _deliver(notifications)

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        """Names (not paths) of the node's children, sorted by code point.

        A ``watch`` fires once: CHILDREN when a child is created or deleted,
        DELETED when the node is deleted. It is not set if the node is missing.

        Raises:
            NoNodeError: the node does not exist.
            InvalidArgumentError: a bad path.
            MetadataError: the store is closed.
        """
        validate_path(path)
        with self._lock:
            db = self._require_open()
            if db.get(node_key(path)) is None:
                raise NoNodeError(f"{path}: no node")
            names = child_names(db, path)
            if watch is not None:
                _add_watch(self._child_watches, path, watch)
            return names

    async def close(self) -> None:
        """Delete this session's ephemeral nodes and close the database. Idempotent.

        Watches on the deleted ephemerals fire; other pending watches never will.
        """
        notifications: list[_Notification] = []
        with self._lock:
            if self._closed:
                return
            try:
                for path in self._remove_ephemerals_locked():
                    self._collect_deletion_locked(path, notifications)
            finally:
                self._closed = True
                self._data_watches.clear()
                self._child_watches.clear()
                self._db.close()
        _deliver(notifications)

    def add_session_listener(self, listener: SessionListener) -> None:
        """Nothing to report: the store is its own session, alive until ``close``."""

    def remove_session_listener(self, listener: SessionListener) -> None:
        """Nothing to remove (``add_session_listener`` keeps nothing)."""

    # -- internals (the caller holds self._lock) ---------------------------------------

    def _require_open(self) -> Any:
        if self._closed:
            raise MetadataError(f"metadata store at {self._data_dir} is closed")
        return self._db

    def _read_locked(self, db: Any, path: str) -> Node | None:
        value = db.get(node_key(path))
        return None if value is None else decode_node(path, value)

    def _write_locked(self, batch: Any) -> None:
        try:
            self._db.write(batch, self._write_options)
        except Exception as error:  # rocksdict raises plain Exception on I/O errors
            raise MetadataError(
                f"metadata store at {self._data_dir}: write failed: {error}"
            ) from error

    def _add_parents_locked(
        self, db: Any, batch: Any, parent: str, make_parents: bool
    ) -> list[str]:
        """Check ``parent`` exists and may have children; queue missing ancestors.

        Returns the ancestors queued for creation, outermost first.
        """
        missing: list[str] = []
        ancestor = parent
        node = self._read_locked(db, ancestor)
        while node is None:
            if not make_parents:
                raise NoNodeError(f"{parent}: parent node does not exist")
            missing.append(ancestor)
            ancestor = parent_path(ancestor)
            node = self._read_locked(db, ancestor)
        if node.ephemeral:
            raise InvalidArgumentError(f"{ancestor}: an ephemeral node cannot have children")
        missing.reverse()
        for path in missing:
            batch.put(node_key(path), encode_node(0, False, b""))
        return missing

    @staticmethod
    def _delete_node(batch: Any, path: str) -> None:
        batch.delete(node_key(path))
        batch.delete(sequence_key(path))
        batch.delete(ephemeral_key(path))

    def _remove_ephemerals_locked(self) -> list[str]:
        """Delete every ephemeral node in one synced batch; return their paths."""
        paths = [key[len(EPHEMERAL_PREFIX) :].decode("utf-8")
                 for key in keys_with_prefix(self._db, EPHEMERAL_PREFIX)]
        if paths:
            batch = WriteBatch(raw_mode=True)
            for path in paths:
                self._delete_node(batch, path)
            self._write_locked(batch)
        return paths

    def _collect_deletion_locked(self, path: str, notifications: list[_Notification]) -> None:
        deleted = self._data_watches.pop(path, [])
        deleted += [c for c in self._child_watches.pop(path, []) if c not in deleted]
        notifications.extend((callback, EventType.DELETED, path) for callback in deleted)
        self._pop_watches_locked(
            self._child_watches, parent_path(path), EventType.CHILDREN, notifications
        )

    @staticmethod
    def _pop_watches_locked(
        watches: dict[str, list[WatchCallback]], path: str, event: EventType,
        notifications: list[_Notification],
    ) -> None:
        notifications.extend((callback, event, path) for callback in watches.pop(path, []))


def _add_watch(watches: dict[str, list[WatchCallback]], path: str, watch: WatchCallback) -> None:
    # As in ZooKeeper, the same callback set twice on one node fires once.
    callbacks = watches.setdefault(path, [])
    if watch not in callbacks:
        callbacks.append(watch)


def _deliver(notifications: Iterable[_Notification]) -> None:
    for callback, event, path in notifications:
        try:
            callback(event, path)
        except Exception:
            # A broken watcher must not break the store nor the other watchers.
            logger.exception(
                "metadata watch callback %r failed on %s %s", callback, event.value, path
            )


