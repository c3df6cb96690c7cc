"""Recovery after the driver dies (SIGKILL) at each step of job commit.

Before the publish plan exists the write is rolled back; from the plan on it is rolled
forward; after the completed instant only cleanup is left. Either way readers (the files
view and DuckDB reading the committed files) see the whole write or none of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from markerstore import Table
from markerstore.audit import build as build_report
from markerstore.commit import read_plan
from markerstore.commit import rollback as commit_rollback
from markerstore.commit import s3 as s3ops
from markerstore.sql import sql as sql_views
from tests.support.commit_checks import (
    assert_clean,
    assert_exactly_committed,
    commit_all,
    data_files,
    duckdb_rows,
    live_paths,
    open_table,
    split,
    uploads,
    view_rows,
)
from tests.support.crash_writer import NEW, OLD, crash_write

# step -> what recovery must do
STEPS = {"before_reconcile": "back", "after_reconcile": "back", "publish": "forward",
         "before_complete": "forward", "after_complete": "completed"}


def published_already(table: Table, stats: Any) -> bool:
    if stats.pending_upload is not None:
        return s3ops.is_completed(table.storage, stats.pending_upload)
    return table.storage.exists(table.storage.path(stats.path))


def expected_rows(outcome: str, mode: str) -> int:
    if outcome == "back":
        return OLD
    return NEW if mode == "replace" else OLD + NEW


@pytest.mark.parametrize("step", list(STEPS))
def test_next_write_recovers_a_crashed_commit(location: Any, step: str) -> None:
    if location.kind == "memory":
        pytest.skip("a memory:// table does not outlive its process")
    table = open_table(location)
    commit_all(table, split(OLD, 2), conflict_mode="append")
    crashed = crash_write(table, step)
    state = table.state(crashed["instant"])
    assert state == ("completed" if STEPS[step] == "completed" else "inflight")
    # Whatever the crash left, readers see the old data or the new, never a mix.
    assert view_rows(table) in (OLD, NEW) and duckdb_rows(table) == view_rows(table)
    if step == "publish":
        published = [published_already(table, f) for f in read_plan(
            table.storage, crashed["instant"]).files]  # type: ignore[union-attr]
        assert any(published) and not all(published)

    # The next write recovers it first (eager policy: the writer's process is gone).
    follow = commit_all(open_table(location), split(30, 1, start=90_000),
                        conflict_mode="append")
    outcome = STEPS[step]
    final_state = table.state(crashed["instant"])
    assert final_state == ("rolledback" if outcome == "back" else "completed")
    assert follow.rows_written == 30
    assert_exactly_committed(table, expected_rows(outcome, "replace") + 30)
    assert read_plan(table.storage, crashed["instant"]) is None
    assert_clean(table)
    if outcome != "back":  # a roll forward says so in the commit, and the report shows it
        recovered = table.commit_metadata(crashed["instant"]).get("recovered")
        assert recovered == ("roll_forward" if outcome == "forward" else None)
        built = build_report(table)
        report = built.to_dict()
        marked = [(e["instant"], e["kind"]) for e in report["commits"]["events"]]
        forward = report["recovery"]["recent_roll_forwards"]
        assert ((crashed["instant"], "rolled forward") in marked) == (outcome == "forward")
        assert forward == ([crashed["instant"]] if outcome == "forward" else [])
        if outcome == "forward" and location.kind == "local":
            page = built.to_html()
            assert "Recently rolled forward" in page and crashed["instant"] in page


@pytest.mark.parametrize("step", ["after_reconcile", "publish", "after_complete"])
def test_markerstore_rollback_recovers_a_crashed_commit(location: Any, step: str) -> None:
    """`markerstore rollback` rolls a failed write back or forward; after a writer that
    died once its replace was completed, it finishes that writer's cleanup: the replaced
    files stay for the retention (the command's default, 7 days), and `markerstore
    expire --retention 0` deletes them."""
    if (location.kind, step) not in (("local", "after_reconcile"), ("s3", "publish"),
                                     ("local", "after_complete")):
        pytest.skip("one storage per step (the next-write test covers every pair)")
    table = open_table(location)
    commit_all(table, split(OLD, 2), conflict_mode="append")
    completed = step == "after_complete"
    crashed = crash_write(table, step, partition_by=None if completed else ["day"],
                          mode="replace" if completed else "append")
    if completed:
        assert read_plan(table.storage, crashed["instant"]) is not None
        assert len(data_files(table)) > len(live_paths(table))  # replaced files still there
    cli = [sys.executable, "-m", "markerstore.cli", "rollback", table.path, "--force",
           "--json"]
    for key, value in table.storage.storage_options.items():
        cli += ["--storage-option", f"{key}={json.dumps(value)}"]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    outcome = STEPS[step]
    if completed:
        assert rows == []  # nothing to roll back: the commit stands, its cleanup is done
        assert read_plan(table.storage, crashed["instant"]) is None
        assert len(data_files(table)) > len(live_paths(table))  # kept for time travel
        expire = [*cli[:3], "expire", table.path, "--retention", "0", *cli[7:]]
        done = subprocess.run(expire, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    else:
        assert [r["instant"] for r in rows] == [crashed["instant"]]
        assert (rows[0]["rolled_forward"], rows[0]["noop"]) == (outcome == "forward", False)
    assert_exactly_committed(table, expected_rows(outcome, "replace" if completed
                                                  else "append"))
    assert_clean(table)


def test_rollback_reads_the_pending_uploads_from_the_markers_only_on_s3(
        location: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rolling back reads the markers once off S3 (the core's rollback); on S3 once more,
    for the pending uploads to abort."""
    if location.kind == "memory":
        pytest.skip("a memory:// table does not outlive its process")
    table = open_table(location)
    commit_all(table, split(OLD, 2), conflict_mode="append")
    crashed = crash_write(table, "after_reconcile")
    calls: list[bool] = []
    marker_rows = table.marker_rows

    def counted(instant: str, **kwargs: Any) -> Any:
        calls.append(bool(kwargs.get("pending_only")))
        return marker_rows(instant, **kwargs)

    monkeypatch.setattr(table, "marker_rows", counted)
    result = commit_rollback(table, crashed["instant"], force=True)
    assert not result.rolled_forward and not result.noop
    assert calls == ([True] if location.kind == "s3" else [])
    assert_exactly_committed(table, OLD)
    assert_clean(table)
    if location.kind == "s3":
        assert uploads(table) == []


def test_roll_forward_can_be_switched_off(location: Any) -> None:
    if location.kind == "memory":
        pytest.skip("a memory:// table does not outlive its process")
    table = open_table(location)
    commit_all(table, split(OLD, 2), conflict_mode="append")
    crashed = crash_write(table, "before_complete")
    off = open_table(location, markerstore__write__recovery__roll_forward=False)
    commit_rollback(off, crashed["instant"])
    assert off.state(crashed["instant"]) == "rolledback"
    assert_exactly_committed(table, OLD)
    assert_clean(table)


@pytest.mark.s3
def test_roll_forward_impossible_falls_back_to_rollback(moto_s3: Any) -> None:
    """An upload of the plan was aborted behind the writer's back (a bucket lifecycle rule,
    say): the write cannot be completed, so it is rolled back whole."""
    bucket = moto_s3.create_bucket("no-forward")
    table = Table(f"s3://{bucket}/t", moto_s3.storage_options(),
                  {"markerstore.write.target_file_size": 16000})
    commit_all(table, split(OLD, 2), conflict_mode="append")
    crashed = crash_write(table, "publish")
    plan = read_plan(table.storage, crashed["instant"])
    assert plan is not None and plan.phase == "publish"
    pending = [f.pending_upload for f in plan.files if f.pending_upload is not None]
    victim = next(p for p in pending if not s3ops.is_completed(table.storage, p))
    assert s3ops.abort(table.storage, victim.bucket, victim.key, victim.upload_id)
    result = commit_rollback(table, crashed["instant"])
    assert not getattr(result, "rolled_forward", False)
    assert table.state(crashed["instant"]) == "rolledback"
    assert_exactly_committed(table, OLD)
    assert uploads(table) == []
    assert data_files(table) == sorted(r[0] for r in sql_views(table, "SELECT path FROM files")
                                       .fetchall())
