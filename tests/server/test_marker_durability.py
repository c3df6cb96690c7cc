"""Durability: a create is answered only after its segment is on storage; a failed write
fails the whole batch; a killed server loses no acknowledged marker."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness.s3 import MotoS3, S3Proxy, storage_options
from harness.server_kills import held_markers, server_kill_campaign
from markerstore import MarkerClient, MarkerServerError, Table
from markerstore.markers.segments import list_segments
from markerstore.server.app import MarkerServer

Serve = Callable[..., MarkerServer]


def _create_concurrently(client: MarkerClient, names: list[str]) -> list[Any]:
    """Create markers from one thread each (so they share a batch); the outcome of each."""
    outcomes: list[Any] = [None] * len(names)

    def run(i: int) -> None:
        try:
            outcomes[i] = client.create("p", names[i])
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(names))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_a_failed_segment_write_fails_every_create_of_the_batch(
        tmp_path: Any, serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table, options={"markerstore.markers.batch.interval_ms": 100})
    client = MarkerClient(server.url, instant, retries=0)
    assert client.create("p", "before_w.parquet")
    real = table.storage.create_if_absent

    def failing(path: str, data: bytes = b"") -> bool:
        if "segment-" in path:
            raise OSError(errno.EIO, "injected: the disk is gone")
        return real(path, data)

    monkeypatch.setattr(table.storage, "create_if_absent", failing)
    names = [f"f{i}_w.parquet" for i in range(8)]
    outcomes = _create_concurrently(client, names)
    assert all(isinstance(o, MarkerServerError) for o in outcomes), outcomes
    assert all("503" in str(o) and "none of them is acknowledged" in str(o) for o in outcomes)
    assert client.all() == ["p/before_w.parquet.marker.CREATE"]
    assert held_markers(table.storage, instant) == {"p/before_w.parquet.marker.CREATE"}
    monkeypatch.setattr(table.storage, "create_if_absent", real)
    assert _create_concurrently(client, names) == [True] * 8
    assert len(held_markers(table.storage, instant)) == 9


def test_a_failed_fsync_fails_the_batch(tmp_path: Any, serve: Serve,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant, retries=0)
    real_fsync = os.fsync

    def broken_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "injected fsync failure")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(MarkerServerError, match="503"):
        client.create("p", "f_w.parquet")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert not client.has("p", "f_w.parquet", "CREATE")
    assert client.create("p", "f_w.parquet")  # the retry writes it, and says it created it
    assert held_markers(table.storage, instant) == {"p/f_w.parquet.marker.CREATE"}


def test_the_client_retries_a_failed_flush(tmp_path: Any, serve: Serve,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    real = table.storage.create_if_absent
    failures = iter([True, True])

    def flaky(path: str, data: bytes = b"") -> bool:
        if "segment-" in path and next(failures, False):
            raise OSError(errno.EIO, "injected")
        return real(path, data)

    monkeypatch.setattr(table.storage, "create_if_absent", flaky)
    assert MarkerClient(server.url, instant, retries=3).create("p", "f_w.parquet")
    assert held_markers(table.storage, instant) == {"p/f_w.parquet.marker.CREATE"}


@pytest.mark.s3
def test_s3_errors_past_the_retries_fail_the_batch(moto_s3: MotoS3, s3_proxy: S3Proxy,
                                                   serve: Serve) -> None:
    bucket = moto_s3.create_bucket("dur-500")
    options = storage_options(s3_proxy.endpoint,
                              config_kwargs={"retries": {"max_attempts": 2}})
    table = Table(f"s3://{bucket}/t", options,
                  {"markerstore.storage.retries": 1,
                   "markerstore.storage.retry.base_delay_ms": 1})
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant, retries=0)
    assert client.create("p", "ok_w.parquet")
    s3_proxy.inject("500", lambda method, path: method == "PUT" and "segment-" in path,
                    count=1000)
    outcomes = _create_concurrently(client, [f"f{i}_w.parquet" for i in range(4)])
    assert all(isinstance(o, MarkerServerError) and "503" in str(o) for o in outcomes)
    s3_proxy.clear()
    assert held_markers(table.storage, instant) == {"p/ok_w.parquet.marker.CREATE"}
    assert client.create("p", "f0_w.parquet")
    assert held_markers(table.storage, instant) == {"p/ok_w.parquet.marker.CREATE",
                                             "p/f0_w.parquet.marker.CREATE"}


@pytest.mark.s3
def test_s3_lost_answer_is_not_a_lost_marker(moto_s3: MotoS3, s3_proxy: S3Proxy,
                                             serve: Serve) -> None:
    bucket = moto_s3.create_bucket("dur-lost")
    options = storage_options(s3_proxy.endpoint, config_kwargs={"read_timeout": 2})
    table = Table(f"s3://{bucket}/t", options, {"markerstore.storage.retry.base_delay_ms": 1})
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant)
    assert client.create("p", "a_w.parquet")
    # the segment PUT is applied, but its answer never arrives
    s3_proxy.inject("lost", lambda method, path: method == "PUT" and "segment-" in path,
                    seconds=0.5)
    assert client.create("p", "b_w.parquet")
    assert held_markers(table.storage, instant) == {"p/a_w.parquet.marker.CREATE",
                                             "p/b_w.parquet.marker.CREATE"}
    assert len(list_segments(table.storage, instant)) == 2


# --- kill -9 -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_kill_minus_nine_loses_no_acknowledged_marker(tmp_path: Any) -> None:
    """Kill the server process at random moments while 8 clients create markers (and
    compactions run); every marker acknowledged before the kill is on storage, and a new
    server knows it (the rounds are those of the kill campaign: `make soak`)."""
    table = Table(str(tmp_path / "t"))
    report = server_kill_campaign(table, 12, clients=8, seed=1234)
    assert report.kills == 12 and report.instants == 1
    assert report.lost == 0, f"{report.lost} acknowledged marker(s) lost: " \
                             f"{report.lost_examples}"
    assert report.acknowledged > 100
    assert report.creates > 0 and report.create_many_calls > 0
    assert report.unknown_to_fresh_server == 0 and report.recreated == 0


def test_a_slow_write_does_not_hold_up_the_next_batches(
        tmp_path: Any, serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    """Flushes of one folder overlap: a create for a marker that a slow flush is writing
    waits for that flush (and shares its fate); other markers are written meanwhile."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant, retries=0)
    assert client.create("p", "first_w.parquet")  # MARKERS.type is written
    real = table.storage.create_if_absent
    release = threading.Event()
    slow_calls = iter([True])

    def slow_once(path: str, data: bytes = b"") -> bool:
        if "segment-" in path and next(slow_calls, False):
            assert release.wait(30)
            raise OSError(errno.EIO, "injected: slow, then failed")
        return real(path, data)

    monkeypatch.setattr(table.storage, "create_if_absent", slow_once)
    outcomes: dict[str, Any] = {}

    def create(key: str, name: str) -> None:
        try:
            outcomes[key] = client.create("p", name)
        except Exception as exc:
            outcomes[key] = exc

    slow = threading.Thread(target=create, args=("slow", "slow_w.parquet"))
    slow.start()
    time.sleep(0.3)  # its flush is now stuck in the storage write
    same = threading.Thread(target=create, args=("same", "slow_w.parquet"))
    same.start()
    start = time.perf_counter()
    assert client.create("p", "other_w.parquet")  # written while the slow flush hangs
    assert time.perf_counter() - start < 5
    assert "same" not in outcomes  # waits for the slow flush, does not write it twice
    release.set()
    slow.join()
    same.join()
    assert isinstance(outcomes["slow"], MarkerServerError)
    assert isinstance(outcomes["same"], MarkerServerError)
    assert held_markers(table.storage, instant) == {"p/first_w.parquet.marker.CREATE",
                                             "p/other_w.parquet.marker.CREATE"}
    assert client.create("p", "slow_w.parquet")
