"""An asyncio HTTP ingest service on ``folio.aio``: one event loop, no threads.

The shape of an aiohttp or FastAPI handler, on the standard library's
``asyncio.start_server`` (so it needs nothing beyond the SDK): each request
is a coroutine that awaits the broker's acknowledgement before it answers,
and all of them share one ``AsyncClient`` and one writer on the server's loop.

- ``POST /events?key=K`` with the event as the body: written with routing key
  ``K`` (optional); answers ``{"segment": ..., "offset": ...}`` once acknowledged.
- ``GET /events?count=N``: the topic's first ``N`` events, as a JSON list of
  ``{"key", "payload", "segment", "offset"}`` (waits up to 10 s for them).

Run it (with a broker running, e.g. ``make run``)::

    .venv/bin/python -m examples.ingest_server --endpoint localhost:7070 --port 8080
    curl -d 'hello' 'localhost:8080/events?key=user-1'

``--self-test N`` starts the service on a free port, posts ``N`` events from
``N`` concurrent connections, reads them back over ``GET`` and checks that
each was written exactly once: it prints ``all N events written once`` and
exits 0, else exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from urllib.parse import parse_qs, urlsplit

from folio.aio import AsyncClient, AsyncEventWriter
from folio.errors import FolioError

__all__ = ["main", "serve"]


class IngestService:
    """The handlers: one client and one writer, shared by every request."""

    def __init__(self, client: AsyncClient, topic: str, writer: AsyncEventWriter[bytes]) -> None:
        self.client = client
        self.topic = topic
        self.writer = writer

    async def handle(self, method: str, target: str, body: bytes) -> tuple[int, object]:
        """One request: the status and the JSON answer."""
        url = urlsplit(target)
        query = parse_qs(url.query)
        if url.path != "/events":
            return 404, {"error": f"no such path {url.path}"}
        try:
            if method == "POST":
                key = query.get("key", [None])[0]
                written = await self.writer.write(body, routing_key=key)
                return 200, {"segment": written.segment, "offset": written.offset}
            if method == "GET":
                return 200, await self._first(int(query.get("count", ["10"])[0]))
        except FolioError as error:  # the SDK's typed errors, as an HTTP answer
            return 503 if error.retriable else 400, {"error": str(error)}
        except ValueError as error:
            return 400, {"error": str(error)}
        return 405, {"error": f"{method} is not allowed"}

    async def _first(self, count: int) -> list[dict[str, object]]:
        events: list[dict[str, object]] = []
        async with await self.client.reader(self.topic) as reader:
            try:
                async with asyncio.timeout(10):
                    async for event in reader:
                        events.append({"key": event.routing_key, "offset": event.offset,
                                       "segment": event.segment,
                                       "payload": event.payload.decode()})
                        if len(events) >= count:
                            break
            except TimeoutError:
                pass  # fewer than asked: what there is
        return events

    async def connection(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        """One HTTP/1.1 connection (one request, then closed: enough for an example)."""
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            method, target, _version = request.split(b"\r\n", 1)[0].decode().split(" ", 2)
            length = 0
            for line in request.decode().split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            body = await reader.readexactly(length) if length else b""
            status, answer = await self.handle(method, target, body)
            data = json.dumps(answer).encode()
            writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass  # a client that went away or sent no HTTP
        finally:
            writer.close()


async def serve(endpoint: str, topic: str, host: str,
                port: int) -> tuple[asyncio.Server, AsyncClient]:
    """The service listening on ``host:port`` (0: a free port), and its client."""
    client = AsyncClient(endpoint)
    await client.create_topic(topic, segments=2, exist_ok=True)
    service = IngestService(client, topic, await client.writer(topic))
    server = await asyncio.start_server(service.connection, host, port)
    return server, client


async def _request(port: int, method: str, target: str, body: bytes = b"") -> object:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {target} HTTP/1.1\r\nHost: localhost\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    head, _, data = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"{method} {target}: {head.decode()} {data.decode()}")
    return json.loads(data)


async def _self_test(endpoint: str, events: int) -> int:
    topic = f"ingest-{uuid.uuid4().hex[:8]}"
    server, client = await serve(endpoint, topic, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with server:
            posted = await asyncio.gather(*(
                _request(port, "POST", f"/events?key=user-{i % 7}", b"event-%d" % i)
                for i in range(events)))
            read = await _request(port, "GET", f"/events?count={events}")
    finally:
        await client.close()
    assert isinstance(read, list)
    counts = Counter(event["payload"] for event in read)
    expected = {f"event-{i}" for i in range(events)}
    places = {(p["segment"], p["offset"]) for p in posted if isinstance(p, dict)}
    if set(counts) != expected or any(n != 1 for n in counts.values()) or \
            len(places) != events:
        print(f"wrong: {len(counts)} distinct of {events}, "
              f"{sum(counts.values())} read, {len(places)} places", file=sys.stderr)
        return 1
    print(f"all {events} events written once")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m examples.ingest_server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="localhost:7070", help="the broker")
    parser.add_argument("--topic", default="ingest", help="the topic written (default ingest)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--self-test", type=int, default=0, metavar="N",
                        help="post N events concurrently, read them back, check, exit")
    args = parser.parse_args(argv)
    if args.self_test:
        return asyncio.run(_self_test(args.endpoint, args.self_test))

    async def forever() -> None:
        server, client = await serve(args.endpoint, args.topic, args.host, args.port)
        print(f"listening on {args.host}:{server.sockets[0].getsockname()[1]}", flush=True)
        try:
            async with server:
                await server.serve_forever()
        finally:
            await client.close()

    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: the loop closes the client
        asyncio.run(forever())
    return 0


if __name__ == "__main__":
    sys.exit(main())
