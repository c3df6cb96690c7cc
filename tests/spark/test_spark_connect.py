"""Spark Connect: a client session without a SparkContext, against a local Connect server
(the `connect` fixture). The format writer with an error table, the function writer and
snapshot reads, and `markerstore ingest --remote`, each read back from storage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import errortable
import markerstore.spark as ms
from markerstore import Table
from markerstore.cli import sample
from markerstore.cli.main import cli as cli_main
from markerstore.sql import sql as sql_views
from tests.support.commit_checks import assert_clean, assert_exactly_committed

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCHED = {"markerstore.write.markers.type": "batched"}


def _frame(session: Any, rows: int = 300) -> Any:
    data = [(i if i % 50 else None, f"d{i % 3}", float(i % 7) - 1.0) for i in range(rows)]
    return session.createDataFrame(data, "id BIGINT, day STRING, amount DOUBLE").repartition(2)


def _committed_rows(url: str) -> int:
    """The rows of the committed files (pyarrow), once the table holds exactly them
    (DuckDB and the views agree) and nothing of the write is left."""
    table = Table(url)
    files = [table.storage.path(p) for (p,) in
             sql_views(table, "SELECT path FROM files").fetchall()]
    rows = sum(pq.read_metadata(f).num_rows for f in files)
    assert_exactly_committed(table, rows)
    assert_clean(table)
    return rows


def test_format_writer_with_an_error_table_over_connect(connect: Any, tmp_path: Path) -> None:
    """register() over Connect takes the server driver's address; the write's job host
    (marker server and heartbeats) runs on Spark's driver, with the error table."""
    ms.register(connect)
    url = str(tmp_path / "events")
    (_frame(connect).write.format("markerstore").mode("append")
     .options(**BATCHED, **{"markerstore.write.error.table.enabled": "true",
                            "markerstore.write.key": "id",
                            "markerstore.write.partition_by": "day"})
     .save(url))
    null_keys = 300 // 50
    assert _committed_rows(url) == 300 - null_keys
    assert [i.state for i in Table(url).timeline()] == ["completed"]
    errors = errortable.read(url + "_errors")
    assert errors.query("e", "SELECT reason, count(*) FROM e GROUP BY 1").fetchall() == [
        ("key", null_keys)]


def test_function_writer_and_read_over_connect(connect: Any, tmp_path: Path) -> None:
    """markerstore.spark.write over Connect runs through the data source on Spark's driver
    (the client may be a host executors cannot reach); read hands Spark the snapshot."""
    url = str(tmp_path / "t")
    result = ms.write(_frame(connect), url, partition_by="day", options=BATCHED)
    assert result.rows_written == 300 and _committed_rows(url) == 300
    # Its driver side ran on Spark's driver: the marker server at the driver's address.
    meta = Table(url).commit_metadata(result.instant)
    assert meta["interface"] == "format" and meta["marker_server"].startswith(
        "http://127.0.0.1:")
    back = ms.read(connect, url)
    assert back.count() == 300
    assert sorted(r[0] for r in back.select("day").distinct().collect()) == ["d0", "d1", "d2"]


def test_ingest_remote(connect_server: Any, connect: Any, tmp_path: Path) -> None:
    """`markerstore ingest --remote sc://...`: no SparkContext anywhere in the client; the
    write runs through the data source on Spark's driver and commits data and errors."""
    info = sample.generate(str(tmp_path / "src"), rows=3000, files=3)
    url = str(tmp_path / "events")
    args = ["ingest", str(tmp_path / "src"), url, "--remote", connect_server.url,
            "--schema", sample.SCHEMA_DDL, "--key", sample.KEY, "--partition-by",
            sample.PARTITION_BY, "--progress", "--json",
            *[a for name, expr in sample.CHECKS.items() for a in ("--check", f"{name}={expr}")]]
    out = CliRunner().invoke(cli_main, args, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    summary = json.loads(out.stdout)
    assert summary["rows_read"] == info.rows and summary["rows_written"] == info.good
    # Three small files on the server's two cores (its parallelism, read without a
    # SparkContext): two Spark tasks.
    assert (summary["source_splits"], summary["spark_tasks"]) == (3, 2)
    assert summary["error_records"] == sum(info.bad.values())
    assert _committed_rows(url) == info.good
    errors = errortable.read(url + "_errors")
    assert errors.query("e", "SELECT count(*) FROM e").fetchall() == [(sum(info.bad.values()),)]
    assert [i.state for i in Table(url).timeline()] == ["completed"]
