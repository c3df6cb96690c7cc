"""The job host of a streaming query, without Spark: found through its folder, reused,
replaced when dead or stale, releasing each batch's beats, and ending when idle."""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from markerstore import Table
from markerstore.errors import MarkerStoreError
from markerstore.spark import jobhost
from markerstore.spark.jobhost import (
    HOST_FILE,
    attach_query_host,
    live_query_host,
    process_alive,
    query_dir,
)

alive = process_alive


def wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def query() -> Iterator[str]:
    query_id = f"test-{uuid.uuid4().hex}"
    yield query_id
    host = live_query_host(query_dir(query_id))
    if host is not None:
        host.stop(timeout=10.0)


def test_a_query_host_is_reused_and_a_dead_or_stale_one_replaced(tmp_path: Path,
                                                                 query: str) -> None:
    table = Table(str(tmp_path / "t"))
    first = attach_query_host(table, query, serve_markers=True)
    assert first.url is not None and first.control is not None
    again = attach_query_host(table, query, serve_markers=True)
    assert again == first  # the same process, marker server and socket
    os.kill(first.pid, signal.SIGKILL)
    assert wait_gone(first.pid)
    assert os.path.exists(os.path.join(query_dir(query), HOST_FILE))  # stale now
    second = attach_query_host(table, query, serve_markers=True)
    assert second.pid != first.pid and alive(second.pid)
    # A host of other settings (no marker server) is not reused for batched markers.
    other = attach_query_host(table, query, serve_markers=False)
    assert other.pid != second.pid and other.url is None
    # A corrupt host file: a new host, no error.
    with open(os.path.join(query_dir(query), HOST_FILE), "w") as out:
        out.write("{not json")
    third = attach_query_host(table, query, serve_markers=False)
    assert third.pid not in (first.pid, second.pid, other.pid)
    for host in (second, other):
        host.stop(timeout=10.0)
        assert not alive(host.pid)


def test_the_host_beats_for_each_batch_until_released(tmp_path: Path, query: str) -> None:
    table = Table(str(tmp_path / "t"))
    host = attach_query_host(table, query, serve_markers=False)
    for instant in ("20260101000000001", "20260101000000002"):
        host.beat(None, [(table, instant)])
        assert table.heartbeats.read(instant) is not None
        host.release([instant])
        assert table.heartbeats.read(instant) is None
    assert live_query_host(query_dir(query)) == host  # still serving the query


def test_an_idle_host_ends_and_forgets_its_file(tmp_path: Path, query: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobhost, "QUERY_IDLE_SECONDS", 1.0)
    host = attach_query_host(Table(str(tmp_path / "t")), query, serve_markers=True)
    assert wait_gone(host.pid)
    assert not os.path.exists(os.path.join(query_dir(query), HOST_FILE))
    assert live_query_host(query_dir(query)) is None
    with open(os.path.join(query_dir(query), "host.log")) as log:
        assert "Traceback" not in log.read()



def test_a_folder_others_can_write_is_refused(tmp_path: Path, query: str) -> None:
    """Another user could plant a host file (and a marker server) there: refused."""
    folder = query_dir(query)
    os.makedirs(folder)
    os.chmod(folder, 0o777)
    try:
        with pytest.raises(MarkerStoreError, match="not this user's alone"):
            attach_query_host(Table(str(tmp_path / "t")), query, serve_markers=True)
        assert not os.path.exists(os.path.join(folder, HOST_FILE))
    finally:
        shutil.rmtree(folder)
