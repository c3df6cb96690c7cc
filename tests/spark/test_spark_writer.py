"""markerstore.spark.write with a real SparkSession (local[2,4]), on local disk and S3."""

from __future__ import annotations

import os
from typing import Any

import pytest

import markerstore.spark as ms
from markerstore import Table
from markerstore.commit import FileStats, TaskAttempt
from markerstore.errors import ConfigError, WriteAbortedError, WriteConflictError
from markerstore.sql import sql as sql_views
from tests.support.commit_checks import (
    NO_RETENTION,
    assert_clean,
    assert_exactly_committed,
    data_files,
    duckdb_rows,
    open_table,
    uploads,
)
from tests.support.entry_points import ENTRIES, write_with

pytestmark = pytest.mark.spark
ROWS = 6000
SMALL = {"markerstore.write.target_file_size": 8000, **NO_RETENTION}


def frame(spark: Any, rows: int = ROWS, start: int = 0, days: int = 3, parts: int = 4) -> Any:
    return spark.range(start, start + rows, numPartitions=parts).selectExpr(
        "id", f"id % {days} AS day", "concat('row-', cast(id AS string)) AS payload")


def fail_first_attempt(how: str) -> Any:
    """A task hook: the first attempt of Spark partition 1 fails after its files are
    written and (on S3) uploaded: by raising (the task aborts itself), or by killing its
    Python worker (nothing is cleaned up; job commit must)."""

    def hook(step: str, attempt: TaskAttempt, files: list[FileStats]) -> None:
        if step == "committed" and attempt.partition_id == 1 and attempt.attempt_number == 0:
            assert files
            if how == "raise":
                raise RuntimeError("injected task failure after writing its files")
            os._exit(3)

    return hook


@pytest.fixture(params=ENTRIES)
def entry(request: pytest.FixtureRequest) -> str:
    """markerstore.spark.write, or df.write.format("markerstore")."""
    return str(request.param)


def test_write_commits_every_row(spark: Any, where: Any, entry: str) -> None:
    df = frame(spark)
    result = write_with(entry, spark, df, where.url, partition_by="day", options=SMALL,
                        storage_options=where.storage_options)
    table = open_table(where)
    assert result.rows_written == ROWS and result.error_records == {}
    assert result.partitions == ["day=0", "day=1", "day=2"]
    assert result.num_files >= 6
    if entry == "function":  # the format writer's result is read back from the timeline
        assert result.requests["total"] > 0
        assert result.timings["job"] > 0 and result.duration >= result.timings["commit"]
    assert "rows_written=6000" in repr(result) and "<table>" in result._repr_html_()
    assert table.state(result.instant) == "completed"
    assert_exactly_committed(table, ROWS)
    assert_clean(table)
    if where.kind == "local":
        back = spark.read.parquet(where.url)
        assert back.count() == ROWS
        assert sorted(r.day for r in back.select("day").distinct().collect()) == [0, 1, 2]


@pytest.mark.parametrize("how", ["raise", "crash"])
def test_a_task_failing_after_writing_files_leaves_only_winners(spark: Any, where: Any,
                                                                how: str, entry: str) -> None:
    result = write_with(entry, spark, frame(spark), where.url, options=SMALL,
                        storage_options=where.storage_options,
                        task_hook=fail_first_attempt(how))
    table = open_table(where)
    assert result.rows_written == ROWS
    if how == "crash":  # the dead attempt's files and uploads were left for job commit
        assert result.files_cleaned > 0
    assert sorted(f.path for f in result.files) == data_files(table)
    assert_exactly_committed(table, ROWS)
    assert uploads(table) == []
    assert_clean(table)


def test_batched_markers_from_executors_to_the_driver(spark: Any, where: Any,
                                                     entry: str) -> None:
    """markers.type=batched: the driver embeds the marker server at spark.driver.host (the
    data source: its job host does) and the executors' tasks create their markers
    through it."""
    options = {**SMALL, "markerstore.write.markers.type": "batched"}
    result = write_with(entry, spark, frame(spark), where.url, options=options,
                        storage_options=where.storage_options,
                        task_hook=fail_first_attempt("crash"))
    table = open_table(where)
    assert result.rows_written == ROWS and result.files_cleaned > 0
    assert_exactly_committed(table, ROWS)
    assert uploads(table) == []
    assert_clean(table)


def test_a_failed_job_is_rolled_back_and_raises(spark: Any, where: Any, entry: str) -> None:
    def always(step: str, attempt: TaskAttempt, files: list[FileStats]) -> None:
        if attempt.partition_id == 2:
            raise RuntimeError("this partition never succeeds")

    if entry == "function":
        with pytest.raises(WriteAbortedError, match="rolled back") as info:
            ms.write(frame(spark), where.url, options=SMALL,
                     storage_options=where.storage_options, _task_hook=always)
        cause = str(info.value.__cause__)
    else:  # Spark fails the job and calls the source's abort, which rolls back
        with pytest.raises(Exception, match="never succeeds") as info:
            write_with(entry, spark, frame(spark), where.url, options=SMALL,
                       storage_options=where.storage_options, task_hook=always)
        cause = str(info.value)
    table = open_table(where)
    assert "never succeeds" in cause
    assert [i.state for i in table.timeline()] == ["rolledback"]
    assert data_files(table) == []
    assert_clean(table)


def test_conflict_mode_fail_same_partition_later_one_fails(spark: Any, local_where: Any,
                                                          entry: str) -> None:
    """Conflict handling is storage-neutral; the commit tests run it on S3 too. (The format
    writer: mode error is markerstore.write.conflict.mode=fail, see entry_points.)"""
    where = local_where
    kw = {"partition_by": ["day"], "options": SMALL, "storage_options": where.storage_options}
    write_with(entry, spark, frame(spark, 600, days=2), where.url, mode="error", **kw)
    write_with(entry, spark, frame(spark, 300, start=2, days=1).selectExpr(
        "id", "2 AS day", "payload"), where.url, mode="error", **kw)  # day=2: no conflict
    before = data_files(open_table(where))
    with pytest.raises(WriteConflictError, match="day=1"):
        write_with(entry, spark, frame(spark, 300, start=1, days=1).selectExpr(
            "id", "1 AS day", "payload"), where.url, mode="error", **kw)
    table = open_table(where)
    assert data_files(table) == before
    assert [i.state for i in table.timeline()] == ["completed", "completed", "rolledback"]
    assert_exactly_committed(table, 900)
    assert_clean(table)


def test_two_writers_different_partitions_both_commit(spark: Any, local_where: Any) -> None:
    """Conflict handling is storage-neutral; the commit tests run it on S3 too."""
    where = local_where
    from concurrent.futures import ThreadPoolExecutor

    def run(day: int) -> Any:
        df = frame(spark, 500, start=day * 1000, days=1).selectExpr("id", f"{day} AS day",
                                                                    "payload")
        return ms.write(df, where.url, partition_by="day", mode="error", options=SMALL,
                        storage_options=where.storage_options)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, [0, 1]))
    assert [r.partitions for r in results] == [["day=0"], ["day=1"]]
    table = open_table(where)
    assert_exactly_committed(table, 1000)
    assert_clean(table)


def test_overwrite_replaces_only_partitions_receiving_data(spark: Any, local_where: Any,
                                                           entry: str) -> None:
    """Conflict handling is storage-neutral; the commit tests run it on S3 too."""
    where = local_where
    kw = {"partition_by": ["day"], "options": SMALL, "storage_options": where.storage_options}
    write_with(entry, spark, frame(spark, 900), where.url, **kw)
    result = write_with(entry, spark, frame(spark, 40, days=1).selectExpr(
        "id", "1 AS day", "payload"), where.url, mode="overwrite", **kw)
    assert result.conflict_mode == "replace" and result.replaced_files
    table = open_table(where)
    assert sql_views(table, "SELECT partition, sum(rows) FROM files GROUP BY 1 ORDER BY 1"
                     ).fetchall() == [("day=0", 300), ("day=1", 40), ("day=2", 300)]
    assert_exactly_committed(table, 640)
    assert duckdb_rows(table) == 640


def test_bad_arguments_fail_before_any_work(spark: Any, tmp_path: Any) -> None:
    df = frame(spark, 10)
    with pytest.raises(ConfigError, match="did you mean"):
        ms.write(df, str(tmp_path / "t"), options={"markerstore.write.conflict.mod": "fail"})
    with pytest.raises(ConfigError, match="not in the DataFrame"):
        ms.write(df, str(tmp_path / "t"), partition_by="nope")
    with pytest.raises(ConfigError, match="mode 'ignore'"):
        ms.write(df, str(tmp_path / "t"), mode="ignore")
    with pytest.raises(ConfigError, match="means conflict mode replace"):
        ms.write(df, str(tmp_path / "t"), mode="overwrite",
                 options={"s3.multipart.committer.conflict-mode": "fail"})
    assert not os.path.exists(tmp_path / "t" / ".markerstore" / "timeline")
    assert Table(str(tmp_path / "t")).timeline() == []


def test_partition_folders_are_named_as_spark_names_them(spark: Any, tmp_path: Any) -> None:
    """Timestamps (with and without a fraction), dates, strings that need escaping, nulls
    and booleans: the same folder names as Spark's own writer."""
    df = spark.sql(
        "SELECT id, ts, d, s, b FROM VALUES "
        "(1, TIMESTAMP'2024-01-02 03:04:05', DATE'2024-01-02', 'a/b c', true), "
        "(2, TIMESTAMP'2024-01-02 03:04:05.25', DATE'2024-02-03', NULL, false), "
        "(3, NULL, NULL, 'x=y%', NULL) AS t(id, ts, d, s, b)")
    columns = ["ts", "d", "s", "b"]
    ms.write(df.repartition(1), str(tmp_path / "ours"), partition_by=columns)
    df.repartition(1).write.partitionBy(*columns).parquet(str(tmp_path / "spark"))

    def folders(root: Any) -> set[str]:
        found = set()
        for folder, _, files in os.walk(root):
            relative = os.path.relpath(folder, root)
            if any(f.endswith(".parquet") for f in files) and not relative.startswith("."):
                found.add(relative)
        return found

    assert folders(tmp_path / "ours") == folders(tmp_path / "spark")
    assert len(folders(tmp_path / "spark")) == 3


def test_the_stats_type_built_in_python_is_the_stats_ddl(spark: Any, tmp_path: Any) -> None:
    from pyspark.sql.types import StructType

    from markerstore.commit import STATS_DDL
    from markerstore.spark.writer import Shape, stats_type

    assert stats_type() == StructType.fromDDL(STATS_DDL)
    shape = Shape(spark, frame(spark, 10).schema)  # a schema carrier, for ingest's _frame
    with pytest.raises(TypeError, match="needs a DataFrame"):
        ms.write(shape, str(tmp_path / "t"))
    assert Table(str(tmp_path / "t")).timeline() == []
