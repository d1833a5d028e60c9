"""SIGTERM handled as Ctrl-C, so ``kill PID`` stops a command as cleanly as Ctrl-C does.

Container runtimes, systemd and ``timeout`` send SIGTERM; Python's default
would end the process at once, without the summary and the final flush that
a KeyboardInterrupt handler gives.
"""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["install_sigterm_as_interrupt"]


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def install_sigterm_as_interrupt() -> None:
    """From now on SIGTERM raises KeyboardInterrupt in the main thread, as SIGINT does."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
