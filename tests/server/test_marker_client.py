"""MarkerClient: construction, pickling, retries, and the fallback that only happens when
configured."""

from __future__ import annotations

import logging
import pickle
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

import markerstore
from harness.s3 import free_port
from markerstore import MarkerClient, MarkerServerError, Table
from markerstore.markers import DIRECT, read_marker_type
from markerstore.server import open_markers
from markerstore.server.app import MarkerServer

Serve = Callable[..., MarkerServer]
FALLBACK = "markerstore.markers.batched.fallback.direct"


def test_construction_forms(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    assert markerstore.MarkerClient is MarkerClient
    positional = MarkerClient(server.url, instant)
    keyword = MarkerClient(url=server.url, instant=instant, table=mem_table, timeout=5,
                           retries=1, token=None)
    via_table = open_markers(mem_table, instant, type="batched", url=server.url)
    via_hudi_name = open_markers(mem_table, instant, type="timeline_server_based", url=server.url)
    assert isinstance(via_table, MarkerClient) and isinstance(via_hudi_name, MarkerClient)
    assert positional.create("p", "a_w.parquet")
    assert not keyword.create("p", "a_w.parquet")
    assert via_table.all() == ["p/a_w.parquet.marker.CREATE"]
    assert keyword.timeout == 5 and keyword.retries == 1
    with pytest.raises(MarkerServerError, match="URL"):
        MarkerClient(instant=instant, table=mem_table)
    with pytest.raises(TypeError):
        MarkerClient(server.url)


def test_pickles_for_executors(tmp_path: Any, serve: Serve) -> None:
    table = Table(str(tmp_path / "t"), options={FALLBACK: True})
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant, table=table, token="unused")
    client.create("p", "a_w.parquet")
    payload = pickle.dumps(client)
    assert len(payload) < 2000  # strings only: no pool, no table object
    copy = pickle.loads(payload)
    assert copy.create("p", "b_w.parquet")
    assert copy.all() == ["p/a_w.parquet.marker.CREATE", "p/b_w.parquet.marker.CREATE"]
    assert copy.fallback and copy.token == "unused"
    assert copy._get_table() is not None and copy._get_table().path == table.path


def test_unreachable_server_fails_loudly(mem_table: Table) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(MarkerServerError, match="cannot be reached"):
        MarkerClient(url, instant, table=mem_table, retries=1, timeout=2)  # opens the folder
    client = MarkerClient(url, instant, table=mem_table, retries=1, timeout=2,
                          initialize=False)
    with pytest.raises(MarkerServerError, match="cannot be reached"):
        client.create("p", "a_w.parquet")
    with pytest.raises(MarkerServerError, match="cannot be reached"):
        client.all()
    assert read_marker_type(mem_table.storage, instant) is None


def test_a_server_that_never_answers_a_connect_fails_within_the_connect_timeout(
        mem_table: Table) -> None:
    """A black hole (a listener whose backlog is full: SYNs are dropped, as behind a
    firewall): the client gives up after connect_timeout, all tries together, and says
    where it tried and what to set."""
    instant = mem_table.start_commit(heartbeat=False)
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(0)
        filler = socket.create_connection(hole.getsockname(), timeout=5)  # fills it
        url = f"http://127.0.0.1:{hole.getsockname()[1]}"
        client = MarkerClient(url, instant, table=mem_table, initialize=False, retries=3,
                              timeout=30, connect_timeout=1.5)
        started = time.monotonic()
        with pytest.raises(MarkerServerError) as info:
            client.create("p", "a_w.parquet")
        filler.close()
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert url in message and "\n" not in message
    assert "spark.driver.host" in message and "markerstore.markers.server.host" in message
    assert "markerstore.markers.client.connect_timeout_ms" in message


def test_fallback_to_direct_only_when_configured_with_one_warning(
        tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    table = Table(str(tmp_path / "t"), options={FALLBACK: "true"})
    instant = table.start_commit(heartbeat=False)
    url = f"http://127.0.0.1:{free_port()}"
    client = MarkerClient(url, instant, table=table, retries=0, timeout=2)
    with caplog.at_level(logging.WARNING, logger="markerstore.server.client"):
        assert client.create("p", "a_w.parquet")
        assert not client.create("p", "a_w.parquet")
        other = MarkerClient(url, instant, table=table, retries=0, timeout=2)
        assert other.create("p", "b_w.parquet")  # a second client: still one warning
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "DIRECT markers instead" in warnings[0].getMessage()
    assert client.direct is not None
    assert read_marker_type(table.storage, instant) == DIRECT
    assert client.all() == ["p/a_w.parquet.marker.CREATE", "p/b_w.parquet.marker.CREATE"]
    # rollback reads them like any direct markers
    for name in ("a_w.parquet", "b_w.parquet"):
        table.storage.put(table.storage.path("p", name), b"data")
    result = table.rollback(instant, force=True)
    assert not isinstance(result, list)
    assert result.deleted_files == ["p/a_w.parquet", "p/b_w.parquet"]


def test_no_fallback_once_batched_markers_exist(tmp_path: Any) -> None:
    table = Table(str(tmp_path / "t"), options={FALLBACK: True,
                                                "markerstore.markers.batch.interval_ms": 5})
    instant = table.start_commit(heartbeat=False)
    server = MarkerServer(table)
    server.start()
    client = MarkerClient(server.url, instant, table=table, retries=0, timeout=2)
    client.create("p", "a_w.parquet")
    server.stop()
    with pytest.raises(MarkerServerError, match="already has batched markers"):
        client.create("p", "b_w.parquet")


def test_server_errors_never_trigger_the_fallback(tmp_path: Any, serve: Serve,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table(str(tmp_path / "t"), options={FALLBACK: True})
    instant = table.start_commit(heartbeat=False)
    server = serve(table)

    def broken(path: str, data: bytes = b"") -> bool:
        raise OSError(5, "injected")

    monkeypatch.setattr(table.storage, "create_if_absent", broken)
    with pytest.raises(MarkerServerError, match="503"):
        MarkerClient(server.url, instant, table=table, retries=1)  # MARKERS.type fails
    client = MarkerClient(server.url, instant, table=table, retries=1, initialize=False)
    with pytest.raises(MarkerServerError, match="503"):
        client.create("p", "a_w.parquet")
    assert client.direct is None


def test_survives_a_server_restart_on_the_same_port(tmp_path: Any) -> None:
    table = Table(str(tmp_path / "t"), options={"markerstore.markers.batch.interval_ms": 5})
    instant = table.start_commit(heartbeat=False)
    port = free_port()
    first = MarkerServer(table, port=port)
    first.start()
    client = MarkerClient(first.url, instant)
    assert client.create("p", "a_w.parquet")  # leaves a kept-alive connection in the pool
    first.stop()
    second = MarkerServer(Table(str(tmp_path / "t")), port=port)
    second.start()
    try:
        assert not client.create("p", "a_w.parquet")
        assert client.create("p", "b_w.parquet")
    finally:
        second.stop()
