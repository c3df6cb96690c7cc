"""The DuckDB views: commits, files, markers."""

from __future__ import annotations

from markerstore import Table
from markerstore.sql import sql as sql_views
from tests.support.files import marked_write
from tests.support.locations import Location


def test_views(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    first = table.start_commit(heartbeat=False)
    marked_write(table, first, ["d=1/a.parquet", "d=2/b.parquet"])
    table.commit(first, [{"path": "d=1/a.parquet", "rows": 7},
                         {"path": "d=2/b.parquet", "rows": 3}])
    pending = table.start_commit(heartbeat=False)
    marked_write(table, pending, ["d=3/c.parquet"])
    marked_write(table, pending, ["d=3/c.log"], io_type="APPEND")
    commits = sql_views(table, "SELECT instant, state, num_files, num_rows FROM commits "
                        "ORDER BY instant").fetchall()
    assert commits == [(first, "completed", 2, 10), (pending, "inflight", None, None)]
    files = sql_views(table, "SELECT instant, partition, file, rows FROM files ORDER BY path"
                      ).fetchall()
    assert files == [(first, "d=1", "a.parquet", 7), (first, "d=2", "b.parquet", 3)]
    markers = sql_views(table, "SELECT instant, partition, file, io_type, path FROM markers "
                        "ORDER BY path").fetchall()
    assert markers == [(pending, "d=3", "c.log", "APPEND", "d=3/c.log"),
                       (pending, "d=3", "c.parquet", "CREATE", "d=3/c.parquet")]
    total = sql_views(table, "SELECT sum(rows) FROM files JOIN commits USING (instant) "
                      "WHERE state = 'completed'").fetchall()
    assert total == [(10,)]


def test_files_view_sees_a_commit_all_or_nothing(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, [f"f{i}.parquet" for i in range(4)])
    assert sql_views(table, "SELECT count(*) FROM files").fetchall() == [(0,)]
    table.commit(instant, [f"f{i}.parquet" for i in range(4)])
    assert sql_views(table, "SELECT count(*) FROM files").fetchall() == [(4,)]
