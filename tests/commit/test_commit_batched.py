"""The protocol with batched markers (the marker server embedded in the driver)."""

from __future__ import annotations

from typing import Any

import pytest

from markerstore.commit import WriteJob
from tests.support.commit_checks import (
    BATCHED,
    MarkerServerRunning,
    assert_clean,
    assert_exactly_committed,
    data_files,
    open_table,
    paths_of,
    run_job_tasks,
    split,
    uploads,
)


def test_only_winning_attempts_are_committed(location: Any) -> None:
    table = open_table(location, **BATCHED)
    with MarkerServerRunning(table) as url:
        job = WriteJob(table, partition_by=["day"], conflict_mode="append",
                       marker_url=url).start()
        data = split(1500, 3)
        losers = run_job_tasks(job, data, attempt=0, id_base=100)
        winners = run_job_tasks(job, data, attempt=1, id_base=200)
        if table.storage.is_s3:
            assert len(uploads(table, job.write_uuid, job.instant)) == len(
                paths_of(losers)) + len(paths_of(winners))
        result = job.commit(winners)
    assert result.files_cleaned == len(paths_of(losers))
    assert_exactly_committed(table, 1500)
    assert_clean(table)


def test_abort_rolls_back_from_batched_markers(location: Any) -> None:
    table = open_table(location, **BATCHED)
    with MarkerServerRunning(table) as url:
        job = WriteJob(table, conflict_mode="append", marker_url=url).start()
        run_job_tasks(job, split(1000, 2))
        assert not job.abort().noop
        assert job.abort().noop
    assert data_files(table) == []
    assert_clean(table)


@pytest.mark.parametrize("step", ["after_reconcile", "publish"])
def test_driver_crash_with_batched_markers(location: Any, step: str) -> None:
    """The marker server dies with the driver; what it acknowledged is on storage, so the
    next write rolls the crashed one back (or forward) from the segments."""
    from tests.support.commit_checks import commit_all
    from tests.support.crash_writer import NEW, OLD, crash_write

    if location.kind == "memory":
        pytest.skip("a memory:// table does not outlive its process")
    table = open_table(location, **BATCHED)
    commit_all(open_table(location), split(OLD, 2), conflict_mode="append")
    crashed = crash_write(table, step, mode="append")
    commit_all(open_table(location), split(30, 1, start=90_000), conflict_mode="append")
    forward = step == "publish"
    assert table.state(crashed["instant"]) == ("completed" if forward else "rolledback")
    assert_exactly_committed(table, OLD + 30 + (NEW if forward else 0))
    assert_clean(table)
