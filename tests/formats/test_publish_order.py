"""Every completed instant reaches every format, whatever order writes complete in.

Instants are the writes' start times, so an append that started first may complete after
a replace that started later. The Delta protocol keeps each instant's app transaction
(``txn``) for good; Iceberg keeps what its retained snapshots name, and markerstore expires
the snapshots before a replace to release the files it replaced. Expiring past an instant
still in flight would count it as published when it was never committed: these tests
complete an older instant after a replace of another partition, and after an error
table's expire, and read every table back with delta-rs (pyarrow and DataFusion) and
pyiceberg."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

import errortable
from errortable import ErrorTables
from markerstore import Table
from markerstore.commit import WriteJob
from markerstore.commit.driver import ErrorTableSpec
from markerstore.commit.verify import verify
from markerstore.formats import delta_state
from tests.formats.readback import every_reader, iceberg, rows
from tests.support.commit_checks import batches, day_batches, open_table, run_job_tasks

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

BOTH = "delta,iceberg"


def _expected(*parts: list[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    return rows(pa.Table.from_batches([b for part in parts for b in part]))


def _instants_named(url: str) -> set[str]:
    return {s.summary.get("markerstore.instant") for s in iceberg(url).snapshots()}


def test_an_older_append_completing_after_a_replace_reaches_every_format(
        local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats=BOTH)
    first = batches(300, days=3)
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    job.commit(run_job_tasks(job, {0: first}))
    # The append starts first (the older instant) and writes its files...
    late = day_batches(40, 2, start=10_000)
    append = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    appended = run_job_tasks(append, {0: late})
    # ...while a replace of another partition starts after it and completes first.
    fresh = day_batches(25, 0, start=20_000)
    replace = WriteJob(table, partition_by=["day"], conflict_mode="replace").start()
    replace.commit(run_job_tasks(replace, {0: fresh}))
    assert append.instant < replace.instant
    result = append.commit(appended)

    kept = [b.filter(pa.compute.not_equal(b.column("day"), 0)) for b in first]
    expected = _expected(kept, fresh, late)
    for reader, data in every_reader(table.storage.url()).items():
        assert rows(data) == expected, reader
    assert append.instant in _instants_named(table.storage.url())
    assert [f.pending for f in result.formats] == [[], []]
    assert verify(table, grace="0").findings == []


def test_an_error_table_expire_during_a_write_leaves_its_error_rows_published(
        local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats=BOTH,
                       markerstore__write__error__table__enabled="true")
    schema = pa.schema([("id", pa.int64()), ("day", pa.int64()), ("payload", pa.string())])
    spec = ErrorTableSpec(schema, "id", {"not_tenth": "id % 10 <> 0"})

    def start() -> WriteJob:
        return WriteJob(table, partition_by=["day"], conflict_mode="append",
                        error_table=spec, error_tables=ErrorTables()).start()

    old = start()
    old.commit(run_job_tasks(old, {0: batches(200)}))
    errors_url = table.storage.url() + "_errors"
    errors = Table(errors_url, table.storage.storage_options)
    # A write is in flight, its error rows written, when the expire runs.
    inflight = start()
    written = run_job_tasks(inflight, {0: batches(200, start=5000)})
    assert inflight.error_commit is not None
    expired = errortable.expire(errors, "1d", now=datetime.now(timezone.utc) + timedelta(2))
    assert len(expired.expired) == 1 and expired.expire_instant is not None
    assert inflight.error_commit.instant < expired.expire_instant
    inflight.commit(written)

    ids = list(range(5000, 5200, 10))  # every tenth id of the second write, none of the first
    for reader, data in every_reader(errors_url).items():
        keys = sorted(json.loads(r)["id"] for r in data.column("record").to_pylist())
        assert keys == ids, reader
    assert inflight.error_commit.instant in _instants_named(errors_url)
    assert verify(errors, grace="0", absent=_expired).findings == []


def _expired(meta: Any) -> list[str]:
    return [p for info in (meta.get("expired") or {}).values() for p in info.get("files", [])]


def test_an_instant_started_later_with_an_older_id_is_never_taken_for_published(
        local_where: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer whose clock is behind starts an instant older than what the formats have
    settled (and older than the point Iceberg's snapshots were expired up to): Delta
    looks it up by its app transaction and publishes it; Iceberg cannot tell it from the
    expired ones, so it says so (the write's result, verify) instead of counting it held."""
    table = open_table(local_where, markerstore__table__formats=BOTH)
    for mode, data in (("append", batches(90, days=3)), ("replace", day_batches(9, 0))):
        job = WriteJob(table, partition_by=["day"], conflict_mode=mode).start()
        job.commit(run_job_tasks(job, {0: data}))
    behind = "20200101000000000"
    monkeypatch.setattr("markerstore.timeline.timeline.next_instant_candidate",
                        lambda: behind)
    late = day_batches(7, 1, start=70_000)
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    assert job.instant == behind
    result = job.commit(run_job_tasks(job, {0: late}))

    findings = verify(table, grace="0").findings
    assert [(f.kind, f.path) for f in findings] == [("format_error", "iceberg")]
    outcomes = {f.name: f for f in result.formats}
    assert outcomes["delta"].pending == [] and outcomes["delta"].reason is None
    delta_ids = every_reader(table.storage.url(), iceberg_on=False)
    for reader, data in delta_ids.items():
        assert set(range(70_000, 70_007)) <= set(data.column("id").to_pylist()), reader
    assert outcomes["iceberg"].reason is not None and "clock" in outcomes["iceberg"].reason
    assert "iceberg pending (" in result.published


def _delta_table_with(where: Any, properties: dict[str, str]) -> Table:
    """A table publishing Delta, ids 0 to 29 appended (days 0 to 2), then the Delta
    table's `properties` set by delta-rs (as another tool would set them)."""
    from deltalake import DeltaTable

    table = open_table(where, markerstore__table__formats="delta")
    first = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    first.commit(run_job_tasks(first, {0: batches(30, days=3)}))
    DeltaTable(table.storage.url()).alter.set_table_properties(properties,
                                                               raise_if_not_exists=False)
    return table


def test_a_delta_table_that_expires_app_transactions_is_never_published_twice(
        local_where: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Delta's ``delta.setTransactionRetentionDuration`` (set here by delta-rs, as another
    tool would) makes a checkpoint drop the app transactions older than it, and readers
    ignore them: the evidence of which instants Delta holds. A writer whose clock is
    behind then makes every instant a candidate: one whose transaction expired cannot be
    told from one never published, so the publish says so (the write's result, verify)
    instead of publishing it a second time (which would bring back the files a later
    replace removed), and delta-rs reads what the timeline holds."""
    table = _delta_table_with(local_where, {
        "delta.setTransactionRetentionDuration": "interval 3 seconds",
        "delta.checkpointInterval": "1"})
    url = table.storage.url()
    # an instant 1 s younger than the retention (not 1 h) still tells by its transaction
    monkeypatch.setattr("markerstore.formats.delta.TXN_MARGIN_S", 1.0)
    time.sleep(3.5)  # the first instant's transaction expires at the next checkpoint
    second = WriteJob(table, partition_by=["day"], conflict_mode="replace").start()
    assert second.commit(run_job_tasks(second, {0: day_batches(5, 0, start=1000)})
                         ).formats[0].reason is None  # replaces the first's day 0
    delta_state.forget(table.storage)  # as a new process reads the log

    monkeypatch.setattr("markerstore.timeline.timeline.next_instant_candidate",
                        lambda: "20200101000000000")
    late = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    result = late.commit(run_job_tasks(late, {0: batches(7, start=70_000, days=3)}))

    # the first instant published again would bring its replaced day 0 back
    kept = {i for i in range(30) if i % 3} | set(range(1000, 1005))
    for reader, data in every_reader(url, iceberg_on=False).items():
        assert sorted(data.column("id").to_pylist()) == sorted(kept), reader
    (outcome,) = result.formats
    assert outcome.reason is not None and "expires app transactions" in outcome.reason
    assert "delta pending (" in result.published
    assert [f.kind for f in verify(table, grace="0").findings] == ["format_error"]


def test_a_checkpoint_cleans_up_the_log_as_delta_writers_do(local_where: Any) -> None:
    """After a checkpoint, the log files before it older than the table's
    ``delta.logRetentionDuration`` are deleted (Delta's own writers do the same), so the
    log a reader lists does not grow with the history; a table younger than the retention
    (Delta's 30 days here) has none to delete, and its log is not looked through for
    them. delta-rs reads every row either way."""
    from deltalake import DeltaTable

    table = _delta_table_with(local_where, {"delta.checkpointInterval": "2"})
    url = table.storage.url()

    def write(n: int) -> list[int]:
        job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
        result = job.commit(run_job_tasks(job, {0: batches(10, start=n * 100, days=3)}))
        assert result.formats[0].reason is None
        names = table.storage.ls(table.storage.path("_delta_log"))
        return sorted(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())

    assert [write(n) for n in (1, 2)][-1] == [0, 1, 2, 3]  # checkpointed at 2, all kept
    DeltaTable(url).alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 0 seconds"}, raise_if_not_exists=False)
    assert [write(n) for n in (3, 4)][-1] == [6]  # the checkpoint of 6, nothing before
    expected = set(range(30)) | {n * 100 + i for n in range(1, 5) for i in range(10)}
    for reader, data in every_reader(url, iceberg_on=False).items():
        assert sorted(data.column("id").to_pylist()) == sorted(expected), reader
