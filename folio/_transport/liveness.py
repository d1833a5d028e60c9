"""How the client notices a broker that is up but silent: keepalive and progress deadlines.

A broker that is stopped (SIGSTOP, a long pause, a host frozen) keeps its TCP
connections up: the kernel acknowledges every byte, nothing answers. Without
a liveness check the client's streams would wait on it for as long as it is
stopped, although its segments move to another broker after its ZooKeeper
session timeout. Two checks leave such a broker within a few seconds:

- **gRPC keepalive** on every channel of the client (``CHANNEL_KEEPALIVE``):
  an HTTP/2 PING every ``KEEPALIVE_TIME_MS``, calls or none; a PING not
  acknowledged within ``KEEPALIVE_TIMEOUT_MS`` closes the connection, every
  call and stream on it fails UNAVAILABLE ("ping timeout"), and the flows and
  read streams on it go to the segment's owner again (looked up in a
  cluster). A stopped process acknowledges no PING, so it is left within
  ``KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS``. gRPC 1.5x waits for a PING's
  acknowledgement ``grpc.http2.ping_timeout_ms`` (one minute by default)
  whatever ``grpc.keepalive_timeout_ms`` says, so both are set. The broker
  accepts PINGs this often (``broker.services.server``: its minimum interval
  between PINGs without data is below ``KEEPALIVE_TIME_MS`` and it never
  answers them with GOAWAY "too_many_pings").
- **Progress deadlines** (``PROGRESS_TIMEOUT_S``): gRPC's own threads answer
  PINGs even when the broker's Python code does not run (a blocked event
  loop), so the streams also watch the answers themselves. An Append stream
  that waits for a reply (to a ``SetupAppend`` or a block with ``end``) and
  has received none at all for ``PROGRESS_TIMEOUT_S`` is cut and opened again
  (``folio._transport.append_stream``); a Read stream that has received no
  response (the broker sends an empty one every ``max_wait_ms`` at the tail)
  for ``PROGRESS_TIMEOUT_S`` is cut and opened again from its next offset
  (``folio._transport.segment_streams``). Longer than any answer a working
  broker takes (its bookie adds time out after 10 s), so a slow broker is
  not mistaken for a silent one.

Cutting a stream is always safe: an append flow sets up again and resends what
was not acknowledged (the writer id and event numbers de-duplicate), and a read
stream reads on from the next offset it did not receive.

**Back as soon as the channel is.** An Append or Read stream that broke is
opened again after a backoff (``Backoff``: 50 ms doubling to 2 s), but the
wait ends early when its channel turns READY (``wait_to_reconnect``), as
gRPC's own connection backoff starts over on a READY transition: while a broker is stopped or
unreachable every attempt fails and the backoff grows to its cap, and without
this the first attempt after it comes back would wait up to that cap for
nothing. A channel that is READY when the wait begins does not shorten it:
the connection is up and the broker ended the stream itself (it refused it, or
the progress deadline cut it), so a broker that keeps refusing keeps its
backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, Final, TypeVar

import grpc
from grpc import aio

__all__ = [
    "CHANNEL_KEEPALIVE",
    "KEEPALIVE_TIMEOUT_MS",
    "KEEPALIVE_TIME_MS",
    "PROGRESS_TIMEOUT_S",
    "no_progress_error",
    "wait_to_reconnect",
    "with_progress_deadline",
]

#: A PING on every connection this often (ms), whether calls are open or not.
KEEPALIVE_TIME_MS: Final = 1_000
#: A PING not acknowledged within this long (ms) closes the connection.
KEEPALIVE_TIMEOUT_MS: Final = 2_000
#: A stream waiting for an answer that gets none for this long (s) is cut.
PROGRESS_TIMEOUT_S: Final = 10.0

#: The keepalive options of every client channel (``folio._transport.io_thread``).
CHANNEL_KEEPALIVE: Final[tuple[tuple[str, int], ...]] = (
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.http2.ping_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    # PINGs without data frames between them, unlimited (an idle stream is still watched).
    ("grpc.http2.max_pings_without_data", 0),
)

R = TypeVar("R")


def no_progress_error(what: str, timeout_s: float = PROGRESS_TIMEOUT_S) -> aio.AioRpcError:
    """The UNAVAILABLE a stream ends with when the broker stayed silent for ``timeout_s``.

    Shaped as gRPC's own errors (no ``folio-error`` metadata), so the callers
    treat it as a broken connection: retried, and in a cluster the segment's
    owner is looked up again.
    """
    return aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, aio.Metadata(), aio.Metadata(),
        details=f"no answer from the broker for {timeout_s:g} s on its {what} "
                "(it is up but silent); the stream is cut and opened again",
        debug_error_string=None)


async def with_progress_deadline(call: aio.UnaryStreamCall[Any, R], what: str,
                                 timeout_s: float = PROGRESS_TIMEOUT_S) -> AsyncIterator[R]:
    """The responses of a server stream; ends with ``no_progress_error`` after silence.

    Only the wait for the broker's next response is timed: the time the
    caller takes between two responses (a full buffer) is not silence.

    Raises:
        aio.AioRpcError: the call's own failure, or UNAVAILABLE after
            ``timeout_s`` without a response (the call is cancelled then).
    """
    responses = call.__aiter__()
    while True:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a
        # cancellation that comes as the response does (it returns the
        # response), and a closed reader's task then waited for credit for
        # good, holding up the IO thread's close.
        try:
            async with asyncio.timeout(timeout_s):
                response = await responses.__anext__()
        except StopAsyncIteration:
            return
        except TimeoutError:  # the builtin (asyncio.timeout)
            call.cancel()
            raise no_progress_error(what, timeout_s) from None
        yield response


async def wait_to_reconnect(channel: aio.Channel | None, delay_s: float, *,
                            on_ready: bool = True) -> bool:
    """Waits ``delay_s`` before a broken stream is opened again, or until its channel is READY.

    The wait ends early only on a transition: the channel is seen not READY
    (IDLE, CONNECTING, TRANSIENT_FAILURE: the connection is what failed), then
    READY. gRPC redials a channel by itself (with its own backoff, at most 2 s
    here: ``folio._transport.io_thread``); an IDLE one is asked to connect. A
    channel that stays READY throughout leaves the whole ``delay_s``: the
    broker ended the stream on a working connection (a refusal, a stream cut
    for want of progress), and retrying it at once would only spin.

    Args:
        channel: the stream's channel; None waits the whole delay.
        delay_s: the backoff's delay.
        on_ready: False waits the whole delay whatever the channel does (the
            caller's guard against a broker that accepts connections and
            drops them at once: each would otherwise be retried at once).

    Returns:
        True when the wait ended early because the channel turned READY.
    """
    loop = asyncio.get_running_loop()
    if channel is None or not on_ready:
        await asyncio.sleep(delay_s)
        return False
    deadline = loop.time() + delay_s
    state = channel.get_state(try_to_connect=True)
    went_down = state is not grpc.ChannelConnectivity.READY
    while True:
        if state is grpc.ChannelConnectivity.READY and went_down:
            return True
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        if state is grpc.ChannelConnectivity.SHUTDOWN:  # closed: it never turns READY
            await asyncio.sleep(remaining)
            return False
        try:
            async with asyncio.timeout(remaining):  # not wait_for (above)
                await channel.wait_for_state_change(state)
        except TimeoutError:  # the builtin (asyncio.timeout)
            return False
        state = channel.get_state(try_to_connect=True)
        went_down = went_down or state is not grpc.ChannelConnectivity.READY
