"""Everything read from the table's own files is untrusted: attacks through crafted state.

Each test plants what someone who can write the table's folder could plant (a segment row,
a plan, an expire record, commit metadata, a symbolic link), on local disk and on S3 (moto
over HTTP), and checks that the operation refuses with a CorruptTableError naming the file
and deletes nothing: not the victim outside the table, not a committed file inside it.

On S3 a key holding ``..`` is a key like any other (S3 does not resolve it, though some
S3-compatible stores do), so there the victim survives either way; what the S3 variants
prove is that the operation refuses before its first delete.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import errortable
from harness.s3 import MotoS3
from markerstore import CorruptTableError, Table
from markerstore.commit import recover
from markerstore.commit import rollback as commit_rollback
from markerstore.markers.base import BATCHED, ensure_marker_type, marker_folder
from markerstore.markers.segments import now_ms, rows_to_table, write_segment
from markerstore.storage import Storage
from tests.support.files import exists, marked_write, write_file

VICTIM = "victim/x.txt"


@dataclass
class Place:
    """A room holding a table at ``w/table`` and, two levels up from it, a victim file."""

    kind: str
    room: str
    storage_options: dict[str, Any]

    @property
    def table_url(self) -> str:
        return f"{self.room}/w/table"

    def table(self) -> Table:
        return Table(self.table_url, self.storage_options)

    def storage(self) -> Storage:
        return Storage(self.room, self.storage_options)

    def put(self, relative: str, data: bytes = b"precious") -> None:
        storage = self.storage()
        storage.put(storage.path(relative), data)

    def exists(self, relative: str) -> bool:
        storage = self.storage()
        return storage.exists(storage.path(relative))

    def cli_options(self) -> list[str]:
        return [f"--storage-option={k}={v}" for k, v in self.storage_options.items()
                if isinstance(v, str)] + (
            [f"--storage-option=client_kwargs.region_name="
             f"{self.storage_options['client_kwargs']['region_name']}"]
            if "client_kwargs" in self.storage_options else [])


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "local":
        return Place("local", str(tmp_path), {})
    moto: MotoS3 = request.getfixturevalue("moto_s3")
    bucket = moto.create_bucket(f"sec-{uuid.uuid4().hex[:12]}")
    return Place("s3", f"s3://{bucket}", moto.storage_options())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "markerstore.cli", *args],
                          capture_output=True, text=True, timeout=120)


def assert_one_line_failure(out: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def failed_batched_write(table: Table, rows: list[tuple[str, str]]) -> str:
    """An inflight instant whose (dead) writer left one batched segment with `rows`."""
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    created = now_ms()
    segment = rows_to_table([{"partition": p, "file": f, "io_type": "CREATE",
                              "created_at": created} for p, f in rows])
    write_segment(table.storage, instant, segment, "parquet", itertools.count().__next__)
    return instant


# --- crafted segment rows --------------------------------------------------------------------
def test_crafted_segment_row_is_refused_by_rollback_and_reconcile(place: Place) -> None:
    table = place.table()
    place.put(VICTIM)
    instant = failed_batched_write(table, [("day=1", "own.parquet"), ("../../victim", "x.txt")])
    write_file(table, "day=1/own.parquet")

    with pytest.raises(CorruptTableError, match=r"segment-0+\.parquet.*\.\./\.\./victim"):
        table.reconcile(instant, [])
    with pytest.raises(CorruptTableError, match=r"segment-0+\.parquet.*\.\./\.\./victim"):
        table.rollback(instant, force=True)
    assert place.exists(VICTIM)
    assert exists(table, "day=1/own.parquet")  # nothing was deleted, not even the own file

    out = cli("rollback", table.storage.url(), instant, "--force", *place.cli_options())
    assert_one_line_failure(out, "segment-", "../../victim")
    assert place.exists(VICTIM)


def test_unreadable_segment_names_the_segment(place: Place) -> None:
    table = place.table()
    instant = failed_batched_write(table, [("day=1", "own.parquet")])
    write_file(table, "day=1/own.parquet")
    folder = marker_folder(table.storage, instant)
    table.storage.put(f"{folder}/segment-0000000007.parquet", b"PAR1 truncated")
    with pytest.raises(CorruptTableError, match=r"segment-0000000007\.parquet.*unreadable"):
        table.rollback(instant, force=True)
    assert exists(table, "day=1/own.parquet")


def test_stray_file_in_a_direct_marker_folder_is_corrupt_state(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    folder = marker_folder(table.storage, instant)
    table.storage.put(f"{folder}/p/notes.txt", b"")
    with pytest.raises(CorruptTableError, match=r"notes\.txt"):
        table.rollback(instant, force=True)
    assert exists(table, "p/a.parquet")
    out = cli("rollback", table.storage.url(), instant, "--force")
    assert_one_line_failure(out, "notes.txt")


def test_marker_type_version_out_of_range_is_corrupt_state(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    path = f"{marker_folder(table.storage, instant)}/MARKERS.type"
    for payload in (b'{"type": "DIRECT", "version": 1e999}', b'{"type": "DIRECT", '
                    b'"version": "1"}', b'{"type": 7}', b"1e999", b"[]"):
        table.storage.put(path, payload)
        with pytest.raises(CorruptTableError, match="MARKERS.type"):
            table.rollback(instant, force=True)
    assert exists(table, "p/a.parquet")


# --- crafted plans ---------------------------------------------------------------------------
def completed_write(table: Table, paths: list[str]) -> str:
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, paths)
    table.commit(instant, paths)
    return instant


def plant_plan(table: Table, instant: str, replaced: list[str]) -> None:
    plan = {"instant": instant, "write_uuid": table.write_uuid(instant), "phase": "publish",
            "conflict_mode": "replace", "scopes": [""], "staging_mode": "none",
            "files": [], "replaced_files": replaced, "metadata": {}}
    table.storage.put(table.storage.path(".markerstore/plans", f"{instant}.json"),
                      json.dumps(plan).encode())


def test_crafted_plan_replaced_files_are_refused(place: Place) -> None:
    table = place.table()
    place.put("victim/y.txt")
    instant = completed_write(table, ["p/own.parquet"])
    plant_plan(table, instant, ["p/own.parquet", "../../victim/y.txt"])

    with pytest.raises(CorruptTableError, match=r"plans/\d{17}\.json.*\.\./\.\./victim/y\.txt"):
        recover(table)
    assert exists(table, "p/own.parquet")
    assert place.exists("victim/y.txt")

    out = cli("rollback", table.storage.url(), *place.cli_options())
    assert_one_line_failure(out, ".json", "victim/y.txt")
    assert exists(table, "p/own.parquet")
    assert place.exists("victim/y.txt")


def test_plan_may_not_replace_the_commits_own_files(place: Place) -> None:
    table = place.table()
    earlier = completed_write(table, ["p/old.parquet"])
    instant = completed_write(table, ["p/own.parquet"])
    plant_plan(table, instant, ["p/own.parquet"])
    with pytest.raises(CorruptTableError, match="own.parquet.*itself wrote"):
        recover(table)
    assert exists(table, "p/own.parquet")
    # a file the commit did not record as replaced is refused too
    plant_plan(table, instant, ["p/old.parquet"])
    with pytest.raises(CorruptTableError, match="old.parquet.*recorded as replaced"):
        recover(table)
    assert exists(table, "p/old.parquet")
    assert table.state(earlier) == "completed"


# --- crafted expire records ------------------------------------------------------------------
def test_crafted_expire_record_is_refused(place: Place) -> None:
    table = Table(f"{place.room}/w/table_errors", place.storage_options)
    table.storage.put(table.storage.path(".markerstore/errortable.json"),
                      json.dumps({"kind": "error_table"}).encode())
    place.put("victim/z.txt")
    instant = table.start_commit(operation="expire", heartbeat=False)
    table.commit(instant, [], metadata={"cutoff": "2020-01-01T00:00:00+00:00", "expired": {
        "20200101000000000": {"files": ["../../victim/z.txt"], "rows": 1}}})
    with pytest.raises(CorruptTableError, match=r"\d{17}\.commit.*\.\./\.\./victim/z\.txt"):
        errortable.expire(table, "1d")
    assert place.exists("victim/z.txt")


# --- crafted commit metadata -----------------------------------------------------------------
@pytest.mark.parametrize("payload", [b"{}", b"[]", b'{"files": "x"}',
                                     b'{"state": "completed", "files": [{"path": "../a"}]}'])
def test_corrupt_commit_is_never_a_completed_commit(place: Place, payload: bytes) -> None:
    table = place.table()
    done = completed_write(table, ["p/a.parquet"])
    table.storage.put(table.storage.path(".markerstore/timeline", f"{done}.commit"), payload)
    table = place.table()  # a fresh reader, no cached metadata
    with pytest.raises(CorruptTableError, match=rf"{done}\.commit"):
        table.commit_metadata(done)
    # A failed write whose markers name the committed file (a buggy or hostile writer):
    # its rollback must not delete it, and cannot know it is safe, so it refuses.
    failed = table.start_commit(heartbeat=False, rollback_failed=False)
    table.markers(failed).create("p", "a.parquet")
    with pytest.raises(CorruptTableError, match=rf"{done}\.commit"):
        table.rollback(failed, force=True)
    assert exists(table, "p/a.parquet")


def test_cli_shows_a_corrupt_commit_and_fails_in_one_line(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    done = completed_write(table, ["p/a.parquet"])
    later = completed_write(table, ["p/b.parquet"])
    table.storage.put(table.storage.path(".markerstore/timeline", f"{done}.commit"), b"[]")

    out = cli("timeline", table.storage.url(), "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["instant"]: r for r in json.loads(out.stdout)}
    assert rows[done]["state"] == "corrupt" and f"{done}.commit" in rows[done]["problem"]
    assert rows[later]["state"] == "completed" and rows[later]["files"] == 1

    assert_one_line_failure(cli("sql", table.storage.url(), "SELECT count(*) FROM commits"),
                            f"{done}.commit")
    failed = table.start_commit(heartbeat=False, rollback_failed=False)
    marked_write(table, failed, ["p/c.parquet"])
    assert_one_line_failure(cli("rollback", table.storage.url(), failed, "--force"),
                            f"{done}.commit")
    assert exists(table, "p/c.parquet") and exists(table, "p/a.parquet")


def test_corrupt_heartbeat_counts_as_expired(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    for payload in (b'{"ts_ms": 1e999}', b'{"ts_ms": -5}', b"[]", b'{"ts_ms": 1, "pid": 0}'):
        table.storage.put(table.storage.path(".markerstore/heartbeats", instant), payload)
        assert table.heartbeats.read(instant) is None


# --- symbolic links out of the table (local disk) --------------------------------------------
def test_no_delete_follows_a_symbolic_link_out_of_the_table(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "x.txt").write_text("precious")
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    table.markers(instant).create("p", "x.txt")  # a valid path...
    (tmp_path / "t" / "p").symlink_to(victim)    # ...whose folder leads out of the table
    with pytest.raises(CorruptTableError, match="resolves outside the table"):
        table.rollback(instant, force=True)
    assert (victim / "x.txt").exists()


def test_a_linked_marker_folder_is_unlinked_not_emptied(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "p").mkdir(parents=True)
    (victim / "p" / "x.txt.marker.CREATE").write_text("precious")
    table = Table(str(tmp_path / "t"))
    done = completed_write(table, ["q/a.parquet"])
    folder = Path(marker_folder(table.storage, done))
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(victim)  # a completed instant's leftover marker folder
    table.clean_markers()
    assert (victim / "p" / "x.txt.marker.CREATE").exists()
    assert not folder.exists() and not folder.is_symlink()


def test_crafted_publish_plan_is_rolled_back_not_forward(tmp_path: Path) -> None:
    """A publish plan of a failed write naming a file outside the table: roll forward
    would 'publish' it and, when the commit then fails, unpublish (delete) it."""
    place = Place("local", str(tmp_path), {})
    place.put("victim/y.txt")
    table = Table(place.table_url, options={"markerstore.write.staging.mode": "rename"})
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/own.parquet"])
    plan = {"instant": instant, "write_uuid": table.write_uuid(instant), "phase": "publish",
            "conflict_mode": "append", "scopes": [""], "staging_mode": "rename",
            "files": [{"path": "../../victim/y.txt", "rows": 1, "bytes": 8}],
            "replaced_files": [], "metadata": {}}
    table.storage.put(table.storage.path(".markerstore/plans", f"{instant}.json"),
                      json.dumps(plan).encode())
    result = commit_rollback(table, instant, force=True)
    assert not result.rolled_forward
    assert result.deleted_files == ["p/own.parquet"]
    assert place.exists("victim/y.txt")


@pytest.mark.s3
def test_crafted_pending_upload_of_another_key_is_not_aborted(moto_s3: MotoS3) -> None:
    from markerstore.commit import s3

    bucket = moto_s3.create_bucket(f"sec-{uuid.uuid4().hex[:12]}")
    place = Place("s3", f"s3://{bucket}", moto_s3.storage_options())
    table = place.table()
    victim = place.storage()
    upload = victim.fs.call_s3("create_multipart_upload", Bucket=bucket, Key="victim/big.bin")
    pending = {"bucket": bucket, "key": "victim/big.bin", "upload_id": upload["UploadId"],
               "parts": [], "size": 0}
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    rows = rows_to_table([{"partition": "p", "file": "own.parquet", "io_type": "CREATE",
                           "pending_upload": json.dumps(pending), "created_at": now_ms()}])
    write_segment(table.storage, instant, rows, "parquet", itertools.count().__next__)
    with pytest.raises(CorruptTableError, match="victim/big.bin.*not at that file's key"):
        commit_rollback(table, instant, force=True)
    keys = [u.key for u in s3.list_uploads(victim, prefix="victim/")]
    assert keys == ["victim/big.bin"]
