"""`markerstore ingest --remote` fails fast, in one line naming the address
(docs/RELIABILITY.md, "Spark Connect fails fast"): today nothing listening meant no output
for 10 minutes (pyspark's default retries), and a port out of range or a URL with a path
was "unexpected ValueError", exit 1. No Spark server is needed: the servers here are a
closed port, and sockets that accept a connection and then close it or never answer."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from markerstore import config
from markerstore.cli import cli


def _ingest(tmp_path: Path, remote: str, *options: str) -> tuple[int, list[str], float]:
    """(exit code, stderr lines, seconds) of `markerstore ingest ... --remote REMOTE`."""
    source = tmp_path / "in.json"
    source.write_text('{"a": 1}\n')
    args = [sys.executable, "-m", "markerstore.cli", "ingest", str(source),
            str(tmp_path / "t"), "--remote", remote, "--schema", "a BIGINT"]
    for option in options:
        args += ["--option", option]
    started = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    return out.returncode, out.stderr.splitlines(), time.monotonic() - started


@pytest.mark.parametrize(("url", "why"), [
    ("sc://host:99999", "the port is not a number from 1 to 65535"),
    ("sc://host:0", "the port is not a number from 1 to 65535"),
    ("sc://host:port", "the port is not a number from 1 to 65535"),
    ("sc://host:15002/path", "a path ('/path') where none may be"),
    ("sc://", "no host"),
    ("sc://host:15002/;token", "a parameter that is not key=value"),
    ("http://host:15002", "not a Spark Connect URL"),
    ("sc://[::1", "not a valid address (Invalid IPv6 URL)"),
    ("sc://[zz]:15002", "not a valid address ('zz' does not appear to be an IPv4 or IPv6 "
                        "address)"),
    ("sc://[::1]x:15002", "text after the bracketed address"),
    ("sc://host\uff0f:15002", "not a valid address (netloc 'host\uff0f:15002' contains "
                               "invalid characters under NFKC normalization)"),
    ("sc://ho st:15002", "white space or a control character in the host"),
    ("sc://a\x00b:15002", "white space or a control character in the host"),
    ("sc://" + "a" * 64 + ":15002", "not a valid host name (a label is empty or longer "
                                    "than 63 characters)"),
    ("sc://a..b:15002", "not a valid host name (a label is empty or longer than 63 "
                        "characters)"),
])
def test_a_bad_url_is_one_line_and_exit_2_before_spark(tmp_path: Path, url: str,
                                                       why: str) -> None:
    source = tmp_path / "in.json"
    source.write_text('{"a": 1}\n')
    result = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "t"), "--remote",
                                      url, "--schema", "a BIGINT"], prog_name="markerstore")
    lines = result.output.splitlines()
    assert result.exit_code == 2 and len(lines) == 1, lines
    assert lines[0] == f"markerstore: error: --remote {url!r}: {why}; expected sc://HOST:PORT"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A socket on loopback that accepts connections; what it accepted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []
    yield server, accepted
    server.close()
    for conn in accepted:
        conn.close()


def _serve(server: socket.socket, accepted: list[socket.socket], close: bool) -> None:
    def run() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            if close:
                conn.close()
            else:
                accepted.append(conn)
    threading.Thread(target=run, daemon=True).start()


def test_nothing_listening_is_one_line_naming_the_address(tmp_path: Path) -> None:
    port = _closed_port()
    code, lines, seconds = _ingest(tmp_path, f"sc://127.0.0.1:{port}")
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"markerstore: error: cannot reach the Spark Connect server "
                               f"at 127.0.0.1:{port}")
    assert seconds < 60


@pytest.mark.parametrize("close", [True, False], ids=["closes", "never-answers"])
def test_a_server_that_is_no_spark_connect_server_fails_within_the_budget(
        tmp_path: Path, listener: tuple[socket.socket, list[socket.socket]],
        close: bool) -> None:
    """It accepts the connection, then closes it or never answers: the retry budget
    (2 retries, connections given 1 s) is spent, not pyspark's 10 minutes."""
    server, accepted = listener
    _serve(server, accepted, close)
    port = server.getsockname()[1]
    code, lines, seconds = _ingest(tmp_path, f"sc://127.0.0.1:{port}",
                                   f"{config.CONNECT_TIMEOUT_MS}=1000",
                                   f"{config.CONNECT_RETRIES}=2")
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"markerstore: error: the Spark Connect server at "
                               f"127.0.0.1:{port} (sc://127.0.0.1:{port}) did not answer "
                               f"after 2 retries ({config.CONNECT_RETRIES})")
    assert seconds < 90


def test_help_shows_the_budget() -> None:
    out = subprocess.run([sys.executable, "-m", "markerstore.cli", "ingest", "--help"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    text = " ".join(out.split())
    assert config.CONNECT_TIMEOUT_MS in text and config.CONNECT_RETRIES in text
