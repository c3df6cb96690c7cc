"""Fixtures for the marker server tests: tables, embedded servers, raw HTTP."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3

from markerstore import Table
from markerstore.server.app import MarkerServer

FAST = {"markerstore.markers.batch.interval_ms": 5}


@pytest.fixture
def mem_table() -> Table:
    return Table(f"memory://srv-{uuid.uuid4().hex[:12]}/table", options=FAST)


@pytest.fixture
def serve() -> Iterator[Callable[..., MarkerServer]]:
    """Start embedded servers; all are stopped at the end of the test."""
    started: list[MarkerServer] = []

    def start(table: Table, **kwargs: Any) -> MarkerServer:
        options = {**FAST, **kwargs.pop("options", {})}
        server = MarkerServer(table, options=options, **kwargs)
        server.start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.stop()


class Http:
    """Raw requests to a server, for what the client would never send."""

    def __init__(self) -> None:
        self.pool = urllib3.PoolManager(retries=False, timeout=30)

    def __call__(self, method: str, url: str, body: Any = None, raw: bytes | None = None,
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        response = self.pool.request(method, url, body=data, headers=headers or {})
        try:
            payload = json.loads(response.data) if response.data else None
        except ValueError:
            payload = response.data.decode()
        return response.status, payload


@pytest.fixture
def http() -> Http:
    return Http()
