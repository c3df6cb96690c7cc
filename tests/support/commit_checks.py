"""Helpers shared by the commit and Spark tests: tables, data, and what a reader sees."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from markerstore import Table
from markerstore.commit import TaskAttempt, TaskResult, WriteJob, run_task
from markerstore.commit import s3 as s3ops
from markerstore.commit.names import belongs_to
from markerstore.commit.staging import STAGING_DIR
from markerstore.markers import MARKERS_DIR
from markerstore.server import MarkerServer
from markerstore.sql import sql as sql_views

# Small files; and a replace's files deleted once it is published (retention 0): these
# tables check that nothing but the committed files stays (time travel: tests/formats/
# test_time_travel.py, with the default retention).
NO_RETENTION = {"markerstore.table.replaced_files.retention": "0"}
SMALL = {"markerstore.write.target_file_size": 16000, **NO_RETENTION}
TINY = {"markerstore__write__target_file_size": 4000}  # for tests that need many files


def open_table(location: Any, **options: Any) -> Table:
    merged = {**SMALL, **{k.replace("__", "."): v for k, v in options.items()}}
    return Table(location.url, location.storage_options, merged)


def batches(rows: int, *, start: int = 0, per_batch: int = 250, days: int = 3
            ) -> list[pa.RecordBatch]:
    """`rows` rows (id, day, payload) in batches of `per_batch`."""
    result = []
    for first in range(start, start + rows, per_batch):
        ids = list(range(first, min(first + per_batch, start + rows)))
        result.append(pa.record_batch({
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([i % days for i in ids], pa.int64()),
            "payload": pa.array([f"row-{i:08d}" for i in ids]),
        }))
    return result


def day_batches(rows: int, day: int, *, start: int = 0, per_batch: int = 250
                ) -> list[pa.RecordBatch]:
    """Like :func:`batches`, every row in partition day=`day`."""
    return [b.set_column(1, "day", pa.array([day] * b.num_rows, pa.int64()))
            for b in batches(rows, start=start, per_batch=per_batch, days=1)]


def run_job_tasks(job: WriteJob, data: dict[int, list[pa.RecordBatch]], *, attempt: int = 0,
                  stage: int = 1, id_base: int = 0) -> list[TaskResult]:
    """One attempt of each task (partition id -> batches); taskAttemptId = id_base + pid."""
    return [run_task(job.spec, batches_, TaskAttempt(pid, stage, attempt, id_base + pid))
            for pid, batches_ in sorted(data.items())]


def split(rows: int, tasks: int, *, start: int = 0, **kwargs: Any
          ) -> dict[int, list[pa.RecordBatch]]:
    """`rows` rows over `tasks` tasks (partition id -> batches), ids from `start`."""
    per = rows // tasks
    return {p: batches(per, start=start + p * per, **kwargs) for p in range(tasks)}


def live_paths(table: Table) -> list[str]:
    return sorted(r[0] for r in sql_views(table, "SELECT path FROM files").fetchall())


def view_rows(table: Table) -> int:
    value = sql_views(table, "SELECT coalesce(sum(rows), 0) FROM files").fetchall()[0][0]
    return int(value)


def duckdb_rows(table: Table, paths: Sequence[str] | None = None) -> int:
    """Rows DuckDB counts reading the committed files (the `files` view) themselves."""
    urls = [r[0] for r in sql_views(table, "SELECT url FROM files").fetchall()] if paths is None \
        else [table.storage.url(table.storage.path(p)) for p in paths]
    if not urls:
        return 0
    con = duckdb.connect()
    if not table.storage.is_local:
        con.register_filesystem(table.storage.fs)
    listing = ", ".join("'" + u.replace("'", "''") + "'" for u in urls)
    return int(con.sql(f"SELECT count(*) FROM read_parquet([{listing}])").fetchall()[0][0])


def data_files(table: Table) -> list[str]:
    """Every file under the table outside .markerstore, relative to the table."""
    storage = table.storage
    return sorted(storage.relative(p) for p in storage.find(storage.root)
                  if not storage.relative(p).startswith(".markerstore/"))


def staged_files(table: Table) -> list[str]:
    return table.storage.find(table.storage.path(STAGING_DIR))


def marker_folders(table: Table) -> list[str]:
    return table.storage.ls(table.storage.path(MARKERS_DIR))


def uploads(table: Table, write_uuid: str | None = None, instant: str | None = None
            ) -> list[s3ops.Upload]:
    """In-progress multipart uploads under the table (of one write, if given)."""
    if not table.storage.is_s3:
        return []
    found = list(s3ops.list_uploads(table.storage))
    if write_uuid is not None and instant is not None:
        found = [u for u in found if belongs_to(u.key, write_uuid, instant)]
    return found


def assert_clean(table: Table) -> None:
    """No write in progress left anything: no staged file, no upload, no marker folder."""
    assert staged_files(table) == []
    assert uploads(table) == []
    assert marker_folders(table) == []


def assert_exactly_committed(table: Table, rows: int) -> None:
    """The table holds exactly the committed files: nothing else on storage, the view and
    DuckDB both count `rows`."""
    assert data_files(table) == live_paths(table)
    assert view_rows(table) == rows
    assert duckdb_rows(table) == rows


def commit_all(table: Table, data: dict[int, list[pa.RecordBatch]],
               **job_kwargs: Any) -> Any:
    job = WriteJob(table, **job_kwargs).start()
    return job.commit(run_job_tasks(job, data))


def paths_of(results: Iterable[TaskResult]) -> list[str]:
    return sorted(f.path for r in results for f in r.files)


BATCHED = {"markerstore__write__markers__type": "batched"}


class MarkerServerRunning:
    """The marker server of a table, embedded as a Spark driver embeds it."""

    def __init__(self, table: Table) -> None:
        self.server = MarkerServer(table, "127.0.0.1", 0)
        self.url = ""

    def __enter__(self) -> str:
        self.url = str(self.server.start())
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
