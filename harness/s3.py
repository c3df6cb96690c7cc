"""A real S3 API on loopback for tests and benchmarks.

* :class:`MotoS3` runs moto's server in a thread (tests) or as its own process
  (benchmarks, so its CPU does not compete with the code measured in-process).
* :class:`S3Proxy` sits between clients and moto: it adds a delay per request (as real
  S3's latency would), injects faults (503 SlowDown, 500, timeouts, a request that is
  applied but whose answer is lost) on chosen requests, and counts what passes.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

CREDENTIALS = {"key": "testing", "secret": "testing"}
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def storage_options(endpoint: str, **extra: Any) -> dict[str, Any]:
    """fsspec/s3fs options for an endpoint on loopback."""
    config_kwargs = {"retries": {"max_attempts": 3, "mode": "standard"},
                     "connect_timeout": 5, "read_timeout": 30}
    config_kwargs.update(extra.pop("config_kwargs", {}))
    return {"endpoint_url": endpoint, **CREDENTIALS,
            "client_kwargs": {"region_name": REGION}, "config_kwargs": config_kwargs, **extra}


class MotoS3:
    """moto's S3 server on 127.0.0.1 and a free port; `process=True` runs it apart."""

    def __init__(self, process: bool = False) -> None:
        self.process = process
        self._server: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.endpoint = ""

    def start(self) -> MotoS3:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", CREDENTIALS["key"])
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", CREDENTIALS["secret"])
        os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
        if self.process:
            port = free_port()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.endpoint = f"http://127.0.0.1:{port}"
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    time.sleep(0.1)
            else:
                raise RuntimeError("moto server did not start")
        else:
            import logging

            from moto.server import ThreadedMotoServer

            logging.getLogger("werkzeug").setLevel(logging.ERROR)

            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            self._server.start()
            host, port = self._server.get_host_and_port()
            self.endpoint = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=30)
            self._proc = None

    def __enter__(self) -> MotoS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, endpoint: str | None = None) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name=REGION,
                            aws_access_key_id=CREDENTIALS["key"],
                            aws_secret_access_key=CREDENTIALS["secret"])

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name

    def storage_options(self, **extra: Any) -> dict[str, Any]:
        return storage_options(self.endpoint, **extra)


Matcher = Callable[[str, str], bool]

_SLOWDOWN = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
_INTERNAL = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
             b"<Message>We encountered an internal error. Please try again.</Message></Error>")


@dataclass
class Fault:
    """Inject `kind` into the next `count` requests that `match`, after skipping `skip`.

    kinds: "503" (SlowDown, not applied), "500" (InternalError, not applied), "timeout"
    (no answer for `seconds`, not applied), "lost" (applied upstream, then no answer for
    `seconds`: the client cannot know it succeeded).
    """

    kind: str
    match: Matcher
    count: int = 1
    skip: int = 0
    seconds: float = 3.0
    fired: int = 0


def match_any(method: str, path: str) -> bool:
    return True


class _ProxyServer(ThreadingHTTPServer):
    # Room for every client connecting at once (socketserver's default backlog is 5: a
    # burst of connections beyond it waits for SYN retries, seconds each).
    request_queue_size = 2048
    daemon_threads = True


class S3Proxy:
    """An HTTP proxy on loopback in front of an S3 endpoint: delay, faults, counts.

    At most :data:`UPSTREAM_CONNECTIONS` requests are forwarded at once; the rest wait in
    the proxy, as they would in S3's queue, rather than overflow the backlog of the
    upstream server (moto's: 128)."""

    UPSTREAM_CONNECTIONS = 96

    def __init__(self, upstream: str, delay_ms: float = 0.0) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.delay_ms = delay_ms
        self.faults: list[Fault] = []
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._upstream = threading.BoundedSemaphore(self.UPSTREAM_CONNECTIONS)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""

    def inject(self, kind: str, match: Matcher = match_any, count: int = 1, skip: int = 0,
               seconds: float = 3.0) -> Fault:
        if kind not in ("503", "500", "timeout", "lost"):
            raise ValueError(f"unknown fault kind {kind!r}")
        fault = Fault(kind, match, count, skip, seconds)
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()
            self.counts.clear()

    def _pick_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            self.counts[method] += 1
            for fault in self.faults:
                if fault.fired < fault.count and fault.match(method, path):
                    if fault.skip > 0:
                        fault.skip -= 1
                        continue
                    fault.fired += 1
                    return fault
        return None

    def start(self) -> S3Proxy:
        handler = type("Handler", (_ProxyHandler,), {"proxy": self})
        self._server = _ProxyServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def _forward(self, method: str, path: str, headers: Any, body: bytes
                 ) -> tuple[int, list[tuple[str, str]], bytes]:
        with self._upstream:
            return self._forward_one(method, path, headers, body)

    def _forward_one(self, method: str, path: str, headers: Any, body: bytes
                     ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=120)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for key, value in headers:
                if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                    conn.putheader(key, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
            return response.status, response.getheaders(), data
        finally:
            conn.close()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> S3Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _ProxyHandler(BaseHTTPRequestHandler):
    """One request through an S3Proxy: a fault it was told to inject, or the answer of
    the upstream S3 (`proxy` is set per proxy, by S3Proxy.start)."""

    proxy: S3Proxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        body = self._body()
        fault = self.proxy._pick_fault(self.command, self.path)
        if self.proxy.delay_ms:
            time.sleep(self.proxy.delay_ms / 1000)
        if fault is not None and fault.kind in ("503", "500"):
            payload = _SLOWDOWN if fault.kind == "503" else _INTERNAL
            self.send_response(int(fault.kind))
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if fault is not None and fault.kind == "timeout":
            time.sleep(fault.seconds)
            self.close_connection = True
            return
        status, headers, data = self.proxy._forward(self.command, self.path,
                                               self.headers.items(), body)
        if fault is not None and fault.kind == "lost":
            time.sleep(fault.seconds)
            self.close_connection = True
            return
        self.send_response(status)
        for key, value in headers:
            if key.lower() not in ("connection", "transfer-encoding", "keep-alive",
                                   "content-length", "server", "date"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle
