"""A transparent TCP proxy that delays one direction of every connection, as a slow link
would (``tc netem delay`` on the sending host's interface, which this kernel lacks).

Run inside a host's namespace, with iptables sending that host's outgoing connections to
it (``-t nat -A OUTPUT ... -j REDIRECT --to-ports PORT``). It reads each connection's
original destination (``SO_ORIGINAL_DST``), waits `delay` (the SYN's trip), connects there
with a firewall mark (``SO_MARK``) that the REDIRECT rule skips, and forwards the client's
bytes `delay` after they arrived, in order; answers pass at once. So each round trip gets
`delay` longer. It writes its counts (connections, bytes) as JSON to `--stats` every
second and on SIGTERM.

    python -m tests.support.delay_proxy --port 15999 --delay-ms 200 --mark 119 --stats F
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import socket
import struct
import time
from pathlib import Path

SO_ORIGINAL_DST = 80


class Counts:
    def __init__(self) -> None:
        self.connections = 0
        self.failed = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.delayed_chunks = 0  # what a client sent, each held back by the delay

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(packed), int(port)


async def _delayed_pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        delay: float, counts: Counts) -> None:
    """Forward what `reader` gives `delay` seconds after it arrived, in order."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not chunk:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while True:
            chunk = await reader.read(65536)
            counts.bytes_up += len(chunk)
            counts.delayed_chunks += 1 if chunk else 0
            queue.put_nowait((time.monotonic() + delay, chunk))
            if not chunk:
                break
        await sender
    finally:
        sender.cancel()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                counts: Counts) -> None:
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            with contextlib.suppress(OSError):
                writer.write_eof()
            return
        counts.bytes_down += len(chunk)
        writer.write(chunk)
        await writer.drain()


async def _connection(client_reader: asyncio.StreamReader,
                      client_writer: asyncio.StreamWriter, delay: float, mark: int,
                      counts: Counts) -> None:
    counts.connections += 1
    sock = client_writer.get_extra_info("socket")
    upstream_writer = None
    try:
        host, port = original_destination(sock)
        await asyncio.sleep(delay)
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
        upstream.setblocking(False)
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(upstream, (host, port)),
                               timeout=30)
        upstream_reader, upstream_writer = await asyncio.open_connection(sock=upstream)
        await asyncio.gather(_delayed_pump(client_reader, upstream_writer, delay, counts),
                             _pump(upstream_reader, client_writer, counts))
    except (OSError, asyncio.TimeoutError):
        counts.failed += 1
    finally:
        for writer in (client_writer, upstream_writer):
            if writer is not None:
                writer.close()


async def serve(port: int, delay: float, mark: int, stats: Path | None) -> None:
    counts = Counts()
    server = await asyncio.start_server(
        lambda r, w: _connection(r, w, delay, mark, counts), "0.0.0.0", port,
        reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def dump() -> None:
        if stats is not None:
            tmp = stats.with_suffix(".tmp")
            tmp.write_text(json.dumps(counts.as_dict()))
            tmp.replace(stats)

    async with server:
        while not stop.is_set():
            dump()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
    dump()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--mark", type=int, default=119)
    parser.add_argument("--stats", type=Path, default=None)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.delay_ms / 1000, args.mark, args.stats))


if __name__ == "__main__":
    main()
