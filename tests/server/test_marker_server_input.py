"""Bad input, body limits, path escapes, token auth, early conflict detection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from markerstore import ConfigError, InvalidMarkerError, MarkerClient, Table
from markerstore.errors import MarkerConflictError, MarkerServerError
from markerstore.markers.segments import list_segments
from markerstore.server.app import MarkerServer, is_loopback

Serve = Callable[..., MarkerServer]


@pytest.mark.parametrize("body, fragment", [
    ({"partition": "p", "file": "f.parquet", "io_type": "DELETE"}, "unknown IO type"),
    ({"partition": "p", "file": "a/b.parquet"}, "path separator"),
    ({"partition": "p", "file": ".."}, "'..'"),
    ({"partition": "../../etc", "file": "f.parquet"}, "'..'"),
    ({"partition": "/abs/olute", "file": "f.parquet"}, "absolute"),
    ({"partition": "s3://other-bucket/x", "file": "f.parquet"}, "absolute"),
    ({"partition": "p\\q", "file": "f.parquet"}, "backslash"),
    ({"partition": "p", "file": "f\x00.parquet"}, "control"),
    ({"partition": "p", "file": "f.parquet.marker.CREATE"}, ".marker."),
    ({"partition": "p", "file": "MARKERS.type"}, "reserved"),
    ({"partition": "p"}, "needs a 'file'"),
    ({"partition": "p", "file": "f.parquet", "owner": "me"}, "unknown field"),
    ({"partition": "p", "file": "f.parquet", "size": -1}, "size"),
    ({"partition": "p", "file": "f.parquet", "size": "12"}, "size"),
    ({"partition": "p", "file": "f.parquet", "pending_upload": [1, 2]}, "pending_upload"),
    ({"partition": "p", "file": "x" * 2000}, "longer than"),
    ({"markers": []}, "non-empty"),
    ([1, 2], "JSON object"),
])
def test_bad_markers_get_400_with_a_message(mem_table: Table, serve: Serve, http: Any,
                                            body: Any, fragment: str) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    status, answer = http("POST", f"{server.url}/v1/markers/{instant}/create", body)
    assert status == 400, answer
    assert fragment in answer["message"]
    assert list_segments(mem_table.storage, instant) == []


def test_bad_json_and_bad_instants(mem_table: Table, serve: Serve, http: Any) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    status, answer = http("POST", f"{server.url}/v1/markers/{instant}/create", raw=b"{nope")
    assert status == 400 and answer["error"] == "bad_json"
    for bad in ("2024", "abcdefghijklmnopq", "20240101000000000x", "..",
                "%2e%2e", "..%2F..%2Fetc", "20240101000000000%2F..%2F.."):
        status, answer = http("POST", f"{server.url}/v1/markers/{bad}/create",
                              {"file": "f.parquet"})
        assert status in (400, 404), (bad, status, answer)
    status, answer = http("GET", f"{server.url}/v1/markers/..%2f..%2fsecret")
    assert status in (400, 404)
    status, answer = http("GET", f"{server.url}/v1/markers/{instant}/has?file=a/b")
    assert status == 400
    status, answer = http("GET", f"{server.url}/nowhere")
    assert status == 404 and answer["error"] == "not_found"
    status, answer = http("PUT", f"{server.url}/v1/markers/{instant}/create", {"file": "f"})
    assert status == 405


def test_requests_only_reach_the_served_tables_marker_folders(tmp_path: Any, serve: Serve,
                                                              http: Any) -> None:
    table = Table(str(tmp_path / "served"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    client = MarkerClient(server.url, instant)
    client.create("day=1", "ok_w.parquet")
    for body in ({"partition": "../../../outside", "file": "x.parquet"},
                 {"partition": "day=1/../..", "file": "x.parquet"},
                 {"partition": str(tmp_path / "outside"), "file": "x.parquet"},
                 {"partition": "day=1", "file": "../x.parquet"}):
        status, _ = http("POST", f"{server.url}/v1/markers/{instant}/create", body)
        assert status == 400
    files = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    marker_dir = f"served/.markerstore/markers/{instant}/"
    outside_meta = [f for f in files if not f.startswith("served/.markerstore/")]
    assert outside_meta == []
    assert {f for f in files if f.startswith(marker_dir)} == {
        marker_dir + "MARKERS.type", marker_dir + "segment-0000000001.parquet"}


def test_oversized_bodies_are_refused(mem_table: Table, serve: Serve, http: Any) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table, options={"markerstore.markers.server.max_body_bytes": 4096})
    big = {"markers": [{"partition": "p", "file": f"f{i}_w.parquet"} for i in range(200)]}
    status, answer = http("POST", f"{server.url}/v1/markers/{instant}/create", big)
    assert status == 413 and "limit" in answer["message"]
    # a chunked body (no Content-Length) is cut at the limit too
    import urllib3

    def chunks() -> Any:
        for _ in range(100):
            yield b" " * 100
        yield b'{"file": "f.parquet"}'

    response = urllib3.PoolManager().request(
        "POST", f"{server.url}/v1/markers/{instant}/create", body=chunks(),
        chunked=True, headers={"Content-Type": "application/json"})
    assert response.status == 413
    assert list_segments(mem_table.storage, instant) == []
    status, _ = http("POST", f"{server.url}/v1/markers/{instant}/create",
                     {"partition": "p", "file": "small_w.parquet"})
    assert status == 200


def test_token_is_required_off_loopback_and_checked(mem_table: Table, serve: Serve,
                                                    http: Any) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
    with pytest.raises(ConfigError, match="requires a token"):
        MarkerServer(mem_table, host="0.0.0.0")
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table, host="0.0.0.0", token="s3cret-token")
    url = server.url.replace("0.0.0.0", "127.0.0.1")
    assert http("GET", f"{url}/health")[0] == 200  # health is public
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"},
                    {"Authorization": "Basic s3cret-token"}):
        status, answer = http("POST", f"{url}/v1/markers/{instant}/create",
                              {"file": "f.parquet"}, headers=headers)
        assert status == 401 and answer["error"] == "unauthorized"
    assert http("GET", f"{url}/metrics")[0] == 401
    with pytest.raises(MarkerServerError, match="401"):
        MarkerClient(url, instant).create("p", "f_w.parquet")
    client = MarkerClient(url, instant, token="s3cret-token")
    assert client.create("p", "f_w.parquet")
    assert client.all() == ["p/f_w.parquet.marker.CREATE"]


def test_client_rejects_bad_input_before_sending(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    client = MarkerClient(server.url, instant)
    with pytest.raises(InvalidMarkerError):
        client.create("p", "f.parquet", "UPSERT")
    with pytest.raises(TypeError, match="unknown marker detail"):
        client.create("p", "f.parquet", "CREATE", colour="red")
    with pytest.raises(InvalidMarkerError):
        MarkerClient(server.url, "not-an-instant")


def test_early_conflict_detection(mem_table: Table, serve: Serve) -> None:
    first = mem_table.start_commit(heartbeat=False, rollback_failed=False)
    second = mem_table.start_commit(heartbeat=False, rollback_failed=False)
    # a third writer uses direct markers: the server sees its markers on storage
    third = mem_table.start_commit(heartbeat=False, rollback_failed=False)
    mem_table.markers(third).create("day=2", "fid9_0-1-0_" + third + ".parquet")
    server = serve(mem_table, options={
        "hoodie.write.concurrency.early.conflict.detection.enable": "true"})
    a, b = MarkerClient(server.url, first), MarkerClient(server.url, second)
    assert a.create("day=1", f"fid1_0-1-0_{first}.parquet")
    # the same instant may write the file id again (a retried task has a new write token)
    assert a.create("day=1", f"fid1_0-2-1_{first}.parquet")
    with pytest.raises(MarkerConflictError, match="fid1"):
        b.create("day=1", f"fid1_3-4-0_{second}.parquet")
    assert b.create("day=2", f"fid1_3-4-0_{second}.parquet")  # another partition is fine
    assert b.create("day=1", f"fid2_3-4-0_{second}.parquet")  # another file id is fine
    with pytest.raises(MarkerConflictError, match=third):
        b.create("day=2", f"fid9_5-6-0_{second}.parquet")
    # once the first instant is finished, its file ids are free again
    server.seal(first)
    mem_table.commit(first, [])
    server.service.instant_check = 0.001
    import time

    deadline = time.time() + 10
    while True:
        try:
            assert b.create("day=1", f"fid1_7-8-0_{second}.parquet")
            break
        except MarkerConflictError:
            if time.time() > deadline:
                raise
            time.sleep(0.02)


def test_conflict_detection_is_off_by_default(mem_table: Table, serve: Serve) -> None:
    first = mem_table.start_commit(heartbeat=False, rollback_failed=False)
    second = mem_table.start_commit(heartbeat=False, rollback_failed=False)
    server = serve(mem_table)
    assert MarkerClient(server.url, first).create("d", "fid1_a.parquet")
    assert MarkerClient(server.url, second).create("d", "fid1_b.parquet")
