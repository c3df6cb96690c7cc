"""`markerstore serve`: run the marker server of one table until interrupted."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import stat
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
from markerstore.errors import ConfigError
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
              help=f"Bearer token clients must send. On the command line every user sees "
                   f"it in `ps`: prefer --token-file or ${TOKEN_ENV}.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="Read the bearer token from this file (its first line); a file that "
                   "other users can read is warned about.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="markerstore option (repeatable), e.g. "
                   "markerstore.markers.batch.interval_ms=20")
@storage_option_flag
@json_flag
def serve(table_path: str, host: str, port: int, token: str | None, token_file: str | None,
          options: tuple[str, ...], storage_options: tuple[str, ...], as_json: bool) -> None:
    """Serve the batched markers of TABLE over HTTP; prints the URL, then runs until
    interrupted (SIGINT or SIGTERM), answering the requests in progress before it exits."""
    from markerstore.server.app import MarkerServer

    if token_file is not None:
        if token is not None:
            raise click.UsageError(f"give the token once: --token-file, or --token / "
                                   f"${TOKEN_ENV}")
        token = read_token_file(token_file)
    table = open_table(table_path, storage_options, parse_key_values(options, "--option"))
    server = MarkerServer(table, host=host, port=port, token=token)
    asyncio.run(_run(server, as_json))


def read_token_file(path: str) -> str:
    """The token a file holds (its first line, without surrounding whitespace). A file that
    other users can read is used, with a warning on stderr: the token is only as secret as
    the file."""
    try:
        mode = os.stat(path).st_mode
        with open(path, encoding="utf-8") as handle:
            line = handle.readline(4096)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--token-file {path}: cannot read the token "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    if mode & 0o077:
        click.echo(f"markerstore: warning: --token-file {path} can be read by other users "
                   f"(mode {stat.S_IMODE(mode):o}); chmod 600 it", err=True)
    return line.strip()


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
