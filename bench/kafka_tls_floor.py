"""What TLS itself costs the Kafka listener per byte: ``python -m bench.kafka_tls_floor``.

The floor under ``python -m bench.kafka --security``: the broker's own
connection code (``broker.kafka.framing.FrameStream``) on an asyncio server
in this process, plain and TLS (a trustme certificate, TLS 1.3 as librdkafka
negotiates it), with a client in another process (blocking sockets, the
``ssl`` module) that

* **receive**: sends ``--mib`` MiB as Kafka frames of ``--frame-bytes``
  (a Produce's size), which the server reads with ``next_frame``;
* **send**: reads ``--mib`` MiB the server writes in 256 KiB slices, each
  drained (as a Fetch answer is written).

It prints the server's CPU time per byte of each (``time.process_time``:
only this process, where only the event loop runs) and the difference TLS
makes, per byte and per 1 KiB event; and OpenSSL's own AES-GCM rate in the
same process (two ``SSLObject``s over memory BIOs, no sockets), the part of
that difference no Python code can remove; and the receive through a bare
``SSLObject`` protocol on the raw socket transport (no asyncio TLS layer,
no framing), the least a TLS layer of the broker's own could cost. Both Kafka paths pay the rest of
a broker's work per event on top, so the difference per event over the
PLAINTEXT broker's CPU per event is the least the SASL_SSL/PLAINTEXT CPU
ratio can be.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker.kafka.framing import FrameStream

__all__ = ["main"]

_SLICE_BYTES = 256 * 1024

_CLIENT = r'''
import socket, ssl, struct, sys
port, tls, mode, frame_bytes, total, ca = (int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3],
                                           int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
sock = socket.create_connection(("127.0.0.1", port))
if tls:
    sock = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname="127.0.0.1")
if mode == "receive":
    body = struct.pack(">i", frame_bytes) + bytes(frame_bytes)
    for _ in range(total // frame_bytes):
        sock.sendall(body)
    sock.recv(1)
else:
    left = total
    while left:
        left -= len(sock.recv(min(left, 1 << 20)))
sock.close()
'''


async def _serve_once(context: ssl.SSLContext | None, mode: str, frame_bytes: int,
                      total: int, ca: Path) -> float:
    """Server CPU seconds to receive or send ``total`` bytes on one connection."""
    loop = asyncio.get_running_loop()
    accepted: asyncio.Queue[FrameStream] = asyncio.Queue()

    def on_connected(stream: FrameStream) -> None:
        if context is not None:
            stream.hold()
        accepted.put_nowait(stream)

    server = await loop.create_server(lambda: FrameStream(2 * frame_bytes + 1024, on_connected),
                                      "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, str(port), "1" if context else "0", mode,
        str(frame_bytes), str(total), str(ca))
    stream = await asyncio.wait_for(accepted.get(), 60)
    if context is not None:
        await stream.start_tls(context, 60)
    started = time.process_time()
    if mode == "receive":
        for _ in range(total // frame_bytes):
            data = await stream.next_frame()
            if data is None:
                raise RuntimeError("the client closed early")
        spent = time.process_time() - started
        stream.write(b"x")
    else:
        chunk = memoryview(bytes(_SLICE_BYTES))
        for start in range(0, total, _SLICE_BYTES):
            stream.write(chunk[:min(_SLICE_BYTES, total - start)])
            await stream.drain()
        spent = time.process_time() - started
        if await stream.next_frame() is not None:  # the client closes once it has read all
            raise RuntimeError("unexpected frame")
    await client.wait()
    stream.close()
    server.close()
    await server.wait_closed()
    return spent


class _BareTls(asyncio.BufferedProtocol):
    """The least a TLS receive can cost in Python: an ``SSLObject`` over memory BIOs, no framing.

    What a TLS layer of the broker's own (instead of asyncio's ``SSLProtocol``)
    could come down to: each socket read into one buffer, written into the
    incoming BIO, and decrypted record by record into one plaintext buffer.
    """

    def __init__(self, context: ssl.SSLContext, total: int,
                 done: asyncio.Future[float]) -> None:
        self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._read = memoryview(bytearray(_SLICE_BYTES))
        self._plain = memoryview(bytearray(1 << 20))
        self._total, self._done, self._got = total, done, 0
        self._started: float | None = None
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read

    def buffer_updated(self, nbytes: int) -> None:
        assert self._transport is not None
        self._incoming.write(self._read[:nbytes])
        if self._started is None:
            with contextlib.suppress(ssl.SSLWantReadError):
                self._tls.do_handshake()
                self._started = time.process_time()
        else:
            read_into: Any = self._tls.read  # with a buffer it answers the count
            with contextlib.suppress(ssl.SSLWantReadError):
                while got := int(read_into(len(self._plain), self._plain)):
                    self._got += got
        answer = self._outgoing.read()
        if answer:
            self._transport.write(answer)
        started = self._started
        if started is not None and self._got >= self._total and not self._done.done():
            self._done.set_result(time.process_time() - started)
            self._tls.write(b"x")
            self._transport.write(self._outgoing.read())


async def _bare_receive(context: ssl.SSLContext, frame_bytes: int, total: int,
                        ca: Path) -> float:
    """Server CPU seconds for ``_BareTls`` to receive ``total`` bytes."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[float] = loop.create_future()
    server = await loop.create_server(lambda: _BareTls(context, total, done), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, str(port), "1", "receive", str(frame_bytes),
        str(total), str(ca))
    spent = await asyncio.wait_for(done, 600)
    await client.wait()
    server.close()
    await server.wait_closed()
    return spent


def _openssl_rate(total: int, context: ssl.SSLContext, ca: Path) -> float:
    """Bytes/s through a TLS 1.3 pair of SSLObjects over memory BIOs (encrypt + decrypt)."""
    client_context = ssl.create_default_context(cafile=str(ca))
    bios = [ssl.MemoryBIO() for _ in range(4)]
    server = context.wrap_bio(bios[0], bios[1], server_side=True)
    client = client_context.wrap_bio(bios[2], bios[3], server_hostname="127.0.0.1")
    for _ in range(10):  # the handshake, shuttling what each side wrote
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        bios[0].write(bios[3].read())
        bios[2].write(bios[1].read())
    block = bytes(_SLICE_BYTES)
    view = memoryview(bytearray(_SLICE_BYTES))
    read_into: Any = server.read  # typeshed: with a buffer it answers the count, an int
    started = time.process_time()
    for _ in range(total // _SLICE_BYTES):
        client.write(block)
        bios[0].write(bios[3].read())
        got = 0
        while got < _SLICE_BYTES:
            got += int(read_into(_SLICE_BYTES - got, view[got:]))
    return total / (time.process_time() - started)


def measure(mib: int, frame_bytes: int) -> dict[str, Any]:
    """Every figure (ns per byte, µs per 1 KiB event, OpenSSL's rate)."""
    import trustme  # noqa: PLC0415

    total = mib * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="folio-tls-floor-") as directory:
        ca = trustme.CA()
        ca_path = Path(directory) / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_path))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        out: dict[str, Any] = {"mib": mib, "frame_bytes": frame_bytes}
        for mode in ("receive", "send"):
            for name, tls in (("plaintext", None), ("tls", context)):
                seconds = asyncio.run(_serve_once(tls, mode, frame_bytes, total, ca_path))
                out[f"{mode}_{name}_ns_per_byte"] = seconds / total * 1e9
            extra = out[f"{mode}_tls_ns_per_byte"] - out[f"{mode}_plaintext_ns_per_byte"]
            out[f"{mode}_tls_extra_us_per_kib_event"] = extra * 1024 / 1000
        bare = asyncio.run(_bare_receive(context, frame_bytes, total, ca_path))
        out["receive_bare_tls_ns_per_byte"] = bare / total * 1e9
        out["openssl_encrypt_decrypt_mb_per_s"] = _openssl_rate(total, context, ca_path) / 1e6
    return out


def table(row: dict[str, Any]) -> str:
    """The figures as Markdown."""
    lines = [f"{row['mib']} MiB, frames of {row['frame_bytes']:,} B; server CPU:", "",
             "| direction | PLAINTEXT | TLS | TLS extra | per 1 KiB event |",
             "|---|---|---|---|---|"]
    for mode in ("receive", "send"):
        plain = row[f"{mode}_plaintext_ns_per_byte"]
        tls = row[f"{mode}_tls_ns_per_byte"]
        lines.append(f"| {mode} | {plain:.2f} ns/B | {tls:.2f} ns/B | {tls - plain:.2f} ns/B "
                     f"| {row[f'{mode}_tls_extra_us_per_kib_event']:.2f} µs |")
    lines += ["", "Receive through a bare SSLObject protocol (no asyncio TLS layer, no "
              f"framing): {row['receive_bare_tls_ns_per_byte']:.2f} ns/B"]
    rate = row["openssl_encrypt_decrypt_mb_per_s"]
    lines += ["", f"OpenSSL alone (encrypt and decrypt, memory BIOs): {rate:,.0f} MB/s, "
              f"{1e3 / rate / 2:.2f} ns/B each"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_tls_floor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=256, help="MiB each way (default 256)")
    parser.add_argument("--frame-bytes", type=int, default=1024 * 1024,
                        help="size of the frames received (default 1 MiB: a Produce)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    row = measure(args.mib, args.frame_bytes)
    print(json.dumps(row, indent=2) if args.json else table(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
