"""``kill -USR2 <pid>``: a Folio process writes what it is doing to its stderr.

As a JVM answers SIGQUIT with a thread dump, a bookie or broker answers
SIGUSR2 with the stack of every asyncio task of its event loop and of every
thread (``faulthandler``), then goes on running. For a process that does not
stop, or a call that never returns; the test harness sends it before it
SIGKILLs a process that outlived its SIGTERM, so the dump lands in the log.
"""

from __future__ import annotations

import asyncio
import faulthandler
import io
import signal
import sys

__all__ = ["DUMP_SIGNAL", "install_stack_dump"]

#: The signal that asks for the dump.
DUMP_SIGNAL = signal.SIGUSR2


def install_stack_dump(loop: asyncio.AbstractEventLoop) -> None:
    """Answer ``DUMP_SIGNAL`` on ``loop`` with the tasks' and threads' stacks on stderr."""
    loop.add_signal_handler(DUMP_SIGNAL, _dump, loop)


def _dump(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    text = io.StringIO()
    text.write(f"--- {DUMP_SIGNAL.name}: {len(tasks)} asyncio tasks ---\n")
    for task in tasks:
        text.write(f"Stack for {task!r} (most recent call last):\n")
        # Frames formatted here: Task.print_stack fails on frames without a line number.
        for frame in task.get_stack(limit=20):
            code = frame.f_code
            text.write(f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}\n')
    sys.stderr.write(text.getvalue())
    sys.stderr.write(f"--- {DUMP_SIGNAL.name}: threads ---\n")
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=True)
    sys.stderr.flush()
