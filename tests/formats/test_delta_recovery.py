"""Delta publishing across crashes: a writer killed (SIGKILL) between its completed instant
and the publish, then the next write; a losing task attempt's files; drift as a verify
finding, repaired by publishing; nothing a Delta version references is deleted."""

from __future__ import annotations

from typing import Any

import pytest

from markerstore.commit import TaskAttempt, WriteJob, recover, run_task
from markerstore.commit.verify import verify
from markerstore.formats import drift, publishers_of
from tests.support.commit_checks import commit_all, data_files, open_table, split
from tests.support.crash_writer import crash_write
from tests.support.formats import assert_delta_matches, delta_table, vacuum_candidates

pytest.importorskip("deltalake")


@pytest.mark.parametrize("mode", ["append", "replace"])
def test_a_writer_killed_before_publishing_is_published_by_the_next(where: Any, mode: str
                                                                    ) -> None:
    table = open_table(where, markerstore__table__formats="delta")
    commit_all(table, split(600, 2), partition_by=["day"], conflict_mode="append")
    crashed = crash_write(table, "after_complete", partition_by=["day"], mode=mode)
    assert table.state(crashed["instant"]) == "completed"
    assert drift(table) == [{"kind": "format_missing_instant", "format": "delta",
                             "instant": crashed["instant"]}]
    if mode == "replace":  # the replaced files wait for the publish: Delta still reads them
        assert delta_table(table).to_pyarrow_table().num_rows == 600
    commit_all(table, split(30, 1, start=50_000), partition_by=["day"],
               conflict_mode="append")
    assert drift(table) == []
    assert_delta_matches(table)  # every commit once, in the instants' order
    assert [p for p in data_files(table) if not p.startswith("_delta_log/")] == sorted(
        table.snapshot().paths)


def test_the_next_writer_and_recovery_publish_in_order(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta")
    first = crash_write(table, "after_complete", partition_by=["day"], mode="append")
    second = crash_write(table, "after_complete", partition_by=["day"], mode="append")
    # The second writer published the first's instant as it started, then died itself.
    (publisher,) = publishers_of(table)
    assert publisher.published_instants() == {first["instant"]}
    recover(table)
    history = sorted(delta_table(table).history(), key=lambda h: h["version"])
    assert [h["markerstore.instant"] for h in history] == [first["instant"],
                                                             second["instant"]]
    assert_delta_matches(table)


def test_a_losing_attempt_leaves_nothing_for_vacuum(where: Any) -> None:
    table = open_table(where, markerstore__table__formats="delta")
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    data = split(400, 2)
    # Attempt 0 of each task writes its files and dies unreported; attempt 1 wins.
    for pid, batches in data.items():
        run_task(job.spec, batches, TaskAttempt(pid, 1, 0, 10 + pid))
    winners = [run_task(job.spec, batches, TaskAttempt(pid, 1, 1, 20 + pid))
               for pid, batches in data.items()]
    job.commit(winners)
    assert [p for p in data_files(table) if not p.startswith("_delta_log/")] == sorted(
        table.snapshot().paths)
    assert vacuum_candidates(table) == []
    assert_delta_matches(table)


def test_drift_is_a_verify_finding_and_repair_publishes(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta")
    commit_all(table, split(100, 1), partition_by=["day"], conflict_mode="append")
    core = table.start_commit()
    table.commit(core, [])  # the core's commit: nothing publishes it yet
    report = verify(table)
    assert [(f.kind, f.instant, f.action) for f in report.findings] == [
        ("format_missing_instant", core, "would publish")]
    assert not report.consistent
    repaired = verify(table, repair=True)
    assert [f.action for f in repaired.findings] == ["published"]
    assert verify(table).findings == []
    assert_delta_matches(table)


def test_repair_never_deletes_a_file_delta_references(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta")
    commit_all(table, split(100, 1), partition_by=["day"], conflict_mode="append")
    (publisher,) = publishers_of(table)
    referenced = sorted(publisher.referenced_paths())
    # The timeline loses the commit's file (as if rolled back): Delta still has it.
    instant, meta = table.completed()[0]
    kept = referenced[0]
    meta_path = table.storage.path(".markerstore", "timeline", f"{instant}.commit")
    import json

    payload = json.loads(table.storage.get(meta_path))
    payload["files"] = [f for f in payload["files"] if f["path"] != kept]
    table.storage.put(meta_path, json.dumps(payload).encode())
    report = verify(table.__class__(table.path, table.storage.storage_options,
                                    table.settings), repair=True, grace="0")
    assert all(f.path != kept for f in report.findings if f.kind == "orphan_file")
    assert table.storage.exists(table.storage.path(kept))


def test_a_failed_publish_keeps_the_commit_and_the_replaced_files(local_where: Any,
                                                                   monkeypatch: Any) -> None:
    from markerstore.formats.delta import DeltaPublisher

    table = open_table(local_where, markerstore__table__formats="delta")
    commit_all(table, split(300, 1), partition_by=["day"], conflict_mode="append")
    old = sorted(table.snapshot().paths)

    def unreachable(self: Any, commit: Any) -> None:
        raise OSError("the Delta log cannot be reached")

    monkeypatch.setattr(DeltaPublisher, "publish", unreachable)
    result = commit_all(table, split(30, 1, start=9000), partition_by=["day"],
                        conflict_mode="replace")  # the commit stands
    assert table.state(result.instant) == "completed" and result.replaced_files
    assert [f["kind"] for f in drift(table)] == ["format_missing_instant"]
    # Delta still reads the old version: its files were not deleted.
    assert all(table.storage.exists(table.storage.path(p)) for p in old)
    assert delta_table(table).to_pyarrow_table().num_rows == 300
    monkeypatch.undo()
    recover(table)  # the next write, rollback or sweep: publishes, then cleans up
    assert drift(table) == []
    assert_delta_matches(table)
    assert not any(table.storage.exists(table.storage.path(p)) for p in old)


def test_a_rollback_never_deletes_what_delta_holds(local_where: Any) -> None:
    from markerstore.commit import rollback
    from markerstore.errors import CorruptTableError
    from markerstore.formats import APPEND, CommitToPublish, PublishedFile, hive_partition
    from markerstore.formats.commits import table_schema

    table = open_table(local_where, markerstore__table__formats="delta",
                       markerstore__write__staging__mode="none")  # files in place at once
    commit_all(table, split(50, 1), partition_by=["day"], conflict_mode="append")
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    result = run_task(job.spec, split(30, 1, start=500)[0], TaskAttempt(0, 1, 0, 7))
    # Delta got a version of the inflight instant (a format edited by hand, say).
    paths = [f.path for f in result.files]
    (publisher,) = publishers_of(table)
    publisher.publish(CommitToPublish(
        job.instant, APPEND,
        tuple(PublishedFile(f.path, f.bytes, f.rows, hive_partition(f.path))
              for f in result.files), (), ("day",), table_schema(table, paths, ("day",))))
    assert {f["kind"] for f in drift(table)} == {"format_unknown_instant"}
    with pytest.raises(CorruptTableError, match="delta holds instant"):
        rollback(table, job.instant, force=True, roll_forward=False)
    assert all(table.storage.exists(table.storage.path(p)) for p in paths)
