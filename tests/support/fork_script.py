"""A client program that forks, for ``tests/integration/test_fork.py``.

``python -m tests.support.fork_script ENDPOINT TOPIC MODE`` writes one event
from the parent, then forks one child that makes its own client and writes
one event ``child``; the child prints ``child wrote OFFSET`` and exits 0, or
prints ``child refused: ERROR`` and exits 3 when the SDK refuses its client.
The parent prints ``child exit CODE`` (a negative code is the signal that
killed it: -11 for SIGSEGV) and exits with 0 once it has its child's code.

MODE says what the parent's client is at the fork and how it forks:

- ``closed-mp``: closed (still referenced); ``multiprocessing``'s "fork" method.
- ``closed-os``: closed (still referenced); ``os.fork``.
- ``closed-aio``: an ``folio.aio.AsyncClient``, closed; the child uses one too.
- ``open``: still open at the fork (the child must be refused, never crash);
  the parent writes once more after it, and closes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys

import folio
from folio.aio import AsyncClient

CHILD_TIMEOUT_S = 60.0


def _child_blocking(endpoint: str, topic: str) -> int:
    try:
        with folio.Client(endpoint) as client:
            result = client.writer(topic).write_event(b"child").result(30)
    except folio.ForkedProcessError as error:
        print(f"child refused: {type(error).__name__}: {error}", flush=True)
        return 3
    print(f"child wrote {result.offset}", flush=True)
    return 0


async def _write_async(endpoint: str, topic: str, payload: bytes) -> int:
    async with AsyncClient(endpoint) as client:
        await client.create_topic(topic, exist_ok=True)
        writer = await client.writer(topic)
        result = await writer.write(payload)
        await writer.close()
    offset: int = result.offset
    return offset


def _child_aio(endpoint: str, topic: str) -> int:
    offset = asyncio.run(_write_async(endpoint, topic, b"child"))
    print(f"child wrote {offset}", flush=True)
    return 0


def _mp_child(endpoint: str, topic: str) -> None:
    sys.exit(_child_blocking(endpoint, topic))


def main(endpoint: str, topic: str, mode: str) -> int:
    if mode == "closed-aio":
        asyncio.run(_write_async(endpoint, topic, b"parent"))
        pid = os.fork()
        if pid == 0:
            os._exit(_child_aio(endpoint, topic))
        _, status = os.waitpid(pid, 0)
        print(f"child exit {os.waitstatus_to_exitcode(status)}", flush=True)
        return 0
    client = folio.Client(endpoint)
    client.create_topic(topic, exist_ok=True)
    client.writer(topic).write_event(b"parent").result(30)
    if mode != "open":
        client.close()  # the object stays referenced across the fork
    if mode == "closed-os":
        pid = os.fork()
        if pid == 0:
            os._exit(_child_blocking(endpoint, topic))
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
    else:
        process = multiprocessing.get_context("fork").Process(
            target=_mp_child, args=(endpoint, topic))
        process.start()
        process.join(CHILD_TIMEOUT_S)
        code = process.exitcode if process.exitcode is not None else -999
    print(f"child exit {code}", flush=True)
    if mode == "open":
        client.writer(topic).write_event(b"parent-after").result(30)
        client.close()
        print("parent wrote after the fork", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
