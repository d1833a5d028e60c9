"""First contact with a broker: a connect deadline apart from the call's, and why it failed.

Before a client's first call to the broker it was given (and to each
endpoint it bootstraps from), :func:`reach` waits for the channel to be READY
for at most ``ClientConfig.connect_timeout_s`` (a few seconds), not the
call's deadline (30 s): a wrong endpoint fails fast. When gRPC reports a
failure the endpoint is probed (``folio._transport.probe``): a TLS refusal or
another service (HTTP, Kafka) is raised at once, as it will not go away;
nothing listening is waited out until the connect deadline (a broker
starting now is found), then raised with the reason; when bootstrapping from
a list it is raised at once, so the next endpoint is tried without delay.

After the first contact, a broker that cannot be reached is restarting, and
calls wait for it until their own deadline (``Brokers.unary``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import grpc

from folio._transport.probe import diagnose
from folio.errors import FolioError, FolioUnavailableError, TlsError, WrongEndpointError
from folio.security import TLS

if TYPE_CHECKING:
    from folio._transport.io_thread import Connection

__all__ = ["reach"]

#: Findings that mean no server at all (as opposed to one the probes could not name).
_NOTHING_THERE = ("refused", "unresolved", "unreachable")
_READY = grpc.ChannelConnectivity.READY
_FAILED = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


def _certain(error: FolioError) -> bool:
    """Whether a probe's finding will not change by waiting (raised at once)."""
    return isinstance(error, TlsError) or (
        isinstance(error, WrongEndpointError) and error.found in ("http", "kafka"))


async def reach(connection: Connection, timeout_s: float, tls: TLS | None, *,
                patient: bool = True) -> None:
    """Waits until ``connection``'s channel is READY, at most ``timeout_s``.

    ``patient``: nothing listening is waited out until ``timeout_s`` (one
    endpoint: a broker starting now is found); not patient (bootstrapping
    from a list, with other endpoints to try), nothing there is raised at once too.

    Raises:
        TlsError: the TLS handshake is refused (wrong CA, host name, plain text).
        WrongEndpointError: an HTTP server or a Kafka listener answers there.
        FolioUnavailableError: nothing listening, an unknown or unreachable
            host, or no connection within ``timeout_s`` (the message says which).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    channel = connection.channel
    finding: FolioError | None = None
    probed = False
    state = channel.get_state(try_to_connect=True)
    while state is not _READY:
        if state in _FAILED and not probed:
            probed = True
            finding = await diagnose(connection.endpoint, tls)
            if finding is not None and (_certain(finding) or (
                    not patient and finding.context.get("reason") in _NOTHING_THERE)):
                raise finding
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        try:
            await asyncio.wait_for(channel.wait_for_state_change(state), remaining)
        except TimeoutError:
            break
        state = channel.get_state(try_to_connect=True)
    else:
        return
    if not probed:
        finding = await diagnose(connection.endpoint, tls)
    if finding is not None:
        raise type(finding)(f"{finding} (no connection within the connect timeout, "
                            f"{timeout_s:g} s)", context=finding.context)
    raise FolioUnavailableError(
        f"no connection to {connection.endpoint} within the connect timeout ({timeout_s:g} s)",
        endpoint=connection.endpoint, reason="connect_timeout")
