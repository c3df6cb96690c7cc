"""The marker server over HTTP: creates, dedupe, lazy load, restart, queries, metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from markerstore import MarkerClient, MarkerServerError, Table, metrics
from markerstore.markers import BATCHED, ensure_marker_type, read_marker_type
from markerstore.markers.base import MarkerName
from markerstore.markers.segments import (
    list_segments,
    marker_row,
    read_batched_table,
    read_segment,
    rows_to_table,
    write_segment,
)
from markerstore.server import open_markers
from markerstore.server.app import MarkerServer

Serve = Callable[..., MarkerServer]


def test_create_dedupe_and_queries(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    assert not MarkerClient(server.url, instant, initialize=False).exists()
    client = MarkerClient(server.url, instant)  # the driver's: writes MARKERS.type now
    assert client.exists() and client.all() == []
    assert read_marker_type(mem_table.storage, instant) == BATCHED
    assert client.create("day=1", "f1_w_1.parquet", "CREATE", task_attempt="a0", size=10)
    assert not client.create("day=1", "f1_w_1.parquet", "CREATE")  # already there
    assert client.create("day=1", "f1_w_1.parquet", "MERGE")  # another IO type
    assert client.create("", "top_w_1.parquet", "APPEND")
    assert client.exists()
    assert client.all() == ["day=1/f1_w_1.parquet.marker.CREATE",
                            "day=1/f1_w_1.parquet.marker.MERGE",
                            "top_w_1.parquet.marker.APPEND"]
    assert client.has("day=1", "f1_w_1.parquet", "CREATE")
    assert not client.has("day=1", "f2_w_1.parquet", "CREATE")
    assert client.created_and_merged_paths() == {"day=1/f1_w_1.parquet"}
    rows = client.to_arrow().to_pylist()
    assert [r["task_attempt"] for r in rows if r["io_type"] == "CREATE"] == ["a0"]
    # on storage: MARKERS.type says BATCHED, DuckDB reads the same markers
    assert read_marker_type(mem_table.storage, instant) == BATCHED
    assert read_batched_table(mem_table.storage, instant).num_rows == 3
    assert client.seal() == 3  # the markers of an inflight instant go only once sealed
    assert client.delete_all()
    assert not client.exists()
    assert client.all() == []
    assert read_marker_type(mem_table.storage, instant) is None


def test_concurrent_creates_of_one_marker_create_it_once(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    client = MarkerClient(server.url, instant)
    answers: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        result = client.create("p", "same_w.parquet")
        with lock:
            answers.append(result)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [False] * 15 + [True]
    assert read_batched_table(mem_table.storage, instant).num_rows == 1


def test_create_many_and_batching(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table, options={"markerstore.markers.batch.interval_ms": 200})
    client = MarkerClient(server.url, instant)
    items: list[Any] = [("p=1", f"f{i}_w.parquet", "CREATE") for i in range(300)]
    assert client.create_many(items) == [True] * 300
    assert client.create_many(items[:5] + [{"partition": "p=2", "file": "x_w.parquet",
                                            "size": 5}]) == [False] * 5 + [True]
    # one request of 300 markers was one flush: one segment
    assert len(list_segments(mem_table.storage, instant)) == 2


def test_retried_request_id_still_answers_created(mem_table: Table, serve: Serve,
                                                  http: Any) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    url = f"{server.url}/v1/markers/{instant}/create"
    body = {"partition": "p", "file": "f_w.parquet", "io_type": "CREATE"}
    first = http("POST", url, body, headers={"X-Request-Id": "r1"})
    again = http("POST", url, body, headers={"X-Request-Id": "r1"})
    other = http("POST", url, body, headers={"X-Request-Id": "r2"})
    assert first == (200, {"created": True, "marker": "p/f_w.parquet.marker.CREATE"})
    assert again[1]["created"] is True  # the retry of the request that created it
    assert other[1]["created"] is False


def test_lazy_load_after_restart(tmp_path: Any, serve: Serve) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    first = MarkerServer(table, options={"markerstore.markers.batch.interval_ms": 5})
    first.start()
    client = MarkerClient(first.url, instant)
    for i in range(20):
        assert client.create("d=1", f"f{i}_w.parquet", "CREATE", size=i)
    first.stop()
    # a new server (a new process would be the same: it holds nothing) reads the segments
    # on the first request for the instant, and only then
    second = serve(Table(str(tmp_path / "t")))
    assert second.service.states == {}
    client = MarkerClient(second.url, instant)
    assert not client.create("d=1", "f3_w.parquet", "CREATE")
    assert len(client.all()) == 20
    assert client.create("d=1", "f20_w.parquet", "CREATE")
    assert len(read_batched_table(table.storage, instant)) == 21
    assert second.service.states[instant].names >= {"d=1/f3_w.parquet.marker.CREATE"}


def test_refuses_instants_that_are_not_inflight(mem_table: Table, serve: Serve,
                                               http: Any) -> None:
    done = mem_table.start_commit(heartbeat=False)
    mem_table.commit(done, [])
    server = serve(mem_table)
    status, body = http("POST", f"{server.url}/v1/markers/{done}/create",
                        {"file": "f_w.parquet"})
    assert status == 409 and body["error"] == "instant_not_inflight"
    status, body = http("POST", f"{server.url}/v1/markers/20200101000000000/create",
                        {"file": "f_w.parquet"})
    assert status == 409
    # an instant that commits while the server holds it is closed at the next refresh
    live = mem_table.start_commit(heartbeat=False)
    client = MarkerClient(server.url, live)
    assert client.create("p", "a_w.parquet")
    mem_table.commit(live, [])
    server.service.instant_check = 0.001
    with pytest.raises(MarkerServerError, match="no longer inflight|not inflight"):
        for i in range(100):  # the refresh runs on the dispatcher's next ticks
            client.create("p", f"b{i}_w.parquet")
    # a create that raced the commit may have left a stray segment; cleanup removes it
    mem_table.clean_markers()
    assert read_marker_type(mem_table.storage, live) is None


def test_seal_refuses_stragglers_before_commit(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    client = MarkerClient(server.url, instant)
    assert client.create("p", "a_w.parquet")
    assert server.seal(instant) == 1
    with pytest.raises(MarkerServerError, match="sealed"):
        client.create("p", "late_w.parquet")
    assert client.all() == ["p/a_w.parquet.marker.CREATE"]
    assert client.delete_all()
    with pytest.raises(MarkerServerError, match="sealed"):
        client.create("p", "later_w.parquet")
    assert read_marker_type(mem_table.storage, instant) is None


def test_direct_instant_is_refused(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    mem_table.markers(instant).create("p", "d_w.parquet")
    server = serve(mem_table)
    with pytest.raises(Exception, match="DIRECT"):
        MarkerClient(server.url, instant).create("p", "e_w.parquet")


def test_metrics(mem_table: Table, serve: Serve, http: Any) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    client = MarkerClient(server.url, instant)
    for i in range(5):
        client.create("p", f"f{i}_w.parquet")
    client.create("p", "f0_w.parquet")
    metrics.failed_records("events", "cast", 3)
    status, text = http("GET", f"{server.url}/metrics")
    assert status == 200
    lines = text.splitlines()
    assert 'markerstore_marker_creates_total{result="created"} 5' in lines
    assert 'markerstore_marker_creates_total{result="existed"} 1' in lines
    assert "markerstore_markers_held 5" in lines
    assert "markerstore_marker_queue_depth 0" in lines
    assert any(line.startswith('markerstore_marker_batches_total{result="ok"}')
               for line in lines)
    assert "# TYPE markerstore_marker_flush_seconds histogram" in lines
    assert any(line.startswith("markerstore_marker_flush_seconds_count ") for line in lines)
    assert any(line.startswith('markerstore_marker_requests_total{endpoint="/v1/markers/'
                               '{instant}/create",method="POST",status="200"} 6')
               for line in lines)
    assert 'markerstore_failed_records_total{reason="cast",table="events"} 3' in "\n".join(
        lines) or any("markerstore_failed_records_total" in line and " 3" in line
                      for line in lines)
    status, health = http("GET", f"{server.url}/health")
    assert status == 200 and health["status"] == "ok"


@pytest.mark.slow
@pytest.mark.campaign
def test_segment_count_stays_bounded_at_100k_markers(serve: Serve) -> None:
    table = Table("memory://bound-test/table")
    instant = table.start_commit(heartbeat=False)
    bound = 8
    server = serve(table, options={"markerstore.markers.batch.max_segments": bound,
                                   "markerstore.markers.batch.interval_ms": 1})
    client = MarkerClient(server.url, instant)
    peak = 0
    stop = threading.Event()

    def watch() -> None:  # the files on storage, whatever the server thinks
        nonlocal peak
        # A listing every half millisecond: a busy loop here would hold the GIL the
        # in-process server needs, and make the test minutes long.
        while not stop.wait(0.0005):
            peak = max(peak, len(list_segments(table.storage, instant)))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for start in range(0, 100_000, 250):
            client.create_many([("d=1", f"f{i}_w.parquet", "CREATE")
                                for i in range(start, start + 250)])
    finally:
        stop.set()
        watcher.join()
    assert peak <= bound
    assert len(list_segments(table.storage, instant)) <= bound
    assert read_batched_table(table.storage, instant).num_rows == 100_000
    assert len(client.all()) == 100_000


def test_overlapping_segments_left_by_a_crash_are_merged_once(tmp_path: Any,
                                                              serve: Serve) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    rows = [marker_row(MarkerName.build("p", f"f{i}_w.parquet", "CREATE"), {}, i)
            for i in range(10)]
    seq = iter(range(1, 10))
    # a compaction wrote the merged segment 3 and died before deleting 1 and 2
    write_segment(table.storage, instant, rows_to_table(rows[:5]), "parquet", lambda: next(seq))
    write_segment(table.storage, instant, rows_to_table(rows[5:]), "parquet", lambda: next(seq))
    write_segment(table.storage, instant, rows_to_table(rows), "parquet", lambda: next(seq))
    server = serve(table, options={"markerstore.markers.batch.max_segments": 4})
    client = MarkerClient(server.url, instant)
    assert not client.create("p", "f3_w.parquet")
    assert server.service.states[instant].overlapping
    for i in range(10, 20):
        assert client.create("p", f"f{i}_w.parquet")
    server.stop()  # lets a running compaction finish
    segments = list_segments(table.storage, instant)
    assert len(segments) <= 4
    total = sum(read_segment(table.storage, s).num_rows for s in segments)
    assert total == len(read_batched_table(table.storage, instant)) == 20


def test_first_requests_for_a_new_instant_share_one_timeline_listing(
        mem_table: Table, serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(mem_table)
    instant = mem_table.start_commit(heartbeat=False)  # after the server listed the timeline
    real_ls = mem_table.storage.ls

    def slow_ls(path: str) -> list[str]:  # a listing takes as long as on S3, or longer
        time.sleep(0.2)
        return real_ls(path)

    monkeypatch.setattr(mem_table.storage, "ls", slow_ls)
    mem_table.reset_storage_requests()
    clients = [MarkerClient(server.url, instant) for _ in range(32)]
    threads = [threading.Thread(target=c.create, args=("p", f"f{i}_w.parquet"))
               for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(clients[0].all()) == 32
    # one listing of the timeline, one of the (missing) marker folder; not one per request
    assert mem_table.storage_requests()["LIST"] <= 3


def test_clients_waiting_for_answers_share_segments(mem_table: Table, serve: Serve) -> None:
    """16 clients, each waiting for its answer before its next create, with a long
    interval: a batch goes as soon as they are all back, not at the interval."""
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table, options={"markerstore.markers.batch.interval_ms": 500})
    clients = [MarkerClient(server.url, instant) for _ in range(16)]

    def run(k: int) -> None:
        for i in range(20):
            clients[k].create("p", f"c{k}-{i}_w.parquet")

    threads = [threading.Thread(target=run, args=(k,)) for k in range(16)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    batches = server.registry.histogram("markerstore_marker_batch_markers").count
    assert len(clients[0].all()) == 320
    assert batches <= 80  # about 16 markers a segment, not one
    assert wall < 20 * 0.5  # faster than one round per interval


def test_details_update_is_durable_and_merged_everywhere(tmp_path: Any, serve: Serve) -> None:
    """A task records its file's size, checksum and pending upload in the marker after
    the file is written: a new row, which every reader merges with the first one."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    first = serve(table)
    client = MarkerClient(first.url, instant)
    assert client.create("d=1", "a_w.parquet", "CREATE", task_attempt="0.1")
    assert client.create("d=1", "b_w.parquet", "CREATE", task_attempt="1.1")
    upload = {"bucket": "bk", "key": "t/d=1/a_w.parquet", "upload_id": "u1",
              "parts": [[1, "e"]], "size": 10}
    client.update("d=1", "a_w.parquet", "CREATE", size=10, checksum="crc", pending_upload=upload)
    client.update("d=1", "c_w.parquet", "CREATE", size=3)  # not created before: now it is
    assert client.all() == ["d=1/a_w.parquet.marker.CREATE", "d=1/b_w.parquet.marker.CREATE",
                            "d=1/c_w.parquet.marker.CREATE"]

    def row_a(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return next(r for r in rows if r["file"] == "a_w.parquet")

    for rows in (client.to_arrow().to_pylist(),                       # the server's memory
                 read_batched_table(table.storage, instant).to_pylist()):  # DuckDB
        a = row_a(rows)
        assert (a["task_attempt"], a["size"], a["checksum"]) == ("0.1", 10, "crc")
        assert a["pending_upload"] is not None and "u1" in a["pending_upload"]
        assert len(rows) == 3
    relation = open_markers(table, instant, type="batched", url=first.url)
    assert relation.create_many([("d=1", "a_w.parquet")]) == [False]  # still one marker
    first.stop()
    # a restarted server loads both rows of the marker and still merges them, also
    # after compacting everything into one segment
    second = serve(Table(str(tmp_path / "t")),
                   options={"markerstore.markers.batch.max_segments": 4})
    again = MarkerClient(second.url, instant)
    for i in range(6):
        again.create("d=2", f"x{i}_w.parquet")
    deadline = time.time() + 10
    while len(list_segments(table.storage, instant)) > 3 and time.time() < deadline:
        time.sleep(0.05)
    assert len(list_segments(table.storage, instant)) <= 3  # compacted (10 flushes)
    rows = read_batched_table(table.storage, instant).to_pylist()
    assert len(rows) == 9
    a = row_a(rows)
    assert (a["task_attempt"], a["size"], a["checksum"]) == ("0.1", 10, "crc")
    assert "u1" in a["pending_upload"]
    stored = sum(read_segment(table.storage, s).num_rows
                 for s in list_segments(table.storage, instant))
    assert stored >= 9


def test_a_marker_twice_in_one_request_is_created_once(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    client = MarkerClient(server.url, instant)
    assert client.create_many([("p", "a_w.parquet"), ("p", "b_w.parquet"),
                               ("p", "a_w.parquet")]) == [True, True, False]
    assert read_batched_table(mem_table.storage, instant).num_rows == 2
