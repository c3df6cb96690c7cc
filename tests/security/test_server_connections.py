"""Hostile connections to the marker server, over real sockets against the real server.

The attacks: a malformed request (a control character in a header line) made aiohttp log
a traceback that quotes the raw header line, the bearer token with it; an unauthenticated
client could flood the log and put the token in it. And a client that sends its headers
a byte at a time (slowloris) held its connection for as long as it liked.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from markerstore import Table
from markerstore.config import SERVER_HEADER_TIMEOUT_MS
from markerstore.server.app import MarkerServer

TOKEN = "tok-3f9a1c77e2b54d0a"
HEADER_TIMEOUT_MS = 1000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MarkerServer]:
    table = Table(str(tmp_path / "t"))
    with MarkerServer(table, options={SERVER_HEADER_TIMEOUT_MS: HEADER_TIMEOUT_MS},
                      token=TOKEN) as running:
        yield running


def _connect(server: MarkerServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _exchange(server: MarkerServer, request: bytes) -> bytes:
    with _connect(server) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


class Lines(logging.Handler):
    """Every record logged anywhere, as the text a log file would hold."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@pytest.fixture
def log_lines() -> Iterator[Lines]:
    lines = Lines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(lines)
    root.setLevel(logging.DEBUG)
    yield lines
    root.removeHandler(lines)
    root.setLevel(level)


def test_a_malformed_request_is_one_log_line_without_the_token(
        server: MarkerServer, log_lines: Lines) -> None:
    bad = (f"GET /v1/markers/20240101000000000 HTTP/1.1\r\nHost: x\r\n"
           f"Authorization: Bearer {TOKEN}\x01\r\n\r\n").encode()
    answer = _exchange(server, bad)
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request"), answer[:200]
    time.sleep(0.2)  # the server's thread logs after it answers
    texts = [t for t in log_lines.texts if "marker server" in t or "aiohttp" in t]
    assert len(texts) == 1, texts
    assert "\n" not in texts[0] and "bad request" in texts[0]
    assert all(TOKEN not in t and "Traceback" not in t for t in log_lines.texts)


def test_a_flood_of_malformed_requests_is_a_few_lines(server: MarkerServer,
                                                      log_lines: Lines) -> None:
    for _ in range(40):
        _exchange(server, f"GET / HTTP/1.1\r\nX-Secret: {TOKEN}\x7f\r\n\r\n".encode())
    time.sleep(0.2)
    texts = [t for t in log_lines.texts if "marker server" in t or "aiohttp" in t]
    assert 1 <= len(texts) <= 11, texts
    assert all(TOKEN not in t for t in log_lines.texts)


def test_a_slow_header_connection_is_closed(server: MarkerServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST /v1/markers/20240101000000000/create HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(0.2)
        started = time.monotonic()
        closed_after = None
        while time.monotonic() - started < 8:
            try:
                sock.sendall(b"X-Slow: a\r\n")  # a header line now and then, never the end
                if sock.recv(1024) == b"":
                    closed_after = time.monotonic() - started
                    break
            except TimeoutError:
                continue
            except OSError:  # reset by the server
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None, "the server kept a slow-header connection"
    assert closed_after < HEADER_TIMEOUT_MS / 1000 + 3


def test_a_slow_body_is_cut_and_a_prompt_client_is_served(server: MarkerServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST /v1/markers/20240101000000000/create HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + TOKEN.encode() + b"\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        sock.settimeout(HEADER_TIMEOUT_MS / 1000 + 5)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert _exchange(server, b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                     ).startswith(b"HTTP/1.1 200")
