"""Storage: create-if-absent, retries on injected S3 faults, request counts."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from harness.s3 import MotoS3, S3Proxy
from markerstore import Table
from markerstore.errors import ReconcileError, StorageError
from markerstore.sql import sql as sql_views
from markerstore.storage import Storage, is_transient
from tests.support.files import exists, marked_write
from tests.support.locations import Location


def test_create_if_absent_is_exclusive(location: Location) -> None:
    storage = Storage(location.url, location.storage_options)
    path = storage.path("x", "one")
    results: list[bool] = []
    barrier = threading.Barrier(4)

    def create(i: int) -> None:
        barrier.wait()
        results.append(storage.create_if_absent(path, f"writer {i} {uuid.uuid4()}".encode()))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    assert storage.get(path).startswith(b"writer ")


def test_paths_and_urls(location: Location) -> None:
    storage = Storage(location.url, location.storage_options)
    path = storage.path("a=1", "f.parquet")
    assert storage.relative(path) == "a=1/f.parquet"
    assert storage.relative(storage.url(path)) == "a=1/f.parquet"
    with pytest.raises(ValueError, match="not under the table path"):
        storage.relative("/somewhere/else")
    assert storage.ls(storage.path("missing")) == []
    assert storage.find(storage.path("missing")) == []


def test_transient_classification() -> None:
    assert is_transient(TimeoutError())
    assert is_transient(OSError(16, "SlowDown"))
    assert not is_transient(PermissionError("denied"))
    assert not is_transient(ValueError("bad"))


def s3_table(moto: MotoS3, proxy: S3Proxy, bucket: str, **extra: object) -> Table:
    options = moto.storage_options(endpoint_url=proxy.endpoint,
                                   config_kwargs={"read_timeout": 1, "connect_timeout": 1,
                                                  "retries": {"max_attempts": 1}}, **extra)
    return Table(f"s3://{bucket}/table", options,
                 {"markerstore.storage.retry.base_delay_ms": 10})


@pytest.mark.s3
def test_s3_throttling_and_timeouts_are_retried(moto_s3: MotoS3, s3_proxy: S3Proxy,
                                                s3_bucket: str) -> None:
    table = s3_table(moto_s3, s3_proxy, s3_bucket)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    s3_proxy.inject("503", lambda m, p: m == "PUT" and ".marker." in p, count=3)
    s3_proxy.inject("500", lambda m, p: m == "PUT" and ".marker." in p, count=2, skip=3)
    s3_proxy.inject("timeout", lambda m, p: m == "GET" and "list-type" in p, count=2,
                    seconds=1.5)
    names = [f"f{i}.parquet" for i in range(8)]
    for name in names:
        assert markers.create("p=1", name) is True
        table.storage.put(table.storage.path("p=1", name), b"x")
    assert sorted(markers.all()) == sorted(f"p=1/{n}.marker.CREATE" for n in names)
    table.commit(instant, [f"p=1/{n}" for n in names[:6]])
    assert all(f.fired == f.count for f in s3_proxy.faults)
    assert sql_views(table, "SELECT count(*) FROM files").fetchall() == [(6,)]
    assert not exists(table, "p=1/f7.parquet")


@pytest.mark.s3
def test_s3_lost_answer_on_commit_is_still_our_commit(moto_s3: MotoS3, s3_proxy: S3Proxy,
                                                      s3_bucket: str) -> None:
    """The completed-instant PUT is applied but its answer is lost: the retry meets 412,
    reads the object back, finds its own content, and reports success."""
    table = s3_table(moto_s3, s3_proxy, s3_bucket)
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["a.parquet"])
    s3_proxy.inject("lost", lambda m, p: m == "PUT" and p.endswith(f"{instant}.commit"),
                    seconds=1.5)
    meta = table.commit(instant, ["a.parquet"])
    assert s3_proxy.faults[0].fired == 1
    assert meta["counts"]["files"] == 1
    assert table.state(instant) == "completed"


@pytest.mark.s3
def test_s3_persistent_delete_failure_fails_the_commit(moto_s3: MotoS3, s3_proxy: S3Proxy,
                                                       s3_bucket: str) -> None:
    table = s3_table(moto_s3, s3_proxy, s3_bucket)
    table.storage.retries = 2
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["keep.parquet", "loser.parquet"])
    s3_proxy.inject("500", lambda m, p: m == "POST" and "delete" in p, count=100)
    with pytest.raises(ReconcileError, match="must not complete"):
        table.commit(instant, ["keep.parquet"])
    assert table.state(instant) == "inflight"
    s3_proxy.clear()
    table.commit(instant, ["keep.parquet"])
    assert not exists(table, "loser.parquet")


@pytest.mark.s3
def test_s3_request_counts_of_markers_reconcile_delete(location: Location) -> None:
    if location.kind != "s3":
        pytest.skip("request counts are exact on S3 only")
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    n = 50
    table.reset_storage_requests()
    for i in range(n):
        markers.create("p", f"f{i}.parquet")
    created = table.storage_requests()
    assert created["PUT"] == n and created["total"] == n
    table.reset_storage_requests()
    table.reconcile(instant, [])
    reconciled = table.storage_requests()
    assert reconciled["DELETE"] == 1  # one DeleteObjects call for the 50 invalid files
    assert reconciled["LIST"] >= 1
    table.reset_storage_requests()
    assert markers.delete_all()
    deleted = table.storage_requests()
    assert deleted["DELETE"] == 1 and deleted["PUT"] == 0
    assert set(deleted) >= {"PUT", "GET", "LIST", "DELETE", "HEAD", "total"}


def test_local_counts_by_kind(tmp_path: object) -> None:
    table = Table(str(tmp_path))
    table.reset_storage_requests()
    instant = table.start_commit(heartbeat=False, rollback_failed=False)
    markers = table.markers(instant)
    for i in range(3):
        markers.create("", f"f{i}")
    counts = table.storage_requests()
    # table.json (the table's id, by its first write), requested, inflight, MARKERS.type,
    # 3 markers
    assert counts["PUT"] == 1 + 2 + 1 + 3
    assert counts["LIST"] >= 1


def test_storage_error_names_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    storage = Storage("memory://errs/t", retries=1, retry_base_delay=0)

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(16, "SlowDown: please reduce your request rate")

    monkeypatch.setattr(storage.fs, "pipe_file", boom)  # the instance is shared: restore it
    with pytest.raises(StorageError, match=r"PUT memory://.*after 2 attempts"):
        storage.put(storage.path("x"), b"1")


def test_local_delete_many_in_chunks_reports_each_failure(tmp_path: Path) -> None:
    """More files than threads: each thread deletes a chunk; a file that cannot be deleted
    (here a folder where a file was expected) is named, and every other file is gone."""
    storage = Storage(str(tmp_path))
    paths = [storage.path("p", f"f{i:03d}.parquet") for i in range(250)]
    for path in paths:
        storage.put(path, b"x")
    stuck = storage.path("p", "zz-folder.parquet")
    Path(stuck, "inside").mkdir(parents=True)
    with pytest.raises(StorageError, match=r"^1 deletes failed: .*zz-folder\.parquet"):
        storage.delete_many([*paths, stuck, storage.path("p", "missing.parquet")],
                            parallelism=8)
    assert not any(Path(p).exists() for p in paths)
    assert Path(stuck).is_dir()
