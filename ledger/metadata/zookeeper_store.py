"""The cluster's ``MetadataStore``: ZooKeeper through kazoo.

Open one with ``await ZooKeeperMetadataStore.connect(url)`` (a
``zk://HOST:PORT[,...]/CHROOT`` URL, ``metadata_url``) and ``await
store.close()`` it (it is also an async context manager). Every path is
relative to the URL's chroot, which must exist (``folio cluster init`` makes
it) unless ``create_chroot`` is given.

How kazoo meets asyncio: kazoo runs its own threads (connection, callbacks).
Each call uses kazoo's ``*_async`` API, whose completion (on a kazoo thread)
is handed to the store's loop by ``call_soon_threadsafe``, so no call blocks
the loop. Watch callbacks and session listeners are delivered the same way,
on the loop the store was connected on, one at a time and in the order kazoo
saw them. (The embedded RocksDB store calls watches inline on the thread that
made the change; callers must not depend on either: the Protocol only says a
watch fires after its change is visible.)

Errors are those of the embedded store (``NoNodeError``, ``NodeExistsError``,
``BadVersionError``, ``NotEmptyError``, ``InvalidArgumentError``), plus
``MetadataUnavailableError`` (retriable) when ZooKeeper cannot answer: the
connection is lost, or a call got no answer within ``operation_timeout_ms``
(kazoo itself queues calls while it reconnects and never gives up), and its
subclass ``MetadataSessionExpiredError`` when the session expired. A change
that raised either may or may not have been applied.

Sessions: kazoo reconnects by itself. ``add_session_listener`` reports
``CONNECTED`` / ``SUSPENDED`` (connection lost, session maybe alive) / ``LOST``
(session expired: ephemeral nodes and pending watches gone; kazoo then opens
a new session and ``CONNECTED`` follows). Pending watches of an expired session
never fire; their owners learn of it from ``LOST``.

ZooKeeper refuses requests above about 1 MiB (``jute.maxbuffer``) by dropping
the connection; node data above ``MAX_NODE_BYTES`` is refused here first with
``InvalidArgumentError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

from kazoo import exceptions as kazoo_errors
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KazooEventType

from ledger.api import EventType, SessionListener, SessionState, Versioned, WatchCallback
from ledger.errors import (
    BadVersionError,
    InvalidArgumentError,
    MetadataError,
    MetadataSessionExpiredError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from ledger.metadata.metadata_url import MetadataUrl, parse_metadata_url
from ledger.metadata.paths import validate_path

__all__ = [
    "DEFAULT_OPERATION_TIMEOUT_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "MAX_NODE_BYTES",
    "ChrootMissingError",
    "ZooKeeperMetadataStore",
]

logger = logging.getLogger(__name__)

#: ZooKeeper session timeout asked for by default: a broker or bookie that
#: dies is noticed (its ephemeral nodes vanish) this long after its last word.
DEFAULT_SESSION_TIMEOUT_MS = 6_000
#: A call that got no answer by then raises ``MetadataUnavailableError``.
DEFAULT_OPERATION_TIMEOUT_MS = 15_000
#: Largest node data accepted (ZooKeeper's default jute.maxbuffer is 1 MiB per request).
MAX_NODE_BYTES = 1_000_000

_EVENTS = {
    KazooEventType.CREATED: EventType.CREATED,
    KazooEventType.CHANGED: EventType.CHANGED,
    KazooEventType.DELETED: EventType.DELETED,
    KazooEventType.CHILD: EventType.CHILDREN,
}
_STATES = {
    KazooState.CONNECTED: SessionState.CONNECTED,
    KazooState.SUSPENDED: SessionState.SUSPENDED,
    KazooState.LOST: SessionState.LOST,
}
# Bounded so that a node created and deleted again and again cannot spin ``get``.
_GET_WATCH_ATTEMPTS = 100


class ChrootMissingError(MetadataError):
    """The URL's chroot does not exist: the cluster was never initialised there."""


def _check_data(data: object) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidArgumentError(f"node data must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > MAX_NODE_BYTES:
        raise InvalidArgumentError(
            f"node data of {len(data)} bytes exceeds ZooKeeper's limit of {MAX_NODE_BYTES}")
    return data


def _check_expected_version(expected_version: int) -> None:
    if expected_version < -1:
        raise InvalidArgumentError(
            f"expected_version must be -1 (any) or a version >= 0, got {expected_version}")


class _Watch:
    """A watch callback as kazoo holds it; equal to another for the same callback.

    Kazoo keeps a path's watchers in a set, so the same callback set twice on
    one node fires once, as the Protocol says.
    """

    __slots__ = ("_callback", "_store")

    def __init__(self, store: ZooKeeperMetadataStore, callback: WatchCallback) -> None:
        self._store = store
        self._callback = callback

    def __hash__(self) -> int:
        return hash(self._callback)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Watch) and other._callback == self._callback

    def __call__(self, event: Any) -> None:
        # On a kazoo thread. A NONE event is kazoo clearing watches of an
        # expired session: nothing changed, the LOST listener call reports it.
        kind = _EVENTS.get(event.type)
        if kind is not None and event.path is not None:
            self._store._deliver(self._callback, kind, event.path)


class ZooKeeperMetadataStore:
    """A ``ledger.api.MetadataStore`` on a ZooKeeper ensemble, under one chroot.

    Use ``connect`` rather than the constructor.

    Args:
        url: the parsed metadata URL.
        session_timeout_ms: the session timeout asked of ZooKeeper (the server
            bounds it to [2, 20] ticks by default).
        operation_timeout_ms: deadline of one call.
    """

    def __init__(self, url: MetadataUrl, *, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                 operation_timeout_ms: int = DEFAULT_OPERATION_TIMEOUT_MS) -> None:
        if session_timeout_ms <= 0 or operation_timeout_ms <= 0:
            raise InvalidArgumentError("ZooKeeper timeouts must be positive")
        self._url = url
        self._session_timeout_ms = session_timeout_ms
        self._operation_timeout_s = operation_timeout_ms / 1000
        self._client = KazooClient(
            hosts=url.connect_string, timeout=session_timeout_ms / 1000,
            # Reconnect for ever, backing off to 1 s between attempts.
            connection_retry={"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0},
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[SessionListener] = []
        self._closed = False
        self._client.add_listener(self._on_state)

    @classmethod
    async def connect(
        cls, url: str | MetadataUrl, *, create_chroot: bool = False,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        operation_timeout_ms: int = DEFAULT_OPERATION_TIMEOUT_MS,
        connect_timeout_ms: int = 30_000,
    ) -> ZooKeeperMetadataStore:
        """Connect to the ensemble of ``url`` and check its chroot.

        Args:
            url: ``zk://HOST:PORT[,HOST:PORT...]/CHROOT`` or its parsed form.
            create_chroot: create the chroot (and its parents) if missing
                (``folio cluster init``); otherwise a missing one raises.
            session_timeout_ms: see the class.
            operation_timeout_ms: see the class.
            connect_timeout_ms: how long to try the servers before giving up.

        Raises:
            MetadataUrlError: a bad URL.
            MetadataUnavailableError: no server answered in time.
            ChrootMissingError: the chroot does not exist (and ``create_chroot`` is false).
        """
        parsed = parse_metadata_url(url) if isinstance(url, str) else url
        store = cls(parsed, session_timeout_ms=session_timeout_ms,
                    operation_timeout_ms=operation_timeout_ms)
        store._loop = asyncio.get_running_loop()
        try:
            await asyncio.to_thread(store._client.start, connect_timeout_ms / 1000)
        except KazooTimeoutError:
            await store._stop_client()
            raise MetadataUnavailableError(
                f"no ZooKeeper server of {parsed.connect_string} answered within "
                f"{connect_timeout_ms} ms") from None
        try:
            await store._check_chroot(create_chroot)
        except BaseException:
            await store._stop_client()
            raise
        return store

    async def _check_chroot(self, create: bool) -> None:
        chroot = self._url.chroot
        # The client has no chroot yet: these paths are absolute in the ensemble.
        if create:
            await self._call(lambda: self._client.ensure_path_async(chroot), chroot)
        elif await self._call(lambda: self._client.exists_async(chroot), chroot) is None:
            raise ChrootMissingError(
                f"{self._url}: chroot {chroot} does not exist in ZooKeeper: run "
                f"`folio cluster init --metadata-url {self._url}` first")
        self._client.chroot = chroot

    @property
    def url(self) -> MetadataUrl:
        """The metadata URL this store is connected to."""
        return self._url

    @property
    def session_timeout_ms(self) -> int:
        """The session timeout asked for (the server may bound it: see its log)."""
        return self._session_timeout_ms

    @property
    def connected(self) -> bool:
        """Whether the session is connected now."""
        return bool(self._client.connected)

    async def __aenter__(self) -> ZooKeeperMetadataStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # -- MetadataStore ---------------------------------------------------------------

    async def create(
        self, path: str, data: bytes = b"", *, make_parents: bool = False,
        sequential: bool = False, ephemeral: bool = False,
    ) -> str:
        """Create a node and return its path (with its 10-digit counter if ``sequential``).

        ``make_parents`` creates missing ancestors, persistent and empty (one
        by one: not atomically with the node, unlike the embedded store).

        Raises:
            NodeExistsError, NoNodeError, InvalidArgumentError (bad path or
            data, ephemeral parent), MetadataUnavailableError, MetadataError.
        """
        validate_path(path + "0" * 10 if sequential else path)
        data = _check_data(data)
        created: str = await self._call(
            lambda: self._client.create_async(
                path, data, ephemeral=ephemeral, sequence=sequential, makepath=make_parents),
            path)
        return created

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> Versioned:
        """The node's data and version; a ``watch`` is set even on a missing node.

        ZooKeeper sets no data watch on a missing node, so then an ``exists``
        watch is set instead (it fires CREATED); should the node appear in
        between, ``get`` reads it again.

        Raises:
            NoNodeError, InvalidArgumentError, MetadataUnavailableError, MetadataError.
        """
        validate_path(path)
        wrapped = _Watch(self, watch) if watch is not None else None
        for _attempt in range(_GET_WATCH_ATTEMPTS):
            try:
                data, stat = await self._call(
                    lambda: self._client.get_async(path, watch=wrapped), path)
            except NoNodeError:
                if wrapped is None:
                    raise
                stat = await self._call(
                    lambda: self._client.exists_async(path, watch=wrapped), path)
                if stat is None:
                    raise
                continue  # created in between: read it (the watch is set)
            return Versioned(data=bytes(data or b""), version=int(stat.version))
        raise MetadataUnavailableError(f"{path}: created and deleted too often to read")

    async def exists(self, path: str) -> bool:
        """Whether the node exists."""
        validate_path(path)
        return await self._call(lambda: self._client.exists_async(path), path) is not None

    async def set(self, path: str, data: bytes, expected_version: int) -> int:
        """Compare-and-set (``expected_version`` -1: any); the new version.

        Raises:
            NoNodeError, BadVersionError (``actual`` is not known: None),
            InvalidArgumentError, MetadataUnavailableError, MetadataError.
        """
        validate_path(path)
        data = _check_data(data)
        _check_expected_version(expected_version)
        try:
            stat = await self._call(
                lambda: self._client.set_async(path, data, expected_version), path,
                expected_version=expected_version)
        except BadVersionError as error:
            raise await self._with_actual(error) from None
        return int(stat.version)

    async def delete(self, path: str, expected_version: int = -1) -> None:
        """Delete a childless node if its version matches (-1: any).

        Raises:
            NoNodeError, BadVersionError, NotEmptyError, InvalidArgumentError
            (bad path or version, the root), MetadataUnavailableError, MetadataError.
        """
        validate_path(path)
        _check_expected_version(expected_version)
        if path == "/":
            raise InvalidArgumentError("the root node '/' cannot be deleted")
        try:
            await self._call(lambda: self._client.delete_async(path, expected_version), path,
                             expected_version=expected_version)
        except BadVersionError as error:
            raise await self._with_actual(error) from None

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str]:
        """Names of the node's children, sorted; the ``watch`` is not set on a missing node.

        Raises:
            NoNodeError, InvalidArgumentError, MetadataUnavailableError, MetadataError.
        """
        validate_path(path)
        wrapped = _Watch(self, watch) if watch is not None else None
        names = await self._call(
            lambda: self._client.get_children_async(path, watch=wrapped), path)
        return sorted(names)

    async def close(self) -> None:
        """Close the session (its ephemeral nodes are deleted) and kazoo's threads. Idempotent.

        Session listeners are not called; pending watches never fire.
        """
        if self._closed:
            return
        self._closed = True
        self._listeners.clear()
        await self._stop_client()

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` on the store's loop at each session state change."""
        if listener not in self._listeners:
            self._listeners.append(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    # -- internals ---------------------------------------------------------------------

    async def _with_actual(self, error: BadVersionError) -> BadVersionError:
        """``error`` with the version found by a read after it (context for the caller).

        ZooKeeper does not say which version it found; the read may see a later
        one, or none (None) if the node was deleted since.
        """
        try:
            stat = await self._call(lambda: self._client.exists_async(error.path), error.path)
        except MetadataError:
            return error
        actual = None if stat is None else int(stat.version)
        return BadVersionError(error.path, error.expected, actual)

    async def _stop_client(self) -> None:
        self._client.remove_listener(self._on_state)
        try:
            await asyncio.to_thread(self._client.stop)
        finally:
            self._client.close()

    async def _call(self, start: Callable[[], Any], path: str, *,
                    expected_version: int = -1) -> Any:
        """Run one kazoo ``*_async`` call; its result on this loop, its error translated."""
        if self._closed:
            raise MetadataError(f"ZooKeeper metadata store {self._url} is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()

        def settle(result: Any) -> None:
            if future.done():
                return
            error = result.exception
            if error is None:
                future.set_result(result.value)
            else:
                future.set_exception(error)

        def completed(result: Any) -> None:  # on a kazoo thread
            # RuntimeError: the loop closed, nobody waits any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, result)

        try:
            start().rawlink(completed)
            return await asyncio.wait_for(future, self._operation_timeout_s)
        except TimeoutError:
            raise MetadataUnavailableError(
                f"{path}: no answer from ZooKeeper ({self._url.connect_string}) within "
                f"{self._operation_timeout_s:g} s") from None
        except kazoo_errors.KazooException as error:
            raise self._translate(error, path, expected_version) from error
        except TypeError as error:  # kazoo's own argument checks
            raise InvalidArgumentError(f"{path}: {error}") from error

    def _translate(self, error: kazoo_errors.KazooException, path: str,
                   expected_version: int) -> Exception:
        if isinstance(error, kazoo_errors.NoNodeError):
            return NoNodeError(f"{path}: no node")
        if isinstance(error, kazoo_errors.NodeExistsError):
            return NodeExistsError(f"{path}: node exists")
        if isinstance(error, kazoo_errors.BadVersionError):
            return BadVersionError(path, expected_version, None)
        if isinstance(error, kazoo_errors.NotEmptyError):
            return NotEmptyError(f"{path}: node has children")
        if isinstance(error, kazoo_errors.NoChildrenForEphemeralsError):
            return InvalidArgumentError(f"{path}: an ephemeral node cannot have children")
        if isinstance(error, kazoo_errors.BadArgumentsError):
            return InvalidArgumentError(f"{path}: ZooKeeper refused the arguments")
        if isinstance(error, kazoo_errors.SessionExpiredError):
            return MetadataSessionExpiredError(f"{path}: the ZooKeeper session expired")
        if isinstance(error, kazoo_errors.ConnectionClosedError) and self._closed:
            return MetadataError(f"ZooKeeper metadata store {self._url} is closed")
        if isinstance(error, kazoo_errors.ConnectionLoss | kazoo_errors.ConnectionClosedError
                      | kazoo_errors.OperationTimeoutError):
            return MetadataUnavailableError(
                f"{path}: connection to ZooKeeper lost ({type(error).__name__}); the change "
                "may or may not have been applied")
        return MetadataError(f"{path}: ZooKeeper error {type(error).__name__}: {error}")

    def _deliver(self, callback: WatchCallback, event: EventType, path: str) -> None:
        """Hand a watch event to the store's loop (called on a kazoo thread)."""
        self._call_on_loop(self._fire_watch, callback, event, path)

    def _call_on_loop(self, function: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or self._closed:
            return
        # RuntimeError: the loop closed, nobody listens any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(function, *args)

    @staticmethod
    def _fire_watch(callback: WatchCallback, event: EventType, path: str) -> None:
        try:
            callback(event, path)
        except Exception:
            # A broken watcher must not break the store nor the other watchers.
            logger.exception("metadata watch callback %r failed on %s %s",
                             callback, event.value, path)

    def _on_state(self, state: str) -> None:
        """Kazoo's listener (on a kazoo thread): log, then report on the loop."""
        mapped = _STATES.get(state)
        if mapped is None:
            return
        if mapped is SessionState.CONNECTED:
            logger.info("ZooKeeper session connected (%s)", self._url)
        elif mapped is SessionState.SUSPENDED:
            logger.warning("ZooKeeper connection lost (%s); session may still be alive",
                           self._url)
        else:
            logger.warning("ZooKeeper session expired (%s): its ephemeral nodes are gone",
                           self._url)
        self._call_on_loop(self._notify, mapped)

    def _notify(self, state: SessionState) -> None:
        for listener in list(self._listeners):
            try:
                listener(state)
            except Exception:
                logger.exception("session listener %r failed on %s", listener, state.value)
