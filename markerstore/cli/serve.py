"""`markerstore serve`: run the marker server of one table until interrupted."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from typing import TYPE_CHECKING

import click

from markerstore.cli.main import (
    json_flag,
    open_table,
    output,
    parse_key_values,
    storage_option_flag,
)
from markerstore.server.protocol import TOKEN_ENV

if TYPE_CHECKING:
    from markerstore.server.app import MarkerServer


@click.command()
@click.option("--table", "table_path", required=True, help="Table path or URL to serve.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback requires a token.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="Port to bind; 0 picks a free one.")
@click.option("--token", envvar=TOKEN_ENV, default=None,
              help=f"Bearer token clients must send (or ${TOKEN_ENV}).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="markerstore option (repeatable), e.g. "
                   "markerstore.markers.batch.interval_ms=20")
@storage_option_flag
@json_flag
def serve(table_path: str, host: str, port: int, token: str | None, options: tuple[str, ...],
          storage_options: tuple[str, ...], as_json: bool) -> None:
    """Serve the batched markers of TABLE over HTTP; prints the URL, then runs until
    interrupted (SIGINT or SIGTERM), answering the requests in progress before it exits."""
    from markerstore.server.app import MarkerServer

    table = open_table(table_path, storage_options, parse_key_values(options, "--option"))
    server = MarkerServer(table, host=host, port=port, token=token)
    asyncio.run(_run(server, as_json))


async def _run(server: MarkerServer, as_json: bool) -> None:
    url = await server.start_async()
    # What start-up allocated (modules, the storage client, the codecs) lives as long as
    # the process: leave it out of the collector's full passes, which would otherwise
    # scan it all and stall every request for tens of milliseconds.
    gc.freeze()
    output({"url": url, "table": server.table_url}, as_json)
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop_async()


def register(group: click.Group) -> None:
    group.add_command(serve)
