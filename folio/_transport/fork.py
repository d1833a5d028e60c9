"""Forking a process that used the SDK: a child gets a working client or a clear error.

gRPC's asyncio stack (which the SDK's channels are) keeps process-wide state
while any ``grpc.aio`` channel object lives, even a closed one: one poller
thread blocked in the core's completion queue, the queue, and the core's own
threads. ``fork()`` copies that state into the child without a single one
of those threads, and gRPC's fork support (``GRPC_ENABLE_FORK_SUPPORT``)
does not cover the asyncio stack: it skips its handlers while the poller
thread is inside the core ("Other threads are currently calling into gRPC,
skipping fork() handlers"). The child's first channel then reuses the dead
state: its calls never complete, or the process dies of SIGSEGV.

So the SDK does two things:

- A closed client lets go of its channels (``Connection.close``), and just
  before a fork, ``gc.collect()`` frees what only cycles still hold: once
  every client of the process is closed, gRPC shuts its asyncio state down
  (the poller thread ends) and the child starts it afresh, working.
- If the state is still alive at the fork (a client still open, or another
  ``grpc.aio`` channel of the application), the child is marked, and a
  client made in it raises :class:`folio.errors.ForkedProcessError` saying
  what to do, instead of crashing. (The parent goes on unaffected.)

The state is seen alive by gRPC's poller thread, a ``threading.Thread``
whose target is ``_poll_wrapper`` (its default name ends with
``"(_poll_wrapper)"``).
"""

from __future__ import annotations

import gc
import os
import threading
from typing import Final

from folio.errors import ForkedProcessError

__all__ = ["check_not_forked", "grpc_aio_alive"]

#: gRPC's poller thread's target (``PollerCompletionQueue._poll_wrapper``).
_POLLER_TARGET: Final = "_poll_wrapper"

#: How long a poller thread gRPC has just stopped gets to return (seconds, per fork).
_POLLER_END_S: Final = 0.05

#: Whether gRPC's asyncio state was alive at the last fork (parent side).
_alive_at_fork = False
#: Set in a child forked while it was: clients are refused.
_inherited_dead_state = False


def grpc_aio_alive() -> bool:
    """Whether gRPC's asyncio poller thread runs in this process."""
    return bool(_pollers())


def _pollers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate()
            if thread.name.endswith(f"({_POLLER_TARGET})") and thread.is_alive()]


def check_not_forked() -> None:
    """Refuses to make a client in a child forked while gRPC's asyncio state was alive.

    Raises:
        ForkedProcessError: this process is such a child.
    """
    if _inherited_dead_state:
        raise ForkedProcessError(
            "this process was forked while its parent used gRPC's asyncio stack (a "
            "folio.Client still open, or another grpc.aio channel alive): gRPC cannot run "
            "in it (its first call would crash the process). Close every client before "
            "forking, start children with multiprocessing's 'spawn' or 'forkserver' "
            "method, or make clients only in the children (docs/sdk.md, \"Forking\")")


def _before_fork() -> None:
    """Parent, just before ``fork``: free closed channels kept by cycles, then look."""
    global _alive_at_fork
    if grpc_aio_alive():
        gc.collect()  # a closed channel only cycles hold: its release ends the poller
        for thread in _pollers():  # ending: gRPC has seen it stop, it is returning
            thread.join(_POLLER_END_S)
    _alive_at_fork = grpc_aio_alive()


def _after_fork_in_child() -> None:
    global _inherited_dead_state
    _inherited_dead_state = _inherited_dead_state or _alive_at_fork


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
