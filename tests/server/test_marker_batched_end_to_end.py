"""Reconcile, rollback, SQL and the CLI work the same over batched markers, on local disk,
memory and S3."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from markerstore import MarkerClient, Table
from markerstore.cli.main import cli
from markerstore.markers import BATCHED, read_marker_type
from markerstore.server import open_markers
from markerstore.server.app import MarkerServer
from markerstore.sql import sql as sql_views

Serve = Callable[..., MarkerServer]


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_commit_reconciles_and_rollback_cleans_batched_markers(location: Any, serve: Serve,
                                                               fmt: str) -> None:
    table = Table(location.url, location.storage_options,
                  {"markerstore.markers.batch.format": fmt,
                   "markerstore.markers.batch.max_segments": 4})
    storage = table.storage
    server = serve(table)
    # a write with two attempts of one task: the loser's file must go at commit
    instant = table.start_commit(heartbeat=False)
    markers = open_markers(table, instant, type="batched", url=server.url)
    written = []
    for i in range(6):  # six flushes: compaction runs
        for attempt in (0, 1):
            name = f"f{i}_{attempt}-0-{attempt}_{instant}.parquet"
            assert markers.create("day=1", name, "CREATE", task_attempt=f"t{i}.{attempt}")
            storage.put(storage.path("day=1", name), b"rows")
            written.append(f"day=1/{name}")
    assert read_marker_type(storage, instant) == BATCHED
    winners = [w for w in written if "_0-0-0_" in w]
    server.seal(instant)
    metadata = table.commit(instant, winners)
    assert metadata["counts"]["files_cleaned"] == 6
    assert sorted(f["path"] for f in metadata["files"]) == sorted(winners)
    for path in written:
        assert storage.exists(storage.path(path)) == (path in winners)
    assert read_marker_type(storage, instant) is None  # markers deleted after commit
    # a write that fails: rollback deletes every file its markers name, and the markers
    failed = table.start_commit(heartbeat=False)
    client = MarkerClient(server.url, failed)
    client.create("day=2", f"g_0-0-0_{failed}.parquet", "CREATE")
    client.create("day=2", f"h_0-0-0_{failed}.parquet", "MERGE")
    storage.put(storage.path("day=2", f"g_0-0-0_{failed}.parquet"), b"partial")
    assert sql_views(table, "SELECT count(*) FROM markers").fetchall() == [(2,)]
    server.seal(failed)
    result = table.rollback(failed, force=True)
    assert not isinstance(result, list)
    assert result.deleted_files == [f"day=2/g_0-0-0_{failed}.parquet",
                                    f"day=2/h_0-0-0_{failed}.parquet"]
    assert not storage.exists(storage.path("day=2", f"g_0-0-0_{failed}.parquet"))
    assert read_marker_type(storage, failed) is None
    assert table.rollback(failed).noop  # type: ignore[union-attr]
    assert [i.state for i in table.timeline()] == ["completed", "rolledback"]


def test_cli_markers_lists_batched_markers(tmp_path: Any, serve: Serve) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant)
    client.create("d=1", "a_w.parquet")
    client.create("d=1", "b_w.parquet", "APPEND")
    result = CliRunner().invoke(cli, ["markers", str(tmp_path / "t"), instant, "--json"])
    assert result.exit_code == 0, result.output
    assert [r["marker"] for r in json.loads(result.output)] == [
        "d=1/a_w.parquet.marker.CREATE", "d=1/b_w.parquet.marker.APPEND"]


def test_cli_serve_refuses_a_public_address_without_token(tmp_path: Any,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.delenv("MARKERSTORE_SERVER_TOKEN", raising=False)
    Table(str(tmp_path / "t")).start_commit(heartbeat=False)  # a table: only the host is bad
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", "--table", str(tmp_path / "t"), "--host", "0.0.0.0"])
    assert exit_info.value.code == 2
