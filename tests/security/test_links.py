"""Symbolic links planted in a table's folder (local disk; object stores have none).

Whoever can write the table's folder can replace any folder or file in it by a link to a
folder or file elsewhere. Nothing markerstore does may then read, write or delete through
that link: the operation refuses with a CorruptTableError naming the path, or (a delete
of a link itself) removes the link and never what it leads to. The victim is a folder
outside the table with files and empty folders; every test checks it is left exactly as
it was.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import errortable
from markerstore import CorruptTableError, Table
from markerstore.commit import WriteJob
from markerstore.commit import rollback as commit_rollback
from markerstore.commit.verify import verify
from tests.support.commit_checks import NO_RETENTION, run_job_tasks, split
from tests.support.files import marked_write

OUTSIDE_ERROR = "resolves outside the table"


def tree(folder: Path) -> dict[str, str | None]:
    """Every folder (None) and file (its text) under `folder`, links not followed."""
    found: dict[str, str | None] = {}
    for path in sorted(folder.rglob("*")):
        relative = str(path.relative_to(folder))
        found[relative] = None if path.is_dir() and not path.is_symlink() else (
            path.read_text() if path.is_file() else "link")
    return found


def victim(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "empty" / "deeper").mkdir(parents=True)
    (outside / "keep").mkdir()
    (outside / "keep" / "precious.txt").write_text("precious")
    (outside / "x.parquet").write_text("precious too")
    return outside


def committed(table: Table, paths: list[str]) -> str:
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, paths)
    table.commit(instant, paths)
    return instant


def relink(link: Path, target: Path) -> None:
    """Replace `link` (a folder or file of the table, or nothing) by a link to `target`."""
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


# --- the table's own folders linked out -------------------------------------------------
def test_a_linked_marker_folder_is_neither_emptied_nor_written(tmp_path: Path) -> None:
    outside = victim(tmp_path)
    table = Table(str(tmp_path / "t"))
    done = committed(table, ["p/a.parquet"])
    # The outside folder holds a folder named like a completed instant (the timeline is
    # readable) with only folders in it: listing it finds no file to check.
    (outside / done / "sub" / "deeper").mkdir(parents=True)
    before = tree(outside)
    relink(tmp_path / "t" / ".markerstore" / "markers", outside)

    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR) as refused:
        try:
            table.start_commit(heartbeat=False)  # its cleanup of leftover markers
        finally:
            assert tree(outside) == before, "the cleanup deleted through the link"
    assert refused.value.file == table.storage.url()
    instant = table.start_commit(heartbeat=False, rollback_failed=False)
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        table.markers(instant)  # MARKERS.type of the new write
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        table.rollback(instant, force=True)
    assert tree(outside) == before


@pytest.mark.parametrize("folder", ["heartbeats", "timeline", ""])
def test_linked_state_folders_refuse_every_write(tmp_path: Path, folder: str) -> None:
    outside = victim(tmp_path)
    table = Table(str(tmp_path / "t"))
    committed(table, ["p/a.parquet"])
    meta = tmp_path / "t" / ".markerstore"
    if folder:
        relink(meta / folder, outside)
    else:  # the whole state folder moved out, and linked back
        shutil.copytree(meta, outside / "meta")
        relink(meta, outside / "meta")
    before = tree(outside)

    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        table.start_commit()  # reads the timeline, creates an instant, starts its heartbeat
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        table.start_commit(rollback_failed=False)
    assert tree(outside) == before


# --- data files, error files and partition folders linked out -----------------------------
def _reconcile(table: Table, link: str) -> None:
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["q/own.parquet"])
    table.markers(instant).create(*link.rsplit("/", 1))
    table.commit(instant, ["q/own.parquet"])  # the link is a losing attempt's file


def _rollback(table: Table, link: str) -> None:
    instant = table.start_commit(heartbeat=False)
    table.markers(instant).create(*link.rsplit("/", 1))
    commit_rollback(table, instant, force=True)


def _replace(table: Table, link: str) -> None:
    job = WriteJob(table, partition_by=["day"], conflict_mode="replace").start()
    job.commit(run_job_tasks(job, split(40, 1, days=1)))


def _verify(table: Table, link: str) -> None:
    verify(table, repair=True, grace="0")


def _expire(table: Table, link: str) -> None:
    errortable.expire(table, "1d", now=datetime.now(timezone.utc) + timedelta(days=2))


def _planted(table: Table, operation: str) -> str:
    """A file of the table, named as the operation needs, whose path the test links out."""
    if operation == "replace":
        job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
        result = job.commit(run_job_tasks(job, split(40, 1, days=1)))
        return str(result.files[0].path)
    if operation == "expire":
        table.storage.put(table.storage.path(".markerstore/errortable.json"),
                          json.dumps({"kind": "error_table"}).encode())
        instant = table.start_commit(operation="errors", heartbeat=False)
        marked_write(table, instant, ["p/err.avro"])
        table.commit(instant, ["p/err.avro"])
        return "p/err.avro"
    if operation == "verify":
        return "p/x_0-1-0_20200101000000000.parquet"  # an orphan by its name
    return "p/x.parquet"


OPERATIONS = {"reconcile": _reconcile, "rollback": _rollback, "replace": _replace,
              "verify --repair": _verify, "errortable expire": _expire}


@pytest.mark.parametrize("operation", list(OPERATIONS))
@pytest.mark.parametrize("linked", ["file", "folder"])
def test_deletes_never_follow_a_link_out(tmp_path: Path, operation: str, linked: str
                                         ) -> None:
    outside = victim(tmp_path)
    table = Table(str(tmp_path / "t"), None, NO_RETENTION)  # a replace deletes at once
    path = _planted(table, operation.split()[-1])
    (tmp_path / "t" / path).parent.mkdir(parents=True, exist_ok=True)
    if linked == "file":  # the file is a link to a file outside
        relink(tmp_path / "t" / path, outside / "x.parquet")
    else:  # its folder is a link to a folder outside that holds a file of that name
        (outside / Path(path).name).write_text("precious, same name")
        relink(tmp_path / "t" / Path(path).parent, outside)
    before = tree(outside)
    try:
        OPERATIONS[operation](table, path)
    except CorruptTableError as exc:
        assert OUTSIDE_ERROR in str(exc)
        assert linked == "folder", exc  # a link itself is removed, never refused
    assert tree(outside) == before
    if linked == "file" and operation != "verify --repair":  # verify lists no link
        assert not (tmp_path / "t" / path).is_symlink()


# --- reads and writes of data files through links -----------------------------------------
def test_a_committed_file_that_links_out_is_not_read(tmp_path: Path) -> None:
    outside = victim(tmp_path)
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    table.markers(instant).create("p", "a.parquet")
    relink(tmp_path / "t" / "p" / "a.parquet", outside / "x.parquet")
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        table.commit(instant, ["p/a.parquet"])  # its size would be read through the link
    assert table.state(instant) == "inflight"


def test_a_snapshot_never_hands_a_reader_a_link_out(tmp_path: Path) -> None:
    outside = victim(tmp_path)
    pq.write_table(pa.table({"secret": ["outside the table"]}), outside / "secret.parquet")
    table = Table(str(tmp_path / "t"))
    committed(table, ["p/a.parquet"])
    relink(tmp_path / "t" / "p" / "a.parquet", outside / "secret.parquet")
    snapshot = table.snapshot()
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        snapshot.dataset()  # pyarrow (and .duckdb()) would read the outside file
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        assert snapshot.urls  # what Spark's reader is given


@pytest.mark.parametrize("staging", ["none", "rename"])
def test_data_files_are_never_written_through_a_linked_partition(tmp_path: Path,
                                                                 staging: str) -> None:
    outside = victim(tmp_path)
    table = Table(str(tmp_path / "t"), options={"markerstore.write.staging.mode": staging})
    relink(tmp_path / "t" / "day=0", outside)
    before = tree(outside)
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        # staging none: the task writes at the final path; rename: job commit moves it
        job.commit(run_job_tasks(job, split(40, 1, days=1)))
    with pytest.raises(CorruptTableError, match=OUTSIDE_ERROR):
        job.abort()  # its markers name files in the linked folder: nothing is deleted
    assert tree(outside) == before
