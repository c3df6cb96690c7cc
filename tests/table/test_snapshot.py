"""Table.snapshot without a JVM: the committed files of one completed instant, the same
rule as the `files` view, pyarrow and DuckDB over exactly those files."""

from __future__ import annotations

from typing import Any

import pytest

from markerstore.commit import WriteJob
from markerstore.errors import SnapshotError
from tests.support.commit_checks import commit_all, day_batches, live_paths, open_table, split


def test_snapshot_follows_appends_and_replaces(location: Any) -> None:
    table = open_table(location)
    assert table.snapshot().instant is None and table.snapshot().files == []
    first = commit_all(table, split(600, 2), partition_by=["day"], conflict_mode="append")
    second = commit_all(table, {0: day_batches(90, 1, start=5000)}, partition_by=["day"],
                        conflict_mode="replace")
    latest = table.snapshot()
    assert latest.instant == second.instant
    assert sorted(latest.paths) == live_paths(table)  # the files view: one rule
    assert latest.rows == 600 - 200 + 90
    assert latest.dataset().count_rows() == 490
    assert latest.duckdb().filter("day = 1").count("*").fetchall() == [(90,)]
    inflight = WriteJob(table, conflict_mode="append").start()  # adds nothing
    assert table.snapshot().paths == latest.paths
    table.abort(inflight.instant)
    with pytest.raises(SnapshotError, match="gone"):  # its day=1 files were replaced
        table.snapshot(first.instant)
    with pytest.raises(SnapshotError, match="not a completed instant"):
        table.snapshot(inflight.instant)
