"""The task side: marker first, names, partitions, rolling, staging, task abort."""

from __future__ import annotations

import json
import os
import zlib
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.s3 import S3Proxy
from markerstore import Table
from markerstore.commit import FileName, TaskAttempt, TaskWriter, WriteJob, run_task
from markerstore.commit.names import HIVE_DEFAULT_PARTITION, partition_path
from markerstore.commit.staging import MultipartStaging, staging_for
from markerstore.commit.task import split_by_partition
from markerstore.markers import DirectWriteMarkers, IOType
from tests.support.commit_checks import TINY, batches, data_files, open_table, uploads
from tests.support.readback import data_rows


def test_file_names_round_trip() -> None:
    name = FileName("0b1c-22", 3, 7, 2, 41, "20240102030405006")
    assert name.name == "0b1c-22-3_7-2-41_20240102030405006.parquet"
    assert FileName.parse(name.name) == name
    for bad in ("x.parquet", "a_b_c.parquet", "u-1_1-2_20240102030405006.parquet",
                "u-x_1-2-3_20240102030405006.parquet", "u-1_1-2-3_2024.parquet"):
        assert FileName.parse(bad) is None


def test_partition_paths_escape_like_spark() -> None:
    assert partition_path(["a", "b"], [1, "x/y"]) == "a=1/b=x%2Fy"
    assert partition_path(["a"], [None]) == f"a={HIVE_DEFAULT_PARTITION}"
    assert partition_path(["a"], [True]) == "a=true"
    assert partition_path([], []) == ""


def test_timestamp_partition_values_are_formatted_like_spark() -> None:
    import datetime as dt

    utc = dt.timezone.utc
    plus2 = dt.timezone(dt.timedelta(hours=2))
    assert partition_path(["t"], [dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc)]) == \
        "t=2024-01-02 03%3A04%3A05"
    assert partition_path(["t"], [dt.datetime(2024, 1, 2, 3, 4, 5, 250000, tzinfo=plus2)]) == \
        "t=2024-01-02 03%3A04%3A05.25"  # wall clock of the session time zone, no offset
    assert partition_path(["t"], [dt.datetime(2024, 1, 2, 3, 4, 5, 7)]) == \
        "t=2024-01-02 03%3A04%3A05.000007"
    assert partition_path(["d"], [dt.date(2024, 1, 2)]) == "d=2024-01-02"


def test_split_by_partition_groups_rows() -> None:
    batch = pa.record_batch({"k": [2, 1, 2, None, 1], "j": ["a", "a", "b", "a", "a"],
                             "v": [0, 1, 2, 3, 4]})
    groups = {values: rows.column("v").to_pylist()
              for values, rows in split_by_partition(batch, ["k", "j"])}
    assert groups == {(1, "a"): [1, 4], (2, "a"): [0], (2, "b"): [2], (None, "a"): [3]}
    single = list(split_by_partition(pa.record_batch({"k": [5, 5]}), ["k"]))
    assert [(v, r.num_rows) for v, r in single] == [((5,), 2)]


def test_marker_is_durable_before_the_file_exists(location: Any) -> None:
    table = open_table(location, **TINY)
    job = WriteJob(table, partition_by=["day"]).start()
    markers = DirectWriteMarkers(table.storage, job.instant, initialize=False)
    staging = staging_for(table.storage, job.instant, job.write_uuid, table.settings)
    seen: list[tuple[str, bool, bool]] = []
    inner_target = staging.target

    def target(task_attempt_id: int, relative: str) -> str:
        # Called when the task is about to create the file: its marker must be there.
        partition, _, name = relative.rpartition("/")
        where = inner_target(task_attempt_id, relative)
        exists = (os.path.exists(where) if staging.writes_os_paths
                  else table.storage.fs.exists(where))
        seen.append((relative, markers.has(partition, name, IOType.CREATE), exists))
        return where

    staging.target = target  # type: ignore[method-assign]
    writer = TaskWriter(markers, staging, TaskAttempt(0, 1, 0, 5), partition_by=["day"])
    for batch in batches(3000):
        writer.write(batch)
    result = writer.commit()
    assert len(result.files) > 3
    assert seen and all(marker and not exists for _, marker, exists in seen)
    assert sorted(p for p, _, _ in seen) == sorted(f.path for f in result.files)
    job.commit([result])


def test_a_batch_opening_files_in_several_partitions_marks_them_in_one_call(
        tmp_path: Any) -> None:
    table = Table(str(tmp_path / "t"))
    job = WriteJob(table, partition_by=["day"]).start()
    calls: list[list[str]] = []

    class Spy(DirectWriteMarkers):
        def create(self, partition: str, file_name: str, io_type: Any = IOType.CREATE,
                   **details: Any) -> bool:
            calls.append([partition])
            return super().create(partition, file_name, io_type, **details)

        def create_many(self, markers: Any) -> list[bool]:
            items = list(markers)
            calls.append(["many"] + [m["partition"] for m in items])
            return DirectWriteMarkers.create_many(self, items)

    markers = Spy(table.storage, job.instant, initialize=False)
    staging = staging_for(table.storage, job.instant, job.write_uuid, table.settings)
    writer = TaskWriter(markers, staging, TaskAttempt(0, 1, 0, 5), partition_by=["day"])
    for batch in batches(1000, days=4):
        writer.write(batch)
    result = writer.commit()
    # the first batch opens four files: one call; create_many's own creates follow it
    assert calls[0] == ["many", "day=0", "day=1", "day=2", "day=3"]
    assert sorted(c[0] for c in calls[1:5]) == ["day=0", "day=1", "day=2", "day=3"]
    assert len(calls) == 5  # no file rolled: no other marker
    assert sorted(f.path.split("/")[0] for f in result.files) == [
        "day=0", "day=1", "day=2", "day=3"]
    assert sorted(m.split("/")[0] for m in markers.all()) == [
        "day=0", "day=1", "day=2", "day=3"]
    job.commit([result])


def test_task_rolls_files_and_reports_stats(location: Any) -> None:
    table = open_table(location, **TINY)
    job = WriteJob(table, partition_by=["day"]).start()
    result = run_task(job.spec, batches(6000, days=2), TaskAttempt(4, 2, 0, 77))
    assert sum(f.rows for f in result.files) == 6000
    assert result.summary.rows_in == 6000
    assert {f.partition for f in result.files} == {"day=0", "day=1"}
    assert len(result.files) > 2  # rolled at the 4000-byte target size
    for stats in result.files:
        parsed = FileName.parse(stats.path.rpartition("/")[2])
        assert parsed is not None
        assert (parsed.write_uuid, parsed.partition_id, parsed.stage_id, parsed.attempt_id,
                parsed.instant) == (job.write_uuid, 4, 2, 77, job.instant)
    commit = job.commit([result])
    for stats in result.files:
        data = table.storage.get(table.storage.path(stats.path))
        assert len(data) == stats.bytes
        assert stats.checksum == f"crc32:{zlib.crc32(data):08x}"
        parquet = pq.read_table(pa.BufferReader(data))
        assert parquet.column_names == ["id", "payload"]  # partition columns are folders
        assert parquet.num_rows == stats.rows
    assert commit.rows_written == 6000


def test_a_row_group_of_wide_rows_holds_enough_rows(tmp_path: Any) -> None:
    """Rows past row_group_bytes / 64 bytes each (wide schemas) are buffered until the row
    group holds 64 rows: Parquet writes and describes every column of every row group, so
    row groups of a handful of rows of 100,000 columns cost more than their values (and a
    footer entry per column each). Narrow rows are cut at row_group_bytes, as before."""
    from markerstore.commit.task import ROW_GROUP_MIN_ROWS

    table = Table(str(tmp_path / "t"), None, {"markerstore.write.parquet.row_group_bytes":
                                              64 * 1024})
    wide = [pa.record_batch({f"c{i}": pa.array(range(r, r + 5), pa.int64())
                             for i in range(1000)}) for r in range(0, 300, 5)]  # 8 KB a row
    narrow = [pa.record_batch({"c0": pa.array(range(r, r + 5000), pa.int64())})
              for r in range(0, 50_000, 5000)]  # 40 KB a batch

    def row_groups(rows: list[pa.RecordBatch]) -> list[int]:
        job = WriteJob(table, conflict_mode="append").start()
        result = run_task(job.spec, rows, TaskAttempt(0, 1, 0, 1))
        job.commit([result])
        (stats,) = result.files
        meta = pq.ParquetFile(table.storage.path(stats.path)).metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]

    sizes = row_groups(wide)
    assert sum(sizes) == 300 and all(n >= ROW_GROUP_MIN_ROWS for n in sizes[:-1]), sizes
    assert row_groups(narrow)[0] == 10_000  # 64 KiB reached at the second batch


def test_a_failed_fsync_fails_the_task(tmp_path: Any, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """On local disk a file is fsynced (in a thread, while its checksum is read back): an
    fsync that fails fails the task attempt, and nothing reports the file as durable."""
    table = open_table(SimpleNamespace(url=str(tmp_path / "t"), storage_options=None),
                       **TINY)
    job = WriteJob(table, partition_by=["day"]).start()

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="Input/output error"):
        run_task(job.spec, batches(100, days=1), TaskAttempt(0, 0, 0, 1))


def test_nothing_is_visible_before_job_commit(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    result = run_task(job.spec, batches(2000), TaskAttempt(0, 1, 0, 1))
    assert result.files
    assert data_files(table) == []  # staged: multipart uploads (S3), .markerstore (else)
    if table.storage.is_s3:
        pending = uploads(table, job.write_uuid, job.instant)
        assert sorted(u.key for u in pending) == sorted(
            f.pending_upload.key for f in result.files if f.pending_upload)
        markers = DirectWriteMarkers(table.storage, job.instant, initialize=False)
        details = markers.to_arrow(with_details=True).column("pending_upload").to_pylist()
        assert sorted(json.loads(d)["upload_id"] for d in details) == sorted(
            u.upload_id for u in pending)
    job.commit([result])
    assert data_files(table) == sorted(f.path for f in result.files)


def test_task_commit_twice_returns_the_same_result(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    spec = job.spec
    storage = table.storage
    staging = staging_for(storage, job.instant, job.write_uuid, table.settings)
    markers = DirectWriteMarkers(storage, job.instant, initialize=False)
    writer = TaskWriter(markers, staging, TaskAttempt(0, 1, 0, 3))
    for batch in batches(1000):
        writer.write(batch)
    first = writer.commit()
    assert writer.commit() is first
    assert len(uploads(table)) == (len(first.files) if storage.is_s3 else 0)
    assert spec.instant == job.instant
    job.commit([first])
    assert uploads(table) == []


def test_task_abort_removes_its_output_and_is_idempotent(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    staging = staging_for(table.storage, job.instant, job.write_uuid, table.settings)
    markers = DirectWriteMarkers(table.storage, job.instant, initialize=False)
    writer = TaskWriter(markers, staging, TaskAttempt(0, 1, 0, 9))
    for batch in batches(2000):
        writer.write(batch)
    writer.commit()  # files staged (and uploaded on S3)
    writer.abort()
    writer.abort()
    assert uploads(table) == []
    assert table.storage.find(table.storage.path(".markerstore/staging")) == []
    if isinstance(staging, MultipartStaging):
        assert not os.path.exists(staging._task_dir(9).path)
    job.abort()
    job.abort()
    assert data_files(table) == []


def test_abort_with_no_work(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    staging = staging_for(table.storage, job.instant, job.write_uuid, table.settings)
    writer = TaskWriter(DirectWriteMarkers(table.storage, job.instant, initialize=False),
                        staging, TaskAttempt(0))
    writer.abort()
    assert job.abort().noop is False
    assert job.abort().noop is True


@pytest.mark.s3
def test_failed_upload_aborts_the_task_uploads_and_local_files(
        moto_s3: Any, s3_proxy: S3Proxy, tmp_path: Any) -> None:
    bucket = moto_s3.create_bucket("upload-fail")
    options = moto_s3.storage_options(endpoint_url=s3_proxy.endpoint,
                                      config_kwargs={"retries": {"max_attempts": 1}})
    from markerstore import Table

    table = Table(f"s3://{bucket}/t", options, {
        "markerstore.write.target_file_size": 4000, "markerstore.storage.retries": 0,
        "markerstore.write.staging.dir": str(tmp_path / "staging")})
    job = WriteJob(table).start()
    # The third part upload fails with a 500 (two files are uploaded by then).
    fault = s3_proxy.inject("500", lambda method, path: method == "PUT"
                            and "partNumber=" in path, count=50, skip=2)
    with pytest.raises(Exception, match="InternalError|500|failed"):
        run_task(job.spec, batches(3000), TaskAttempt(0, 1, 0, 11))
    assert fault.fired >= 1 and fault.skip == 0  # two files were uploaded before it
    s3_proxy.clear()
    assert uploads(table) == []
    assert list((tmp_path / "staging").rglob("*.parquet")) == []
    job.abort()
    assert data_files(table) == []


class ListSink:
    """An error sink that keeps error rows in memory (errortable plugs in here)."""

    def __init__(self) -> None:
        self.rows: list[pa.Table] = []
        self.aborted = False

    def write(self, errors: pa.Table) -> None:
        self.rows.append(errors)

    def commit(self) -> list[dict[str, Any]]:
        return [{"rows": sum(t.num_rows for t in self.rows)}]

    def abort(self) -> None:
        self.aborted = True


def test_validator_and_error_sink_count_error_records(tmp_path: Any) -> None:
    import pyarrow.compute as pc

    from markerstore import Table

    def validator(batch: pa.RecordBatch, attempt: TaskAttempt) -> Any:
        bad = pc.less(batch.column("id"), 7)
        rejected = batch.filter(bad)
        reasons = ["cast" if i % 2 else "check" for i in rejected.column("id").to_pylist()]
        errors = pa.Table.from_batches([rejected]).append_column("reason", pa.array(reasons))
        return batch.filter(pc.invert(bad)), errors

    sinks: list[ListSink] = []

    def sink(attempt: TaskAttempt, markers: Any) -> ListSink:
        sinks.append(ListSink())
        return sinks[-1]

    table = Table(str(tmp_path / "t"))
    job = WriteJob(table, conflict_mode="append", validator=validator, error_sink=sink).start()
    result = run_task(job.spec, batches(100), TaskAttempt(0, 1, 0, 1))
    assert result.summary.error_records == {"check": 4, "cast": 3}
    assert result.summary.error_files == [{"rows": 7}]
    commit = job.commit([result])
    assert commit.rows_written == 93 and commit.error_records == {"check": 4, "cast": 3}
    # what the table and the sink hold: 100 rows in, 93 in the committed files, 7 stored
    assert data_rows(table).num_rows == 93 and sum(t.num_rows for t in sinks[0].rows) == 7
    assert table.commit_metadata(job.instant)["error_records"] == {"check": 4, "cast": 3}
    assert table.commit_metadata(job.instant)["rows_in"] == 100
    # The sink's own descriptions are kept as they are, and every reader can read the
    # commit (a fresh Table reads the commit file as another process would).
    fresh = Table(table.path).commit_metadata(job.instant)
    assert fresh["error_sink_files"] == [{"rows": 7}] and "error_files" not in fresh


def test_error_reasons_from_a_column_or_an_error_record_context() -> None:
    from markerstore.commit.task import _reasons

    plain = pa.table({"reason": ["cast", None]})
    records = pa.table({"context": pa.array([[("reason", "check")], [("stage", "x")]],
                                            pa.map_(pa.string(), pa.string()))})
    assert _reasons(plain).to_pylist() == ["cast", "unknown"]
    assert _reasons(records).to_pylist() == ["check", "unknown"]
    assert _reasons(pa.table({"x": [1]})).to_pylist() == ["unknown"]


def test_tasks_get_an_absolute_table_url(tmp_path: Any, monkeypatch: Any) -> None:
    """Executors may run in another working directory (local-cluster, YARN)."""
    from markerstore import Table

    monkeypatch.chdir(tmp_path)
    job = WriteJob(Table("relative/table"), conflict_mode="append").start()
    assert job.spec.table_url == str(tmp_path / "relative" / "table")
    job.abort()
