"""errortable plugged into the commit protocol's writer hooks (no Spark needed)."""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa

import errortable
from errortable import ErrorCommit, metrics, writer_hooks
from markerstore import Table
from markerstore.commit.driver import WriteJob
from markerstore.commit.runner import run_task
from markerstore.commit.stats import TaskAttempt
from markerstore.timeline import COMPLETED, ROLLEDBACK
from tests.support.errortable_writes import CHECKS, SCHEMA, batch
from tests.support.readback import assert_records


def _source(n_good: int, bad: dict[str, int]) -> pa.RecordBatch:
    return batch(n_good, bad).to_batches()[0]


def _job(table: Table) -> tuple[WriteJob, ErrorCommit]:
    job = WriteJob(table, conflict_mode="append").start()
    ec = ErrorCommit.open(table, job.instant)
    validator, sink = writer_hooks(ec, SCHEMA, key="id", checks=CHECKS)
    job.validator, job.error_sink = pickle.loads(pickle.dumps((validator, sink)))
    job.metadata.update(ec.link_metadata())
    return job, ec


def test_a_write_job_commits_its_error_rows_with_it(tmp_path: Any) -> None:
    table = Table(str(tmp_path / "events"))
    job, ec = _job(table)
    first = run_task(job.spec, [_source(3, {"cast": 2, "check": 1})], TaskAttempt(0, 1, 0, 10))
    loser = run_task(job.spec, [_source(2, {"key": 1})], TaskAttempt(1, 1, 0, 11))
    winner = run_task(job.spec, [_source(2, {"key": 1})], TaskAttempt(1, 1, 1, 12))
    assert first.summary.error_records == {"cast": 2, "check": 1}
    assert errortable.read(ec.url).fetchall() == []  # nothing before the main commit
    result = job.commit([first, winner])  # checks rows in = written + error rows
    assert_records(table, 9, rows=5, errors={"cast": 2, "check": 1, "key": 1})  # read back
    assert result.error_records == {"cast": 2, "check": 1, "key": 1}
    assert errortable.read(table.path).aggregate("count(*)").fetchall() == [(4,)]  # lazily
    metrics.reset()
    done = ec.complete(result.error_files)
    assert metrics.snapshot()["totals"][table.storage.url()] == {"cast": 2, "check": 1, "key": 1}
    from markerstore import metrics as server_metrics

    text = server_metrics.REGISTRY.render()
    assert "markerstore_failed_records_total{" in text and 'reason="cast"' in text
    assert ec.table.state(ec.instant) == COMPLETED
    loser_file = loser.summary.error_files[0]["path"]
    assert loser_file not in [f["path"] for f in done["files"]]
    assert not ec.table.storage.exists(ec.table.storage.path(loser_file))
    rows = errortable.read(ec.url).aggregate("task_attempt, count(*)").fetchall()
    assert sorted(rows) == [("0-1-10", 3), ("1-1-12", 1)]


def test_a_failed_write_job_leaves_no_error_rows(tmp_path: Any) -> None:
    table = Table(str(tmp_path / "events"))
    job, ec = _job(table)
    run_task(job.spec, [_source(1, {"cast": 2})], TaskAttempt(0, 1, 0, 1))
    job.abort()
    ec.abort()
    assert ec.table.state(ec.instant) == ROLLEDBACK
    assert errortable.read(ec.url).fetchall() == []
