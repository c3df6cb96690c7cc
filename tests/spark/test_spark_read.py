"""Snapshot reads: markerstore.spark.read and Table.snapshot see exactly one completed
instant's files, never an inflight write's, never both sides of a replace."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

import markerstore.spark as ms
from markerstore import Table
from markerstore.commit import add_step_hook, remove_step_hook
from markerstore.errors import SnapshotError

pytestmark = pytest.mark.spark
# A replace's files deleted once it is published (retention 0): a folder listing then
# shows one side only.
RETENTION = "markerstore.table.replaced_files.retention"
KW = {"partition_by": "day",
      "options": {"markerstore.write.target_file_size": 8000, RETENTION: "0"}}


def frame(spark: Any, rows: int, start: int = 0, day: int | None = None) -> Any:
    days = "id % 3" if day is None else str(day)
    return spark.range(start, start + rows, numPartitions=2).selectExpr(
        "id", f"{days} AS day", "concat('row-', cast(id AS string)) AS payload")


@contextmanager
def paused_at(step: str) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Hold the next job commit that reaches `step` until `release` is set."""
    reached, release = threading.Event(), threading.Event()

    def hook(name: str, info: Any) -> None:
        del info
        if name == step and not reached.is_set():
            reached.set()
            assert release.wait(120)

    add_step_hook(hook)
    try:
        yield reached, release
    finally:
        release.set()
        remove_step_hook(hook)


def by_day(df: Any) -> dict[int, int]:
    return {r["day"]: r["count"] for r in df.groupBy("day").count().collect()}


def test_read_during_a_replace_sees_only_the_new_snapshot(spark: Any, tmp_path: Any) -> None:
    url = str(tmp_path / "t")
    ms.write(frame(spark, 900), url, **KW)  # 300 rows in each of day=0,1,2
    with paused_at("after_complete") as (reached, release), ThreadPoolExecutor(1) as pool:
        replace = pool.submit(ms.write, frame(spark, 50, start=10_000, day=1), url,
                              mode="overwrite", **KW)
        assert reached.wait(120)
        # The replace is completed; the files it replaced are still on storage.
        listing = spark.read.parquet(url).count()
        snapshot = ms.read(spark, url)
        assert listing == 900 + 50  # what a folder listing shows: both sides
        assert snapshot.count() == 650 and by_day(snapshot) == {0: 300, 1: 50, 2: 300}
        table = Table(url)
        assert table.snapshot().rows == 650
        assert table.snapshot().duckdb().count("*").fetchall() == [(650,)]
        release.set()
        assert replace.result().rows_written == 50
    assert ms.read(spark, url).count() == spark.read.parquet(url).count() == 650


def test_read_during_an_inflight_write_sees_the_last_completed(spark: Any,
                                                               tmp_path: Any) -> None:
    url = str(tmp_path / "t")
    first = ms.write(frame(spark, 600), url, **KW)
    with paused_at("before_complete") as (reached, release), ThreadPoolExecutor(1) as pool:
        pending = pool.submit(ms.write, frame(spark, 300, start=5000), url, **KW)
        assert reached.wait(120)
        # Its files are published in place; its instant is not completed.
        assert spark.read.parquet(url).count() == 900
        assert ms.read(spark, url).count() == 600
        assert Table(url).snapshot().instant == first.instant
        release.set()
        second = pending.result()
    assert Table(url).snapshot().instant == second.instant
    assert ms.read(spark, url).count() == 900


def test_as_of_an_older_instant(spark: Any, tmp_path: Any) -> None:
    url = str(tmp_path / "t")
    first = ms.write(frame(spark, 300), url, **KW)
    second = ms.write(frame(spark, 120, start=1000), url, **KW)
    old = ms.read(spark, url, as_of=first.instant)
    assert old.count() == 300 and sorted(old.columns) == ["day", "id", "payload"]
    assert ms.read(spark, url, as_of=second.instant).count() == 420
    assert Table(url).snapshot(first.instant).dataset().count_rows() == 300
    kept = {**KW, "options": {**KW["options"], RETENTION: "7d"}}
    ms.write(frame(spark, 10, start=2000, day=0), url, mode="overwrite", **kept)
    assert ms.read(spark, url, as_of=first.instant).count() == 300  # kept for 7 days
    ms.write(frame(spark, 10, start=3000, day=0), url, mode="overwrite", **KW)
    with pytest.raises(SnapshotError, match="gone"):  # a retention of 0: deleted
        ms.read(spark, url, as_of=first.instant)
    with pytest.raises(SnapshotError, match="not a completed instant"):
        ms.read(spark, url, as_of="20000101000000000")
