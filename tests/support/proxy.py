"""A real TCP proxy for fault tests: cut, pause or retarget the connections between two ends.

``TcpProxy(host, port)`` listens on ``127.0.0.1`` (a free port) and relays
every connection it accepts to ``host:port``, both ways, from one background
thread running a ``selectors`` loop (non-blocking sockets, bounded buffers: a
side that does not read slows the other side down). Point a client at
``proxy.address`` instead of the server's, then::

    proxy.cut()      # reset every live connection, both ways (RST); keeps accepting
    proxy.pause()    # stop relaying bytes and accepting (connections stay open)
    proxy.resume()
    proxy.hold_answers()         # relay requests, hold the answers (then cut: lost answers)
    proxy.retarget(other_port)   # new connections go there; live ones stay
    proxy.close()

Every call that talks to the loop thread waits for its answer with a
deadline; a failure of the loop thread is raised by the next call (and by
``close``). ``close`` resets what is still open, closes every socket and
joins the thread, so a test leaks neither.
"""

from __future__ import annotations

import contextlib
import errno
import queue
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Generic, Self, TypeVar

__all__ = ["COMMAND_TIMEOUT_S", "TcpProxy"]

R = TypeVar("R")

#: Deadline for the loop thread to carry out one command (cut, pause, close, ...).
COMMAND_TIMEOUT_S: Final = 10.0
#: Bytes buffered towards one side before the proxy stops reading from the other.
_BUFFER_LIMIT: Final = 1024 * 1024
_RECV_BYTES: Final = 256 * 1024
#: SO_LINGER on, zero seconds: ``close`` sends a RST instead of a FIN.
_LINGER_RESET: Final = struct.pack("ii", 1, 0)


def _reset(sock: socket.socket) -> None:
    """Closes ``sock`` abortively (RST), ignoring a socket that is already dead."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    sock.close()


class _Side:
    """One socket of a relayed connection and the bytes waiting to be written to it."""

    __slots__ = ("eof", "outbox", "shut", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.outbox = bytearray()  # bytes read from the other side, to write to this one
        self.eof = False           # this side sent FIN: nothing more to read from it
        self.shut = False          # the other side's FIN was passed on (SHUT_WR)


class _Connection:
    """A client connection and its upstream connection."""

    __slots__ = ("client", "connecting", "upstream")

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = _Side(client)
        self.upstream = _Side(upstream)
        self.connecting = True

    def sides(self) -> tuple[_Side, _Side]:
        return self.client, self.upstream

    def other(self, side: _Side) -> _Side:
        return self.upstream if side is self.client else self.client


class TcpProxy:
    """Relays TCP connections from ``127.0.0.1:PORT`` to ``target_host:target_port``.

    Attributes:
        port: the port the proxy listens on.
        accepted: how many connections it accepted so far.
        cut_count: how many connections ``cut`` reset so far.
    """

    def __init__(self, target_host: str, target_port: int, *,
                 listen_host: str = "127.0.0.1") -> None:
        """Binds, listens and starts the loop thread."""
        self._target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((listen_host, 0))
            self._listener.listen(128)
            self._listener.setblocking(False)
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._selector.register(self._listener, selectors.EVENT_READ)
            self._selector.register(self._wake_r, selectors.EVENT_READ)
        except BaseException:
            self._close_sockets()
            raise
        self.host = listen_host
        self.port: int = self._listener.getsockname()[1]
        self.accepted = 0
        self.cut_count = 0
        self._connections: set[_Connection] = set()
        self._by_sock: dict[socket.socket, tuple[_Connection, _Side]] = {}
        self._paused = False
        self._holding = False
        self._listening = True
        self._commands: queue.Queue[tuple[Callable[[], Any], _Reply[Any]]] = queue.Queue()
        self._error: BaseException | None = None
        self._stopping = False
        self._closed = False
        self._thread = threading.Thread(target=self._main, name=f"tcp-proxy-{self.port}",
                                        daemon=True)
        self._thread.start()

    # -- the test's side ---------------------------------------------------------

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, to give a client instead of the server's address."""
        return f"{self.host}:{self.port}"

    @property
    def target(self) -> tuple[str, int]:
        """Where new connections are relayed to."""
        return self._target

    def cut(self) -> int:
        """Resets every live connection both ways (RST to each end); returns how many.

        New connections are still accepted (and relayed) right after.
        """
        return self._command(self._cut_all)

    def pause(self) -> None:
        """Stops relaying bytes and accepting connections; open connections stay open."""
        self._command(lambda: self._set_paused(True))

    def resume(self) -> None:
        """Relays and accepts again after ``pause``."""
        self._command(lambda: self._set_paused(False))

    def hold_answers(self, hold: bool = True) -> None:
        """Stop (``hold``) or resume relaying bytes towards the clients; requests still pass.

        With ``cut`` after it, a request the server applied loses its answer
        (an unknown outcome for the client), deterministically.
        """

        def apply() -> None:
            self._holding = hold
            for connection in self._connections:
                self._update(connection)  # held bytes go out once writable again

        self._command(apply)

    def retarget(self, port: int, host: str | None = None) -> None:
        """Relays new connections to ``host:port`` (same host if None); live ones stay."""
        target = (host or self._target[0], port)

        def apply() -> None:
            self._target = target

        self._command(apply)

    def live_connections(self) -> int:
        """How many relayed connections are open now."""
        return self._command(lambda: len(self._connections))

    def close(self, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        """Resets every connection, stops the thread and closes every socket. Idempotent.

        Raises:
            AssertionError: the loop thread did not stop within ``timeout_s``, or
                it had failed (the failure is the ``__cause__``).
        """
        if self._closed:
            return
        self._closed = True
        if self._thread.is_alive():
            self._stopping = True
            self._wake()
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise AssertionError(f"the proxy thread did not stop within {timeout_s} s")
        self._close_sockets()
        if self._error is not None:
            raise AssertionError(f"the proxy's thread failed: {self._error!r}") from self._error

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        host, port = self._target
        return f"<TcpProxy {self.address} -> {host}:{port}>"

    def _command(self, action: Callable[[], R], timeout_s: float = COMMAND_TIMEOUT_S) -> R:
        """Runs ``action`` on the loop thread and returns its result (with a deadline)."""
        if self._closed:
            raise RuntimeError("the proxy is closed")
        self._raise_if_failed()
        reply: _Reply[R] = _Reply()
        self._commands.put((action, reply))
        self._wake()
        if not reply.done.wait(timeout_s):
            self._raise_if_failed()
            raise AssertionError(f"the proxy thread did not answer within {timeout_s} s")
        if reply.error is not None:
            raise reply.error
        return reply.value  # type: ignore[return-value]  # set with done

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise AssertionError(f"the proxy's thread failed: {self._error!r}") from self._error

    def _wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._wake_w.send(b"\0")

    def _close_sockets(self) -> None:
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        self._selector.close()

    # -- the loop thread ---------------------------------------------------------

    def _main(self) -> None:
        try:
            while not self._stopping:
                for key, events in self._selector.select(timeout=1.0):
                    sock = key.fileobj
                    if sock is self._wake_r:
                        self._drain_wake()
                    elif sock is self._listener:
                        self._accept()
                    else:
                        self._on_ready(sock, events)  # type: ignore[arg-type]
                self._run_commands()
        except BaseException as error:
            self._error = error
        finally:
            for connection in list(self._connections):
                self._abort(connection)
            self._fail_commands()

    def _drain_wake(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while self._wake_r.recv(4096):
                pass

    def _run_commands(self) -> None:
        while True:
            try:
                action, reply = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                reply.value = action()
            except Exception as error:
                reply.error = error
            reply.done.set()

    def _fail_commands(self) -> None:
        while True:
            try:
                _, reply = self._commands.get_nowait()
            except queue.Empty:
                return
            reply.error = RuntimeError("the proxy stopped")
            reply.done.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno in (errno.EMFILE, errno.ENFILE, errno.ECONNABORTED):
                    return
                raise
            self.accepted += 1
            client.setblocking(False)
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            upstream.setblocking(False)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = upstream.connect_ex(self._target)
            if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                _reset(client)
                upstream.close()
                continue
            connection = _Connection(client, upstream)
            self._connections.add(connection)
            for side in connection.sides():
                self._by_sock[side.sock] = (connection, side)
            self._update(connection)

    def _on_ready(self, sock: socket.socket, events: int) -> None:
        found = self._by_sock.get(sock)
        if found is None:
            return  # closed earlier in this round
        connection, side = found
        try:
            if connection.connecting and side is connection.upstream:
                if not events & selectors.EVENT_WRITE:
                    return
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code in (errno.EINPROGRESS, errno.EALREADY):
                    return
                if code:
                    raise ConnectionRefusedError(code, "upstream connect failed")
                connection.connecting = False
            if events & selectors.EVENT_WRITE and side.outbox:
                self._flush(connection, side)
            if events & selectors.EVENT_READ and not self._paused and not side.eof:
                self._receive(connection, side)
        except OSError:
            self._abort(connection)
            return
        if connection in self._connections:
            self._finish_or_update(connection)

    def _receive(self, connection: _Connection, side: _Side) -> None:
        other = connection.other(side)
        try:
            data = side.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            side.eof = True
            return
        other.outbox += data
        if not (connection.connecting and other is connection.upstream):
            self._flush(connection, other)

    def _flush(self, connection: _Connection, side: _Side) -> None:
        if self._paused or not side.outbox or (self._holding and side is connection.client):
            return
        if connection.connecting and side is connection.upstream:
            return
        try:
            sent = side.sock.send(side.outbox)
        except (BlockingIOError, InterruptedError):
            return
        del side.outbox[:sent]

    def _finish_or_update(self, connection: _Connection) -> None:
        """Passes FINs on, closes a connection finished both ways, else sets its interests."""
        for side in connection.sides():
            other = connection.other(side)
            if side.eof and not other.outbox and not other.shut and not connection.connecting:
                other.shut = True
                with contextlib.suppress(OSError):
                    other.sock.shutdown(socket.SHUT_WR)
        if connection.client.eof and connection.upstream.eof and \
                connection.client.shut and connection.upstream.shut:
            self._discard(connection, abort=False)
            return
        self._update(connection)

    def _update(self, connection: _Connection) -> None:
        """Watches each socket of ``connection`` for what it can do next."""
        for side in connection.sides():
            other = connection.other(side)
            mask = 0
            if connection.connecting and side is connection.upstream:
                mask = selectors.EVENT_WRITE  # the connect's outcome
            elif not self._paused:
                if not side.eof and len(other.outbox) < _BUFFER_LIMIT:
                    mask |= selectors.EVENT_READ
                if side.outbox and not connection.connecting and not (
                        self._holding and side is connection.client):
                    mask |= selectors.EVENT_WRITE
            self._watch(side.sock, mask)

    def _watch(self, sock: socket.socket, mask: int) -> None:
        """Registers, modifies or unregisters ``sock`` in the selector (0: not watched)."""
        try:
            current = self._selector.get_key(sock).events
        except KeyError:
            current = 0
        if mask == current:
            return
        if not mask:
            self._selector.unregister(sock)
        elif not current:
            self._selector.register(sock, mask)
        else:
            self._selector.modify(sock, mask)

    def _abort(self, connection: _Connection) -> None:
        self._discard(connection, abort=True)

    def _discard(self, connection: _Connection, *, abort: bool) -> None:
        self._connections.discard(connection)
        for side in connection.sides():
            self._by_sock.pop(side.sock, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(side.sock)
            if abort:
                _reset(side.sock)
            else:
                side.sock.close()

    def _cut_all(self) -> int:
        connections = list(self._connections)
        for connection in connections:
            self._abort(connection)
        self.cut_count += len(connections)
        return len(connections)

    def _set_paused(self, paused: bool) -> None:
        self._paused = paused
        if paused and self._listening:
            self._selector.unregister(self._listener)
            self._listening = False
        elif not paused and not self._listening:
            self._selector.register(self._listener, selectors.EVENT_READ)
            self._listening = True
        for connection in list(self._connections):
            self._update(connection)


class _Reply(Generic[R]):
    """The answer to one command run on the loop thread."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: R | None = None
        self.error: BaseException | None = None


class CutEvery:
    """Cuts every connection of ``proxy`` at every ``every``-th ``started()`` (by progress)."""

    def __init__(self, proxy: TcpProxy, every: int) -> None:
        self._proxy = proxy
        self._every = every
        self._lock = threading.Lock()
        self._started = 0
        #: How many connections each cut reset.
        self.cuts: list[int] = []

    def started(self) -> None:
        with self._lock:
            self._started += 1
            due = self._started % self._every == 0
        if due:
            self.cuts.append(self._proxy.cut())
