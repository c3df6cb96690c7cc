"""Paths a filesystem cannot take, or trees no writer makes, under a table: a listing is
iterative with a depth bound (CorruptTableError naming the folder), so rollback completes
or names what stops it; a name over the filesystem's limit is one StorageError line."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from markerstore import Table
from markerstore.errors import CorruptTableError, InvalidMarkerError, StorageError
from markerstore.markers.base import MARKERS_DIR
from markerstore.storage.fs import MAX_LIST_DEPTH
from tests.support.files import exists, marked_write
from tests.support.locations import Location

LEVELS = 1500  # deeper than Python recurses (about 1,000 frames): what failed before


def deep_tree(folder: Path, levels: int = LEVELS) -> Path:
    """`levels` nested folders under `folder` with one file at the bottom (made a level at
    a time: the whole path is longer than the kernel takes in one call)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("x.marker.CREATE", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)
    return folder / "d"


@pytest.fixture
def cleanup() -> Iterator[list[Path]]:
    """Deep trees to remove with rm (Python's rmtree recurses: pytest's cleanup would
    fail on them)."""
    trees: list[Path] = []
    yield trees
    for tree in trees:
        subprocess.run(["rm", "-rf", str(tree)], check=False)


def test_rollback_names_a_tree_too_deep_then_completes_without_it(
        tmp_path: Path, cleanup: list[Path]) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    folder = Path(table.storage.path(MARKERS_DIR, instant))
    top = deep_tree(folder)
    cleanup.append(top)

    with pytest.raises(CorruptTableError) as caught:
        table.rollback(instant, force=True)
    assert f"nested more than {MAX_LIST_DEPTH} deep" in str(caught.value)
    assert caught.value.file.startswith(f"{folder}/d/d/")  # names the folder

    subprocess.run(["rm", "-rf", str(top)], check=True)  # what the error tells a user
    result = table.rollback(instant, force=True)
    assert not result.noop and not exists(table, "p/a.parquet")
    assert not folder.exists()


def test_the_rollback_command_names_the_folder_in_one_line(tmp_path: Path,
                                                            cleanup: list[Path]) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    folder = Path(table.storage.path(MARKERS_DIR, instant))
    cleanup.append(deep_tree(folder))
    run = subprocess.run([sys.executable, "-m", "markerstore.cli", "rollback", table.path,
                          instant, "--force"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout
    error, = run.stderr.splitlines()
    assert f"{folder}/d/d/" in error and "nested more than" in error
    subprocess.run(["rm", "-rf", str(folder / "d")], check=True)
    run = subprocess.run([sys.executable, "-m", "markerstore.cli", "rollback", table.path,
                          instant, "--force"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "rolled back" in run.stdout, run.stderr


def test_memory_listing_has_the_same_bound() -> None:
    table = Table("memory://deep-listing")
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    folder = table.storage.path(MARKERS_DIR, instant)
    table.storage.fs.pipe_file(folder + "/" + "d/" * 4096 + "x.marker.CREATE", b"")
    with pytest.raises(CorruptTableError, match="nested more than"):
        table.rollback(instant, force=True)
    table.storage.fs.rm(folder + "/d", recursive=True)
    assert not table.rollback(instant, force=True).noop


def test_a_tree_within_the_bound_is_listed(tmp_path: Path, cleanup: list[Path]) -> None:
    table = Table(str(tmp_path / "t"))
    table.storage.put(table.storage.path("a/top"), b"")
    cleanup.append(deep_tree(tmp_path / "t" / "a", MAX_LIST_DEPTH))
    found = table.storage.find(table.storage.path("a"))
    assert len(found) == 2 and found[0].endswith("/d/x.marker.CREATE")


def _only_the_type_file(table: Table, instant: str) -> None:
    """The instant's marker folder holds its MARKERS.type and nothing else: no marker, no
    folder (on S3, no key)."""
    folder = table.storage.path(MARKERS_DIR, instant)
    assert [p[len(folder) + 1:] for p in table.storage.find(folder)] == ["MARKERS.type"]
    if table.storage.is_local:
        assert os.listdir(folder) == ["MARKERS.type"]


@pytest.mark.parametrize("depth", [2100, MAX_LIST_DEPTH + 1])
def test_a_marker_deeper_than_a_listing_reads_is_refused_and_rollback_completes(
        location: Location, depth: int) -> None:
    """A partition of more folders than a listing reads back is refused before any
    request, on every storage: on local disk the create made folders until the kernel
    refused the path (about 2,000 levels) and left them, so every rollback of the instant
    stopped at the too-deep tree (CorruptTableError); on memory:// the marker was created,
    with the same end."""
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    assert markers.create("p", "a.parquet")
    before = table.storage.requests()
    with pytest.raises(InvalidMarkerError, match=f"is {depth} folders deep"):
        markers.create("/".join(["d"] * depth), "b.parquet")
    assert table.storage.requests() == before  # refused before any request
    assert markers.all() == ["p/a.parquet.marker.CREATE"]
    assert not table.rollback(instant, force=True).noop
    assert not table.storage.find(table.storage.path(MARKERS_DIR, instant))


def test_a_partition_as_deep_as_a_listing_reads_is_a_marker(location: Location) -> None:
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    partition = "/".join(["d"] * MAX_LIST_DEPTH)
    assert table.markers(instant).create(partition, "a.parquet")
    assert table.markers(instant).all() == [f"{partition}/a.parquet.marker.CREATE"]
    assert not table.rollback(instant, force=True).noop


def test_batched_markers_refuse_it_too() -> None:
    """The client refuses it before a request, and the server (for a client that would
    not) answers 400: no segment row names it (a partition of 2,100 levels is longer than
    the 1,024 characters the server takes at all)."""
    import json

    import urllib3

    from markerstore.server.app import MarkerServer
    from markerstore.server.client import MarkerClient

    table = Table("memory://deep-batched/t")
    instant = table.start_commit(heartbeat=False)
    server = MarkerServer(table, options={"markerstore.markers.batch.interval_ms": 5})
    server.start()
    try:
        client = MarkerClient(server.url, instant, table=table)
        deep = "/".join(["d"] * 300)  # 599 characters: within the server's 1,024
        with pytest.raises(InvalidMarkerError, match="300 folders deep"):
            client.create(deep, "a.parquet")
        answer = urllib3.PoolManager(retries=False, timeout=30).request(
            "POST", f"{server.url}/v1/markers/{instant}/create",
            body=json.dumps({"partition": deep, "file": "a.parquet"}).encode(),
            headers={"Content-Type": "application/json"})
        assert answer.status == 400 and "300 folders deep" in json.loads(answer.data)["message"]
        assert client.all() == []
    finally:
        server.stop()
    assert not table.rollback(instant, force=True).noop


# A path under the depth bound but longer than the kernel takes (PATH_MAX, 4,096 bytes):
# 200 folders of 30 bytes; the create is refused part way down.
LONG_PARTITION = "/".join(f"level{i:03d}=" + "x" * 21 for i in range(200))


def test_a_refused_local_create_leaves_no_folder(tmp_path: Path) -> None:
    """The folders a refused create made on its way down are removed again: it left a
    tree of about 130 folders in the marker folder (and one in the table for a data file
    whose folder could not be made)."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    with pytest.raises(StorageError, match="over the filesystem's limit"):
        table.markers(instant).create(LONG_PARTITION, "a.parquet")
    _only_the_type_file(table, instant)
    with pytest.raises(StorageError, match="over the filesystem's limit"):
        table.storage.open_write(table.storage.path(LONG_PARTITION, "a.parquet"))
    assert not (tmp_path / "t" / ("level000=" + "x" * 21)).exists()
    assert not table.rollback(instant, force=True).noop


def test_folders_another_writer_uses_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """A refused create removes only the folders it made, and only while empty: a folder
    in which another marker was created meanwhile stays, with that marker."""
    from markerstore.storage import local

    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    real_open = open

    def racing_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if "b.parquet" in str(path):  # another task's marker lands in the new folder
            markers.create("p=1/q=2", "other.parquet")
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(local, "open", racing_open, raising=False)
    with pytest.raises(OSError, match="No space left"):
        markers.create("p=1/q=2/r=3", "b.parquet")
    monkeypatch.undo()
    assert markers.all() == ["p=1/q=2/other.parquet.marker.CREATE"]
    folder = Path(table.storage.path(MARKERS_DIR, instant))
    assert not (folder / "p=1" / "q=2" / "r=3").exists()


SEGMENT = "p=" + "x" * 298  # 300 bytes: over every common filesystem's name limit


@pytest.mark.parametrize("request_kind", ["marker", "put", "get", "exists", "find", "ls",
                                          "delete", "open_write", "open_read"])
def test_a_name_over_the_limit_is_one_storage_error(tmp_path: Path, request_kind: str
                                                    ) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    storage, path = table.storage, table.storage.path(SEGMENT, "a.parquet")
    calls = {
        "marker": lambda: table.markers(instant).create(SEGMENT, "a.parquet", "CREATE"),
        "put": lambda: storage.put(path, b"x"), "get": lambda: storage.get(path),
        "exists": lambda: storage.exists(path), "find": lambda: storage.find(path),
        "ls": lambda: storage.ls(path), "delete": lambda: storage.delete(path),
        "open_write": lambda: storage.open_write(path),
        "open_read": lambda: storage.open_read(path)}
    with pytest.raises(StorageError) as caught:
        calls[request_kind]()
    message = str(caught.value)
    assert "\n" not in message and "300 bytes" in message and len(message) < 400, message
    assert "over the filesystem's limit" in message


def test_a_name_at_the_limit_is_written(tmp_path: Path) -> None:
    """255 bytes is a valid name: its atomic write's temporary file must fit too."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    name = "p=" + "y" * 253
    assert table.markers(instant).create("q", name[:230] + ".parquet", "CREATE")
    table.storage.put(table.storage.path(name), b"x")
    assert table.storage.get(table.storage.path(name)) == b"x"
    assert table.storage.create_if_absent(table.storage.path("q", name), b"y")


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_a_write_with_a_partition_value_over_the_limit_fails_in_one_line(
        request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> None:
    """On local disk the marker meets the limit; on S3 (keys up to 1,024 bytes) the local
    staging file does: either way one StorageError naming the segment, nothing left."""
    import pyarrow as pa

    from markerstore.commit import TaskAttempt, WriteJob, run_task

    staging = {"markerstore.write.staging.dir": str(tmp_path / "staging")}
    if kind == "local":
        table = Table(str(tmp_path / "t"), None, staging)
    else:
        moto = request.getfixturevalue("moto_s3")
        table = Table(f"s3://{moto.create_bucket('long-names')}/t", moto.storage_options(),
                      staging)
    job = WriteJob(table, partition_by=["day"]).start()
    batch = pa.record_batch({"id": pa.array([1], pa.int64()),
                             "day": pa.array(["x" * 300])})
    with pytest.raises(StorageError) as caught:
        run_task(job.spec, [batch], TaskAttempt(0, 1, 0, 1))
    message = str(caught.value)
    assert "\n" not in message and "over the filesystem's limit" in message, message
    job.abort()
    assert not [p for p in table.storage.find(table.storage.root) if "day=" in p]
