"""Error rows are committed with the main commit: all or none, never twice."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import errortable
from errortable import ErrorTables, metrics, table_sql
from errortable.writing import recovery
from errortable.writing.recovery import recover
from markerstore import Table
from markerstore.commit import rollback as commit_rollback
from markerstore.errors import ErrorTableError
from markerstore.markers import DirectWriteMarkers, IOType, WriteMarkers
from markerstore.timeline import COMPLETED, INFLIGHT, ROLLEDBACK
from tests.support.errortable_writes import batch, full_write, run_task, start
from tests.support.readback import assert_records


def count(path: str | Table, storage_options: dict[str, Any] | None = None,
          where: str = "true") -> int:
    rel = errortable.read(path, storage_options)
    return int(rel.filter(where).aggregate("count(*)").fetchall()[0][0])


def test_local_error_table_end_to_end(location: Any) -> None:
    target = Table(location.url, location.storage_options)
    write = full_write(target, [batch(3, {"cast": 2, "check": 1}), batch(2, {"key": 1})])
    assert_records(target, 9, rows=5, errors={"cast": 2, "check": 1, "key": 1})
    assert write.rows_in == write.rows_written + write.error_rows == 9
    meta = target.commit_metadata(write.instant)
    assert meta["error_records"] == {"cast": 2, "check": 1, "key": 1}
    assert meta["error_instant"] == write.commit.instant
    assert meta["error_table"] == target.storage.url() + "_errors"
    error_table = Table(meta["error_table"], location.storage_options)
    assert error_table.state(write.commit.instant) == COMPLETED
    assert count(meta["error_table"], location.storage_options) == 4
    rows = errortable.read(meta["error_table"], location.storage_options).filter(
        "reason = 'key'").fetchall()
    assert len(rows) == 1
    # the target's own SQL has the errors view, with only its rows
    assert table_sql(target, "SELECT count(*) FROM errors").fetchall() == [(4,)]
    assert table_sql(target, "SELECT DISTINCT commit_time FROM errors").fetchall() == [
        (write.instant,)]


def test_global_table_holds_many_targets_and_context_says_which(tmp_path: Any) -> None:
    options = {"hoodie.write.error.table.base.path": str(tmp_path / "errors"),
               "hoodie.write.error.table.name": "all"}
    orders = Table(str(tmp_path / "lake" / "orders"))
    users = Table(str(tmp_path / "lake" / "users"))
    full_write(orders, [batch(2, {"cast": 3})], options)
    full_write(users, [batch(2, {"check": 2})], options)
    full_write(orders, [batch(1, {"key": 1})], options)
    path = str(tmp_path / "errors" / "all")
    assert count(path) == 6
    by_table = dict(errortable.read(path).aggregate("table_name, count(*)").fetchall())
    assert by_table == {"orders": 4, "users": 2}
    assert count(orders.path) == 4 and count(users.path) == 2
    assert table_sql(orders, "SELECT count(*) FROM errors").fetchall() == [(4,)]
    assert not Table(orders.path + "_errors").timeline()


def test_retried_task_attempt_leaves_no_duplicate_error_rows(location: Any) -> None:
    target = Table(location.url, location.storage_options)
    write = start(target)
    source = batch(2, {"cast": 2})
    loser, loser_data = run_task(write, "task0", source, attempt=0)
    winner, winner_data = run_task(write, "task0", source, attempt=1)
    assert loser is not None and winner is not None and loser.path != winner.path
    result = write.commit.reconcile([winner])
    assert result.invalid_files == [loser.path]
    target.commit(write.instant, [winner_data], metadata=write.commit.commit_metadata())
    write.commit.complete()
    assert count(target.path, location.storage_options) == 2
    files = write.commit.table.storage.find(write.commit.table.storage.path("day="
                                            + write.commit.task_spec().day))
    assert [f.rsplit("/", 1)[1] for f in files] == [winner.path.rsplit("/", 1)[1]]


def test_failed_main_commit_shows_no_error_rows(tmp_table: Table) -> None:
    write = start(tmp_table)
    stats, _ = run_task(write, "t", batch(1, {"cast": 2}))
    write.commit.prepare([stats])
    assert count(tmp_table.path + "_errors") == 0  # nothing visible before the main commit
    assert write.commit.instant in write.commit.table._beating  # J's heartbeat runs
    # the write's rollback rolls the error instant back (errortable passed in explicitly)
    commit_rollback(write.target, write.instant, force=True, roll_forward=False,
                    error_tables=ErrorTables())
    error_table = write.commit.table
    assert not error_table._beating  # and its heartbeat stopped with it
    assert error_table.state(write.commit.instant) == ROLLEDBACK
    assert not error_table.storage.find(error_table.storage.path("day=" +
                                                                 write.commit.task_spec().day))
    assert count(tmp_table.path + "_errors") == 0
    assert isinstance(write.commit.abort(), recovery.RollbackResult)  # idempotent


def test_rollback_of_a_dead_writers_instant_rolls_back_its_errors(tmp_table: Table) -> None:
    write = start(tmp_table)
    stats, _ = run_task(write, "t", batch(1, {"check": 1}))
    recovery = recover(write.commit.table)
    assert recovery.waiting == [write.commit.instant]  # the main instant is still running
    rolled = commit_rollback(tmp_table, write.instant, force=True, error_tables=ErrorTables())
    assert rolled.hooks["rollback_error_instant"]["error_instants"] == [write.commit.instant]
    assert write.commit.table.state(write.commit.instant) == ROLLEDBACK
    assert stats is not None


def test_cli_rollback_in_a_fresh_interpreter_recovers_the_error_table_too(
        tmp_table: Table) -> None:
    """`markerstore rollback` composes the error table in itself: nothing has to be
    imported first for the linked error instant to follow its main instant."""
    write = start(tmp_table)
    stats, _ = run_task(write, "t", batch(1, {"check": 1}))
    assert stats is not None
    error_table = write.commit.table
    done = subprocess.run([sys.executable, "-m", "markerstore.cli", "rollback", tmp_table.path,
                           write.instant, "--force", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)[0]
    assert (answer["rolled_forward"], answer["noop"]) == (False, False)  # rolled back
    assert Table(tmp_table.path).state(write.instant) == ROLLEDBACK
    assert Table(error_table.path).state(write.commit.instant) == ROLLEDBACK
    assert count(error_table.path) == 0


def test_crash_between_main_commit_and_roll_forward(location: Any) -> None:
    target = Table(location.url, location.storage_options)
    write = full_write(target, [batch(2, {"cast": 1, "check": 1})], complete=False)
    error_table = write.commit.table
    assert error_table.state(write.commit.instant) == INFLIGHT
    # readers already see the rows: the main commit completed and names them
    assert count(error_table.path, location.storage_options) == 2
    result = recover(error_table.path, location.storage_options)
    assert result.rolled_forward == [write.commit.instant]
    assert error_table.state(write.commit.instant) == COMPLETED
    assert count(error_table.path, location.storage_options) == 2
    write.commit.complete()  # the writer coming back later is harmless
    assert recover(error_table.path, location.storage_options).rolled_forward == []


def test_reader_repair_writes_the_roll_forward(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 1})], complete=False)
    rel = errortable.read(write.commit.url, repair=True)
    assert len(rel.fetchall()) == 1
    assert write.commit.table.state(write.commit.instant) == COMPLETED


def test_a_read_never_writes(tmp_table: Table) -> None:
    """Readers count J as committed once I names it, but only recovery (or an explicit
    repair) writes J's commit: reading a table, its view or its target leaves J inflight."""
    write = full_write(tmp_table, [batch(1, {"cast": 1})], complete=False)
    before = write.commit.table.storage.ls(write.commit.table.storage.path(
        ".markerstore/timeline"))
    assert len(errortable.read(write.commit.url).fetchall()) == 1
    assert len(errortable.read(tmp_table).fetchall()) == 1
    assert table_sql(tmp_table, "SELECT count(*) FROM errors").fetchall() == [(1,)]
    assert write.commit.table.state(write.commit.instant) == INFLIGHT
    assert write.commit.table.storage.ls(write.commit.table.storage.path(
        ".markerstore/timeline")) == before


def test_abort_after_a_commit_whose_answer_was_lost_rolls_forward(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 1})], complete=False)
    write.commit.abort()
    assert write.commit.table.state(write.commit.instant) == COMPLETED
    assert count(write.commit.url) == 1


def test_error_instant_of_a_commit_that_did_not_name_it_is_rolled_back(
        tmp_table: Table) -> None:
    write = start(tmp_table)
    stats, data = run_task(write, "t", batch(1, {"cast": 1}))
    write.commit.reconcile([stats])
    tmp_table.commit(write.instant, [data])  # the writer forgot the error metadata
    assert count(write.commit.url) == 0
    assert recover(write.commit.url).rolled_back == [write.commit.instant]


def test_parquet_format_end_to_end(tmp_table: Table) -> None:
    options = {"markerstore.write.error.table.format": "parquet"}
    write = full_write(tmp_table, [batch(2, {"cast": 2}), batch(1, {"partition": 1})], options)
    assert all(s is not None and s.path.endswith(".parquet") for s in write.stats)
    rel = errortable.read(write.commit.url)
    assert sorted(r[0] for r in rel.aggregate("reason").fetchall()) == ["cast", "partition"]
    assert count(write.commit.url, where="day IS NOT NULL") == 3


class RecordingMarkers(DirectWriteMarkers):
    """Direct markers that check the data file does not exist yet when its marker is made."""

    created: list[str] = []

    def create(self, partition: str, file_name: str, io_type: IOType | str = IOType.CREATE,
               **details: Any) -> bool:
        path = self.storage.path(partition, file_name)
        assert not self.storage.exists(path), "the file exists before its marker"
        self.created.append(f"{partition}/{file_name}")
        return super().create(partition, file_name, io_type, **details)


def test_any_write_markers_object_is_used_and_the_marker_comes_first(tmp_table: Table) -> None:
    write = start(tmp_table)
    spec = write.commit.task_spec()
    markers: WriteMarkers = RecordingMarkers(write.commit.table.storage, spec.instant,
                                             initialize=False)
    with spec.writer("t-0", markers=markers) as writer:
        writer.write([spec.builder().from_exception(ValueError("bad"), record={"a": 1})])
    assert writer.stats is not None and RecordingMarkers.created == [writer.stats.path]
    with pytest.raises(ValueError, match="instant"):
        spec.writer("t-1", markers=DirectWriteMarkers(tmp_table.storage, write.instant,
                                                      initialize=False))
    empty = spec.writer("t-2")
    assert empty.close() is None  # no errors: no file, no marker
    with pytest.raises(ErrorTableError, match="closed"):
        empty.write([{}])
    with pytest.raises(ErrorTableError, match="twice"):
        write.commit.reconcile([writer.stats, writer.stats])


def test_failed_record_metric_per_commit_by_reason(tmp_table: Table,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    metrics.reset()
    with caplog.at_level("INFO", logger="errortable"):
        write = full_write(tmp_table, [batch(1, {"cast": 2, "check": 1})])
    assert f"commit {write.instant}" in caplog.text and "cast=2, check=1" in caplog.text
    snap = metrics.snapshot()
    assert snap["totals"][tmp_table.storage.url()] == {"cast": 2, "check": 1}
    lines = metrics.prometheus_lines()
    assert any('reason="cast"} 2' in line for line in lines)
    assert any(line.startswith("markerstore_error_records_last_commit{") and
               line.endswith(" 3") for line in lines)


def test_the_error_tables_pii_policy_applies_to_every_stored_row(tmp_table: Table) -> None:
    options = {"markerstore.write.error.table.payload.redact": "id"}
    write = full_write(tmp_table, [batch(1, {"cast": 1, "check": 1})], options)
    rows = errortable.read(write.commit.url).fetchall()
    import json

    for row in rows:
        record = json.loads(row[3])
        assert record["id"] == "[REDACTED]" and record["amount"]
        assert row[5]["payload"] == "redacted"
        assert row[5].get("recordKey") in (None, "[REDACTED]")
