"""A zombie writer: a task that outlives its instant's rollback (or commit) and still adds a
marker and writes its file.

Before, the marker was accepted, and the next write's cleanup of the instant's leftover
markers deleted the marker folder without the file it named: an orphan until ``verify
--repair``. Now:

* on local disk and memory a direct marker of an instant whose marker folder is gone is
  refused (CommitConflictError), so the task fails before its file exists; that costs no
  request (the folder is where the marker goes);
* on S3 (no folders: refusing would cost a request per marker) and wherever a marker got in
  anyway, cleaning a terminal instant's leftover markers deletes the files they name that
  no commit references first, as the rollback did; whoever cleans (the next write,
  ``verify --repair``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from harness.s3 import MotoS3
from markerstore import CommitConflictError, Table
from markerstore.commit import WriteJob, recover
from markerstore.commit import rollback as commit_rollback
from markerstore.commit.verify import verify
from markerstore.markers import (
    BATCHED,
    DIRECT,
    DirectWriteMarkers,
    ensure_marker_type,
    read_marker_type,
)
from markerstore.markers.base import MarkerName, marker_folder
from markerstore.markers.segments import marker_row, rows_to_table, write_segment
from tests.support.commit_checks import data_files, run_job_tasks, split
from tests.support.files import exists, marked_write, write_file
from tests.support.locations import Location


def zombie_markers(table: Table, instant: str) -> DirectWriteMarkers:
    """The instant's markers as an executor holds them (its own storage, no check)."""
    other = Table(table.path, table.storage.storage_options)
    return DirectWriteMarkers(other.storage, instant, initialize=False)


@pytest.fixture(params=["local", "memory"])
def foldered(request: pytest.FixtureRequest, tmp_path: Any) -> Location:
    """Storages with folders (where refusing costs nothing)."""
    if request.param == "local":
        return Location("local", str(tmp_path / "table"))
    return Location("memory", f"memory://zombie-{tmp_path.name}/table")


def test_a_rolled_back_instants_direct_marker_is_refused(foldered: Location) -> None:
    table = Table(foldered.url)
    instant = table.start_commit(heartbeat=False)
    table.markers(instant)  # the driver opens the instant's marker folder
    zombie = zombie_markers(table, instant)
    assert zombie.create("p", "early.parquet")  # while the instant is live
    commit_rollback(table, instant, force=True)

    with pytest.raises(CommitConflictError, match=f"instant {instant} has no marker folder"):
        zombie.create("p", "late.parquet")
    with pytest.raises(CommitConflictError, match="no marker folder"):
        zombie.create_many([("q", "late.parquet"), ("q", "later.parquet")])
    with pytest.raises(CommitConflictError, match="no marker folder"):
        zombie.update("p", "early.parquet", size=5)
    assert not table.storage.exists(marker_folder(table.storage, instant))
    assert table.state(instant) == "rolledback"


def test_a_task_that_outlives_its_job_writes_nothing(foldered: Location) -> None:
    table = Table(foldered.url, options={"markerstore.write.staging.mode": "none"})
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    job.abort()  # the driver gave up; a task of the job runs on
    with pytest.raises(CommitConflictError, match="no marker folder"):
        run_job_tasks(job, split(40, 1))
    assert data_files(table) == []
    assert not table.storage.exists(marker_folder(table.storage, job.instant))


def zombie_got_in(table: Table, instant: str) -> str:
    """A marker and its file that a zombie added after `instant` became terminal: on S3
    (accepted there), elsewhere as a zombie whose marker raced the rollback's delete."""
    if not table.storage.is_s3:
        ensure_marker_type(table.storage, instant, DIRECT)
    assert zombie_markers(table, instant).create("p", f"zombie_0-1-9_{instant}.parquet")
    return write_file(table, f"p/zombie_0-1-9_{instant}.parquet")


def cleaned_by_next_write(table: Table) -> None:
    recover(table)  # what the next write (WriteJob.start) runs first


def cleaned_by_verify(table: Table) -> None:
    verify(table, repair=True)  # the default grace period: a young file is kept as orphan


@pytest.mark.parametrize("state", ["rolledback", "completed"])
@pytest.mark.parametrize("cleaner", [cleaned_by_next_write, cleaned_by_verify])
def test_cleaning_leftover_markers_deletes_what_they_name(foldered: Location, state: str,
                                                         cleaner: Any) -> None:
    check_cleaning(foldered, state, cleaner)


@pytest.mark.s3
def test_on_s3_the_zombies_marker_is_accepted_and_the_next_write_deletes_its_file(
        moto_s3: MotoS3) -> None:
    bucket = moto_s3.create_bucket(f"zombie-{uuid.uuid4().hex[:12]}")
    check_cleaning(Location("s3", f"s3://{bucket}/table", moto_s3.storage_options()),
                   "rolledback", cleaned_by_next_write)


def check_cleaning(location: Location, state: str, cleaner: Any) -> None:
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/own.parquet"])
    if state == "completed":
        table.commit(instant, ["p/own.parquet"])
    else:
        commit_rollback(table, instant, force=True)
    record = table._timeline.rollback_info(instant) if state == "rolledback" else None
    zombie = zombie_got_in(table, instant)

    cleaner(table)
    assert not exists(table, zombie)
    assert not table.storage.exists(marker_folder(table.storage, instant))
    assert exists(table, "p/own.parquet") == (state == "completed")
    assert table.state(instant) == state
    if record is not None:  # the rollback's record is the rollback's, not the cleanup's
        assert table._timeline.rollback_info(instant) == record


@pytest.mark.parametrize("state", ["rolledback", "completed"])
def test_a_segment_that_raced_the_end_of_its_instant_is_cleaned(foldered: Location,
                                                               state: str) -> None:
    """A marker server appends a segment while its instant commits or rolls back: the
    folder then holds segments and no MARKERS.type. Cleaning reads them as batched and
    deletes the files they name (before, it read them as direct markers and refused)."""
    table = Table(foldered.url)
    instant = table.start_commit(heartbeat=False)
    if state == "completed":
        table.commit(instant, [])
    else:
        commit_rollback(table, instant, force=True)
    late = write_file(table, f"p/late_0-1-9_{instant}.parquet")
    write_segment(table.storage, instant, rows_to_table([marker_row(
        MarkerName.build("p", f"late_0-1-9_{instant}.parquet", "CREATE"), {}, 0)]),
        "parquet", lambda: 3)
    assert read_marker_type(table.storage, instant, untyped=DIRECT) == BATCHED

    table.clean_markers()
    assert not exists(table, late)
    assert not table.storage.exists(marker_folder(table.storage, instant))
    assert table.state(instant) == state
