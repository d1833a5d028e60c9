"""Waiting on a condition with a deadline (never a bare sleep)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Polls ``condition`` (every 10 ms) until true; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        threading.Event().wait(0.01)


async def wait_for_async(condition: Callable[[], Awaitable[bool]], what: str,
                         timeout_s: float = 30.0) -> None:
    """``wait_for`` for a coroutine condition, on the running event loop."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        await asyncio.sleep(0.01)
