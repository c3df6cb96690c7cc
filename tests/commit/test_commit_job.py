"""The job side: winners only, conflict modes, replace visibility, publish failure, scope."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from harness.s3 import S3Proxy
from markerstore import Table
from markerstore.commit import (
    TaskAttempt,
    TaskResult,
    WriteJob,
    add_step_hook,
    remove_step_hook,
    run_task,
)
from markerstore.commit.stats import TaskSummary
from markerstore.errors import CommitConflictError, MarkerStoreError, WriteConflictError
from markerstore.sql import sql as sql_views
from tests.support.commit_checks import (
    assert_clean,
    assert_exactly_committed,
    batches,
    commit_all,
    data_files,
    day_batches,
    duckdb_rows,
    live_paths,
    open_table,
    paths_of,
    run_job_tasks,
    split,
    uploads,
    view_rows,
)


def test_only_winning_attempts_are_committed(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table, partition_by=["day"]).start()
    data = split(3000, 3)
    losers = run_job_tasks(job, data, attempt=0, id_base=100)  # e.g. lost executors
    winners = run_job_tasks(job, data, attempt=1, id_base=200)
    assert not set(paths_of(losers)) & set(paths_of(winners))
    result = job.commit(winners)
    assert result.rows_written == 3000
    assert result.files_cleaned == len(paths_of(losers))
    assert sorted(f.path for f in result.files) == paths_of(winners)
    assert live_paths(table) == paths_of(winners)
    assert_exactly_committed(table, 3000)
    assert_clean(table)


@pytest.mark.parametrize("sealed", [False, True])
def test_a_sealed_instant_is_reconciled_once(tmp_path: Any, sealed: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Job commit reconciles before it publishes. With markers sealed (no marker can be
    added any more) that is the last reconcile; otherwise Table.commit reconciles again
    right before the completed instant, and deletes what a straggler marked meanwhile."""
    table = Table(str(tmp_path / "t"))
    job = WriteJob(table, partition_by=["day"]).start()
    data = split(600, 2)
    losers = run_job_tasks(job, data, attempt=0, id_base=100)
    winners = run_job_tasks(job, data, attempt=1, id_base=200)
    calls: list[str] = []
    reconcile = Table.reconcile

    def counted(self: Table, instant: str, files: Any) -> Any:
        calls.append(instant)
        if len(calls) == 2:  # a straggler between the two reconciles: only the second sees it
            run_job_tasks(job, {0: data[0]}, attempt=2, id_base=300)
        return reconcile(self, instant, files)

    monkeypatch.setattr(Table, "reconcile", counted)
    result = job.commit(winners, sealed=sealed)
    assert calls == [job.instant] * (1 if sealed else 2)
    assert live_paths(table) == paths_of(winners)
    assert sorted(data_files(table)) == paths_of(winners)  # the straggler's file is gone
    assert result.files_cleaned >= len(paths_of(losers))


def test_two_results_for_one_partition_are_refused(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    first = run_task(job.spec, batches(100), TaskAttempt(0, 1, 0, 1))
    second = run_task(job.spec, batches(100), TaskAttempt(0, 1, 1, 2))
    with pytest.raises(ValueError, match="winning attempt"):
        job.commit([first, second])
    job.abort()
    assert data_files(table) == []


def test_rows_in_must_equal_rows_written(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    result = run_task(job.spec, batches(100), TaskAttempt(0, 1, 0, 1))
    bad = TaskResult(result.files, TaskSummary(result.summary.attempt, rows_in=101))
    with pytest.raises(MarkerStoreError, match="101 rows in but 100 written"):
        job.commit([bad])
    assert table.state(job.instant) == "rolledback"
    assert data_files(table) == []
    assert_clean(table)


def test_source_records_must_equal_rows_written_plus_error_rows(tmp_path: Any) -> None:
    """Tasks that read the source themselves report what their parser counted: one
    record lost between the parser and the files rolls the write back; the counts that
    add up are in the commit metadata and the result."""
    table = Table(str(tmp_path / "t"))
    for records, lines in ((101, 120), (100, 120)):
        job = WriteJob(table).start()
        result = run_task(job.spec, batches(100), TaskAttempt(0, 1, 0, 1))
        result.summary.source.update(records=records, lines=lines)
        if records != 100:
            with pytest.raises(MarkerStoreError, match="101 source records but 100 written"):
                job.commit([result])
            assert table.state(job.instant) == "rolledback"
            continue
        commit = job.commit([result])
        assert commit.source == {"records": 100, "lines": 120}
        meta = table.commit_metadata(job.instant)
        assert (meta["source_records"], meta["source_lines"]) == (100, 120)


def test_no_outputs_commits_an_empty_instant(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    empty = run_task(job.spec, [], TaskAttempt(0, 1, 0, 1))
    result = job.commit([empty])
    assert result.files == [] and result.rows_written == 0
    assert table.state(job.instant) == "completed"
    assert_clean(table)


def test_conflict_mode_fail_unpartitioned_fails_before_any_task(location: Any) -> None:
    table = open_table(location)
    commit_all(table, split(1000, 2))
    with pytest.raises(WriteConflictError, match="table directory"):
        WriteJob(table, conflict_mode="fail").start()
    assert [i.state for i in table.timeline()] == ["completed"]
    assert_exactly_committed(table, 1000)


def test_conflict_mode_fail_partitioned_checks_partitions_with_data(location: Any) -> None:
    table = open_table(location)
    commit_all(table, {0: day_batches(300, 0)}, partition_by=["day"])
    commit_all(table, {0: day_batches(300, 1, start=1000)}, partition_by=["day"],
               conflict_mode="fail")  # day=1 holds nothing yet: no conflict
    before = data_files(table)
    job = WriteJob(table, partition_by=["day"], conflict_mode="fail").start()
    results = run_job_tasks(job, {0: day_batches(50, 0, start=5000)})
    with pytest.raises(WriteConflictError, match="day=0"):
        job.commit(results)
    assert table.state(job.instant) == "rolledback"
    assert data_files(table) == before
    assert_exactly_committed(table, 600)
    assert_clean(table)


def test_append_adds_files(location: Any) -> None:
    table = open_table(location)
    commit_all(table, split(1000, 2), conflict_mode="append")
    commit_all(table, split(500, 1), conflict_mode="append")
    assert_exactly_committed(table, 1500)


def test_replace_unpartitioned_replaces_the_directory(location: Any) -> None:
    table = open_table(location)
    commit_all(table, split(1000, 2))
    old = live_paths(table)
    result = commit_all(table, split(200, 1), conflict_mode="replace")
    assert sorted(result.replaced_files) == old
    assert_exactly_committed(table, 200)


def test_replace_partitioned_touches_only_partitions_receiving_data(location: Any) -> None:
    table = open_table(location)
    commit_all(table, split(900, 3, days=3), partition_by=["day"])  # day=0,1,2
    new = {0: day_batches(50, 1)}
    result = commit_all(table, new, partition_by=["day"], conflict_mode="replace")
    assert result.replaced_files and all(p.startswith("day=1/") for p in result.replaced_files)
    assert sql_views(table, "SELECT partition, sum(rows) FROM files GROUP BY 1 ORDER BY 1"
                     ).fetchall() == [("day=0", 300), ("day=1", 50), ("day=2", 300)]
    assert_exactly_committed(table, 650)


def test_replace_is_all_or_nothing_for_readers(location: Any) -> None:
    """Until the completed instant is written, readers see the old data, and the old files
    are still on storage; right after it, they see only the new data."""
    table = open_table(location)
    commit_all(table, split(1000, 2))
    seen: dict[str, tuple[int, int]] = {}

    def look(step: str, info: Mapping[str, Any]) -> None:
        if step in ("before_complete", "after_complete"):
            seen[step] = (view_rows(table), duckdb_rows(table))

    add_step_hook(look)
    try:
        commit_all(table, split(300, 1), conflict_mode="replace")
    finally:
        remove_step_hook(look)
    assert seen == {"before_complete": (1000, 1000), "after_complete": (300, 300)}
    assert_exactly_committed(table, 300)


def test_a_failed_step_rolls_the_write_back_and_a_retry_fails_clearly(location: Any) -> None:
    table = open_table(location)
    job = WriteJob(table).start()
    results = run_job_tasks(job, split(1000, 2))

    def fail(step: str, info: Mapping[str, Any]) -> None:
        if step == "before_complete":
            raise RuntimeError("injected")

    add_step_hook(fail)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            job.commit(results)
    finally:
        remove_step_hook(fail)
    assert table.state(job.instant) == "rolledback"
    assert data_files(table) == [] and view_rows(table) == 0
    assert_clean(table)
    with pytest.raises(CommitConflictError, match="rolledback|rolled back"):
        job.commit(results)
    assert data_files(table) == []


@pytest.mark.s3
def test_failed_completion_deletes_completed_and_aborts_the_rest(
        moto_s3: Any, s3_proxy: S3Proxy) -> None:
    bucket = moto_s3.create_bucket("complete-fail")
    options = moto_s3.storage_options(endpoint_url=s3_proxy.endpoint,
                                      config_kwargs={"retries": {"max_attempts": 1}})
    table = Table(f"s3://{bucket}/t", options, {
        "markerstore.write.target_file_size": 4000, "markerstore.storage.retries": 0,
        "markerstore.write.commit.threads": 2})
    job = WriteJob(table).start()
    results = run_job_tasks(job, split(3000, 3))
    n_files = len(paths_of(results))
    assert n_files >= 4
    fault = s3_proxy.inject("500", lambda method, path: method == "POST" and "uploadId=" in path,
                            count=100, skip=2)
    with pytest.raises(Exception, match="InternalError|500|failed"):
        job.commit(results)
    s3_proxy.clear()
    assert fault.fired >= 1
    assert table.state(job.instant) == "rolledback"
    assert data_files(table) == []  # the two completed objects were deleted
    assert uploads(table) == []  # the rest were aborted
    assert_clean(table)


def test_abort_is_scoped_to_its_own_write(location: Any) -> None:
    """Parallel writes to the same table and to an adjacent path (a name prefix of it):
    aborting one never touches the others' files or uploads."""
    table = open_table(location)
    adjacent = Table(location.url + "2", location.storage_options, table.settings)
    one = WriteJob(table).start()
    two = WriteJob(table).start()
    three = WriteJob(adjacent).start()
    r1 = run_job_tasks(one, split(500, 1))
    r2 = run_job_tasks(two, split(500, 1), id_base=10)
    r3 = run_job_tasks(three, split(500, 1), id_base=20)
    pending_before = len(uploads(table)) + len(uploads(adjacent))
    one.abort()
    one.abort()
    assert len(uploads(table)) + len(uploads(adjacent)) == pending_before - len(r1[0].files) \
        * table.storage.is_s3
    two.commit(r2)
    three.commit(r3)
    assert_exactly_committed(table, 500)
    assert_exactly_committed(adjacent, 500)
    assert_clean(table)
    assert_clean(adjacent)


def test_concurrent_writers_to_different_partitions_both_commit(location: Any) -> None:
    table = open_table(location)
    a = WriteJob(table, partition_by=["day"], conflict_mode="fail").start()
    b = WriteJob(open_table(location), partition_by=["day"], conflict_mode="fail").start()
    day0, day1 = {0: day_batches(100, 0)}, {0: day_batches(100, 1)}
    ra, rb = run_job_tasks(a, day0), run_job_tasks(b, day1, id_base=5)
    a.commit(ra)
    b.commit(rb)
    assert_exactly_committed(table, 200)


def test_concurrent_writers_to_the_same_partition_later_one_fails(location: Any) -> None:
    """Writer A has written its intent and is about to check; writer B commits the same
    partition meanwhile: B sees A's claim and gives way, leaving nothing; A commits."""
    table = open_table(location)
    a = WriteJob(table, partition_by=["day"], conflict_mode="fail").start()
    b = WriteJob(open_table(location), partition_by=["day"], conflict_mode="fail").start()
    ra = run_job_tasks(a, {0: day_batches(100, 0)})
    rb = run_job_tasks(b, {0: day_batches(100, 0, start=500)}, id_base=5)
    paused, resume = threading.Event(), threading.Event()

    def pause_a(step: str, info: Mapping[str, Any]) -> None:
        if step == "after_intent" and threading.current_thread().name == "writer-a":
            paused.set()
            assert resume.wait(60)

    add_step_hook(pause_a)
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("a", a.commit(ra)),
                              name="writer-a")
    try:
        thread.start()
        assert paused.wait(60)
        with pytest.raises(WriteConflictError, match=f"concurrent write \\(instant {a.instant}"):
            b.commit(rb)
        assert table.state(b.instant) == "rolledback"
        resume.set()
        thread.join(60)
    finally:
        resume.set()
        remove_step_hook(pause_a)
    assert outcome["a"].rows_written == 100
    assert_exactly_committed(table, 100)
    assert_clean(table)


def test_write_uuid_given_or_generated(location: Any) -> None:
    table = open_table(location, markerstore__write__uuid="job-42")
    job = WriteJob(table).start()
    assert job.write_uuid == "job-42"
    result = job.commit(run_job_tasks(job, split(100, 1)))
    assert all(f.path.startswith("job-42-") for f in result.files)
    generated = WriteJob(open_table(location), conflict_mode="append").start()
    assert generated.write_uuid != "job-42" and len(generated.write_uuid) == 36
    generated.abort()
    required = open_table(location, markerstore__write__uuid__required=True)
    with pytest.raises(MarkerStoreError, match="no write UUID"):
        WriteJob(required).start()
    with pytest.raises(MarkerStoreError, match="letters, digits"):
        WriteJob(open_table(location, markerstore__write__uuid="a_b")).start()
