"""Reconcile, commit and rollback on local disk, memory:// and S3 (moto over HTTP)."""

from __future__ import annotations

import re
import sys
import threading

import pytest

from markerstore import Table
from markerstore.errors import (
    CommitConflictError,
    HeartbeatAliveError,
    InstantCompletedError,
    ReconcileError,
)
from markerstore.markers import DirectWriteMarkers
from markerstore.sql import sql as sql_views
from tests.support.files import exists, marked_write, write_file
from tests.support.locations import Location


def open_table(location: Location, **options: object) -> Table:
    return Table(location.url, location.storage_options, options or None)


def test_reconcile_deletes_exactly_the_losers(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    winners = ["day=1/w1.parquet", "day=2/w2.parquet"]
    losers = ["day=1/l1.parquet", "day=2/l2.parquet", "l3.parquet"]
    marked_write(table, instant, winners + losers)
    unrelated = write_file(table, "day=1/someone-elses.parquet")
    result = table.reconcile(instant, winners)
    assert sorted(result.invalid_files) == sorted(losers)
    assert result.markers == 5
    assert all(exists(table, p) for p in winners)
    assert not any(exists(table, p) for p in losers)
    assert exists(table, unrelated)  # no marker: never touched


def test_reconcile_keeps_append_files_and_missing_losers_are_fine(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["log.avro"], io_type="APPEND")
    table.markers(instant).create("", "never-written.parquet")  # marker, then the task died
    result = table.reconcile(instant, [])
    assert result.invalid_files == ["never-written.parquet"]
    assert exists(table, "log.avro")


def test_reconcile_never_deletes_a_file_a_completed_commit_references(location: Location
                                                                       ) -> None:
    table = open_table(location)
    first = table.start_commit(heartbeat=False)
    marked_write(table, first, ["p/shared.parquet"])
    table.commit(first, ["p/shared.parquet"])
    second = table.start_commit(heartbeat=False)
    # A buggy writer marks a file name that the first commit owns.
    table.markers(second).create("p", "shared.parquet")
    result = table.reconcile(second, [])
    assert result.invalid_files == []
    assert exists(table, "p/shared.parquet")
    table.rollback(second, force=True)
    assert exists(table, "p/shared.parquet")
    assert sql_views(table, "SELECT path FROM files").fetchall() == [("p/shared.parquet",)]


def test_reported_file_without_marker_fails_reconcile(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["a.parquet"])
    write_file(table, "sneaky.parquet")
    with pytest.raises(ReconcileError, match="no marker"):
        table.commit(instant, ["a.parquet", "sneaky.parquet"])
    assert table.state(instant) == "inflight"
    assert exists(table, "a.parquet")


def test_commit_writes_metadata_and_cleans_up(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit()
    marked_write(table, instant, ["day=1/a.parquet", "day=1/b.parquet", "day=2/c.parquet"])
    meta = table.commit(instant, [
        {"path": "day=1/a.parquet", "rows": 10},
        {"path": "day=2/c.parquet", "rows": 5, "size": 15},
    ], metadata={"source": "unit-test"})
    assert table.state(instant) == "completed"
    assert meta["counts"]["files"] == 2
    assert meta["counts"]["rows"] == 15
    assert meta["counts"]["files_cleaned"] == 1
    assert meta["counts"]["bytes"] == len(b"day=1/a.parquet") + 15
    assert meta["write_uuid"] and meta["jobId"] == meta["write_uuid"]
    assert meta["filenames"] == ["day=1/a.parquet", "day=2/c.parquet"]
    assert meta["partitions"] == ["day=1", "day=2"]
    assert meta["source"] == "unit-test"
    assert not exists(table, "day=1/b.parquet")
    assert not DirectWriteMarkers(table.storage, instant, initialize=False).exists()
    assert table.heartbeats.read(instant) is None
    rows = sql_views(table, "SELECT path, rows FROM files ORDER BY path").fetchall()
    assert rows == [("day=1/a.parquet", 10), ("day=2/c.parquet", 5)]


def test_commit_rejects_reserved_metadata_and_outside_paths() -> None:
    table = Table("memory://reserved/t")
    instant = table.start_commit(heartbeat=False)
    with pytest.raises(ValueError, match="written by markerstore"):
        table.commit(instant, [], metadata={"files": []})
    with pytest.raises(ValueError, match="not under the table"):
        table.commit(instant, ["memory://elsewhere/x.parquet"])
    with pytest.raises(ValueError, match="not inside the table"):
        table.commit(instant, ["../x.parquet"])


@pytest.mark.parametrize("metadata, named", [
    ({"error_table": 5}, "error_table must be a string"),
    ({"error_records": {"parse": "many"}}, "error_records.parse"),
    ({"replaced_files": ["/etc/passwd"]}, "replaced_files[0]"),
    ({"recovered": ["roll_forward"]}, "recovered must be a string"),
])
def test_commit_refuses_metadata_its_readers_would_call_corrupt(
        metadata: dict[str, object], named: str) -> None:
    """What the timeline's readers check is checked before the commit is written: a
    value of the wrong type is one ValueError, and the instant stays inflight with its
    file, never a completed commit that every later read calls corrupt."""
    table = Table("memory://checked/t")
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["day=1/a.parquet"])
    with pytest.raises(ValueError, match=re.escape(named)):
        table.commit(instant, ["day=1/a.parquet"], metadata=metadata)
    assert table.state(instant) == "inflight" and exists(table, "day=1/a.parquet")
    assert table.commit(instant, ["day=1/a.parquet"])["counts"]["files"] == 1


def test_rollback_twice_from_markers_alone(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    files = ["p=1/a.parquet", "p=2/b.parquet"]
    marked_write(table, instant, files)
    # A fresh Table object knows nothing but what is on storage.
    other = open_table(location)
    first = other.rollback(instant, force=True)
    assert sorted(first.deleted_files) == files
    assert not first.noop
    assert not any(exists(table, p) for p in files)
    assert other.state(instant) == "rolledback"
    assert not DirectWriteMarkers(table.storage, instant, initialize=False).exists()
    second = other.rollback(instant)
    assert second.noop and second.deleted_files == []
    with pytest.raises(CommitConflictError, match="rolledback"):
        table.commit(instant, [])


def test_rollback_record_counts_every_file_and_names_a_bounded_few(
        location: Location, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollback holds its files as Arrow; its record names at most RECORD_FILES of them
    (a million markers must not put a million names into the timeline), counts exact."""
    monkeypatch.setattr(sys.modules["markerstore.markers.reconcile"], "RECORD_FILES", 2)
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    files = [f"p={i}/f{i}.parquet" for i in range(5)]
    marked_write(table, instant, files)
    result = open_table(location).rollback(instant, force=True)
    assert result.deleted.to_pylist() == sorted(files) == result.deleted_files
    assert not any(exists(table, p) for p in files)
    record = table._timeline.rollback_info(instant)
    assert record is not None
    assert record["deleted_count"] == 5 and record["kept_count"] == 0
    assert record["deleted_files"] == sorted(files)[:2]


def test_rollback_refuses_completed_and_live_instants(location: Location) -> None:
    table = open_table(location)
    done = table.start_commit(heartbeat=False)
    table.commit(done, [])
    with pytest.raises(InstantCompletedError, match="never rolled back"):
        table.rollback(done)
    live = table.start_commit()  # heartbeat thread running in this process
    other = open_table(location)
    with pytest.raises(HeartbeatAliveError, match="alive"):
        other.rollback(live)
    assert other.failed_instants("lazy") == []
    assert other.failed_instants("eager") == []
    table.abort(live)
    assert table.state(live) == "rolledback"


def test_interrupted_rollback_is_finished_by_the_next(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["a.parquet", "b.parquet"])
    table._timeline.claim_rollback(instant)  # a rollback that died right after fencing
    assert table.state(instant) == "inflight"
    with pytest.raises(CommitConflictError, match="rolled back"):
        table.commit(instant, ["a.parquet"])
    result = table.rollback(instant, force=True)
    assert sorted(result.deleted_files) == ["a.parquet", "b.parquet"]
    assert table.state(instant) == "rolledback"


@pytest.mark.parametrize("rounds", [5])
def test_two_threads_completing_one_instant_exactly_one_wins(location: Location,
                                                             rounds: int) -> None:
    for _ in range(rounds):
        table = open_table(location)
        instant = table.start_commit(heartbeat=False)
        marked_write(table, instant, ["x.parquet"])
        outcomes: list[str] = []
        barrier = threading.Barrier(2)

        def complete(name: str, table: Table = table, instant: str = instant,
                     barrier: threading.Barrier = barrier,
                     outcomes: list[str] = outcomes) -> None:
            barrier.wait()
            try:
                table._timeline.complete(instant, {"writer": name})
                outcomes.append("won")
            except CommitConflictError:
                outcomes.append("lost")

        threads = [threading.Thread(target=complete, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["lost", "won"]
        assert table.state(instant) == "completed"


def test_commit_against_rollback_race_has_one_outcome(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["x.parquet"])
    outcomes: dict[str, str] = {}
    barrier = threading.Barrier(2)

    def commit() -> None:
        barrier.wait()
        try:
            open_table(location).commit(instant, ["x.parquet"])
            outcomes["commit"] = "ok"
        except CommitConflictError:
            outcomes["commit"] = "conflict"

    def rollback() -> None:
        barrier.wait()
        try:
            open_table(location).rollback(instant, force=True)
            outcomes["rollback"] = "ok"
        except InstantCompletedError:
            outcomes["rollback"] = "refused"

    threads = [threading.Thread(target=commit), threading.Thread(target=rollback)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = table.state(instant)
    if outcomes["commit"] == "ok":
        assert outcomes["rollback"] == "refused" and state == "completed"
        assert exists(table, "x.parquet")
    else:
        assert outcomes["rollback"] == "ok" and state == "rolledback"
        assert not exists(table, "x.parquet")
