"""SIGTERM handled as Ctrl-C, for commands that clean up on ``KeyboardInterrupt``.

``kill``, systemd, Kubernetes and ``docker stop`` send SIGTERM; Python's
default is to die at once, skipping ``finally`` blocks and ``with`` exits, so
a group member would keep its segments until the broker's session timeout and
a producer would not print its summary. Raising ``KeyboardInterrupt`` instead
runs the same clean exit as Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["install_sigterm_as_interrupt"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt


def install_sigterm_as_interrupt() -> None:
    """Make SIGTERM raise ``KeyboardInterrupt`` in the main thread (no-op off it)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
