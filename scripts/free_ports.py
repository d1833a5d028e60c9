"""Ports a process is told on its command line before it binds them.

ZooKeeper's ``clientPort``, a bookie's ``--metrics-port``, a chart pod's container
ports: whoever starts such a process must name the port first, so it cannot let
the kernel pick at bind time. Binding port 0 and closing is not enough while
other processes run beside: the kernel's pick comes from the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), the range
every port-0 server and every outgoing connection draws from, so the port can be
taken again before the process binds it. With two pytest workers that happened
("cannot serve metrics on 127.0.0.1:45205: Address already in use").

So these ports come from below the ephemeral range, which the kernel never hands
out by itself, from a slice of their own per pytest-xdist worker (``gw0``,
``gw1``, ...; the controller or a serial run has the slice just below the
ephemeral range), handed out in turn and each checked free by a bind. Ports of
one slice are reused only after the whole slice went round (4,000 of them).
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

__all__ = ["free_port"]

#: Ports per worker's slice.
_SLICE = 4000
#: Used when the ephemeral range cannot be read (Linux's default start).
_EPHEMERAL_LOW = 32768
_lock = threading.Lock()
_cursor: Iterator[int] | None = None


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return _EPHEMERAL_LOW


def _slice() -> range:
    """This process's ports: a slice below the ephemeral range, one per xdist worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker[:2] == "gw" and worker[2:].isdigit() else 0
    top = _ephemeral_low() - _SLICE * index
    return range(max(top - _SLICE, 1024), max(top, 1024 + _SLICE))


def _next_candidate() -> int:
    global _cursor
    with _lock:
        if _cursor is None:
            ports = _slice()
            # Start where an earlier process of this slice (a rerun) did not.
            start = os.getpid() % len(ports)
            _cursor = itertools.cycle([*ports[start:], *ports[:start]])
        return next(_cursor)


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1", count: int = 1) -> int:
    """The first of ``count`` consecutive ports free on ``host`` now, from this process's slice.

    Raises:
        OSError: no such run of ports in the slice.
    """
    for _ in range(_SLICE):
        first = _next_candidate()
        if first + count > _slice().stop:
            continue
        if all(_bindable(host, port) for port in range(first, first + count)):
            for _ in range(count - 1):
                _next_candidate()
            return first
    raise OSError(f"no {count} consecutive free ports on {host} in {_slice()}")
