"""Checks at the door: a bad request is a 400 naming the field and never fails another
client's create; DELETE refuses markers that are not its to delete; unknown instants
allocate nothing; a header that is not Latin-1 is a 401."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
import urllib3

from markerstore import ConfigError, MarkerClient, Table
from markerstore.markers import BATCHED, DIRECT, ensure_marker_type, read_marker_type
from markerstore.markers.base import MarkerName, marker_folder
from markerstore.markers.segments import (
    list_segments,
    marker_row,
    read_batched_table,
    rows_to_table,
    write_segment,
)
from markerstore.server.app import MarkerServer
from markerstore.server.writer import ServiceError

Serve = Callable[..., MarkerServer]
UPLOAD = {"bucket": "b", "key": "t/p/f.parquet", "upload_id": "u1", "parts": [[1, "e1"]],
          "size": 5}
SURROGATE = "\ud800"


@pytest.mark.parametrize("body, fragment", [
    ({"file": "f.parquet", "size": 2**63}, "size must be between"),
    ({"file": "f.parquet", "size": 2**64}, "size must be between"),
    ({"file": "f.parquet", "size": 1.5}, "size must be an integer"),
    ({"file": "f.parquet", "size": True}, "size must be an integer"),
    ({"file": "f.parquet", "checksum": SURROGATE}, "checksum is not valid UTF-8"),
    ({"file": "f.parquet", "task_attempt": "a" + SURROGATE}, "task_attempt is not valid UTF-8"),
    ({"file": "f.parquet", "task_attempt": "a\nb"}, "task_attempt"),
    ({"file": "f" + SURROGATE + ".parquet"}, "file is not valid UTF-8"),
    ({"partition": "p" + SURROGATE, "file": "f.parquet"}, "partition is not valid UTF-8"),
    ({"file": "f.parquet", "io_type": SURROGATE}, "io_type is not valid UTF-8"),
    ({"file": "f.parquet", "io_type": 3}, "io_type must be a string"),
    ({"partition": 7, "file": "f.parquet"}, "partition must be a string"),
    ({"partition": "p" * 5000, "file": "f.parquet"}, "partition is longer than"),
    ({"file": "f.parquet", "pending_upload": "not json"}, "pending_upload is a string"),
    ({"file": "f.parquet", "pending_upload": "[1]"}, "pending_upload must be a JSON object"),
    ({"file": "f.parquet", "pending_upload": {"upload_id": "u"}}, "pending_upload must have"),
    ({"file": "f.parquet", "pending_upload": {**UPLOAD, "bucket": SURROGATE}},
     "pending_upload.bucket is not valid UTF-8"),
    ({"file": "f.parquet", "pending_upload": {**UPLOAD, "parts": [[1]]}}, "pending_upload.parts"),
    ({"file": "f.parquet", "pending_upload": {**UPLOAD, "parts": [["1", "e"]]}},
     "pending_upload.parts number"),
    ({"file": "f.parquet", "pending_upload": {**UPLOAD, "size": -1}}, "pending_upload.size"),
    ({"file": "f.parquet", "pending_upload": {**UPLOAD, "extra": {"deep": [[[]]]}}},
     "pending_upload must have"),
    ({"markers": [{"file": "a.parquet"}, {"file": "b.parquet", "size": 2**63}]},
     "marker 1: size"),
    ({"markers": [{"file": "a.parquet"}], "file": "b.parquet"}, "only 'markers'"),
    ("just a string", "JSON object"),
])
def test_every_field_is_checked_at_the_door(mem_table: Table, serve: Serve, http: Any,
                                            body: Any, fragment: str) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    status, answer = http("POST", f"{server.url}/v1/markers/{instant}/create", body)
    assert status == 400, answer
    assert fragment in answer["message"] and "\n" not in answer["message"]
    status, answer = http("POST", f"{server.url}/v1/markers/{instant}/details", body)
    assert status == 400, answer
    assert list_segments(mem_table.storage, instant) == []


@pytest.mark.parametrize("raw, fragment", [
    (b"[" * 3000, "nested too deeply"),
    (b'{"file": "f.parquet", "size": ' + b"[" * 100_000, "nested too deeply"),
    (b'{"file": "f\xff.parquet"}', "not UTF-8"),
    (b'{"file": "f.parquet", "size": NaN}', "not JSON"),
    (b'{"file": "f.parquet", "size": Infinity}', "not JSON"),
    (b'{"file": "f.parquet", "size": 1' + b"0" * 5000 + b"}", "not JSON"),
    (b"", "not JSON"),
])
def test_bad_json_is_400(mem_table: Table, serve: Serve, http: Any, raw: bytes,
                         fragment: str) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    status, answer = http("POST", f"{server.url}/v1/markers/{instant}/create", raw=raw)
    assert status == 400 and answer["error"] == "bad_json", answer
    assert fragment in answer["message"] and "\n" not in answer["message"]


def test_bad_query_and_header_values_are_400(mem_table: Table, serve: Serve,
                                             http: Any) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    base = f"{server.url}/v1/markers/{instant}"
    for query in ("file=f.parquet&io_type=%00", "file=f%0A.parquet", "file=" + "x" * 3000,
                  "file=f.parquet&partition=..%2F..", "file=f.parquet&io_type=" + "C" * 500):
        status, answer = http("GET", f"{base}/has?{query}")
        assert status == 400, (query, answer)
    # bytes that are not UTF-8 arrive decoded with U+FFFD: a name that is simply not there
    for query in ("file=f%ED%A0%80.parquet", "file=f.parquet&partition=%ED%A0%80",
                  "file=f.parquet&partition=%FF"):
        assert http("GET", f"{base}/has?{query}") == (200, {"exists": False})
    status, answer = http("POST", f"{base}/create", {"file": "f.parquet"},
                          headers={"X-Request-Id": "x" * 129})
    assert status == 400 and "X-Request-Id" in answer["message"]


POISON = [
    {"partition": "p", "file": "poison.parquet", "size": 2**63},
    {"partition": "p", "file": "poison.parquet", "checksum": SURROGATE},
    {"partition": "p", "file": "poison.parquet", "task_attempt": SURROGATE},
    {"partition": "p", "file": "poison.parquet", "pending_upload": "x" + SURROGATE},
    {"partition": "p", "file": "poison" + SURROGATE + ".parquet"},
]


@pytest.mark.parametrize("poison", POISON, ids=["size", "checksum", "task_attempt",
                                                "pending_upload", "file"])
def test_a_poisoned_request_fails_alone(tmp_path: Any, serve: Serve, http: Any,
                                        poison: dict[str, Any]) -> None:
    """A bad create sent over and over while five clients create markers: only it fails
    (before the checks at the door, 4 of 5 good clients failed with 503 flush_failed)."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table)
    MarkerClient(server.url, instant)  # the driver opens the folder
    stop = threading.Event()
    bad: list[int] = []
    failures: list[BaseException] = []
    done: list[str] = []
    lock = threading.Lock()

    def poisoner() -> None:
        while not stop.is_set():
            status, answer = http("POST", f"{server.url}/v1/markers/{instant}/create",
                                  {"markers": [{"partition": "p", "file": "ok_w.parquet"},
                                               poison]})
            bad.append(status)

    def good(worker: int) -> None:
        client = MarkerClient(server.url, instant, initialize=False)  # retries 503s
        try:
            for i in range(25):
                assert client.create(f"w={worker}", f"f{i}_w.parquet")
                with lock:
                    done.append(f"w={worker}/f{i}_w.parquet.marker.CREATE")
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=poisoner) for _ in range(2)]
    threads += [threading.Thread(target=good, args=(w,)) for w in range(5)]
    for t in threads[2:]:
        t.start()
    for t in threads[:2]:
        t.start()
    for t in threads[2:]:
        t.join()
    stop.set()
    for t in threads[:2]:
        t.join()
    assert failures == []
    assert len(done) == 125
    assert bad and set(bad) == {400}
    on_storage = {f"{r['partition']}/{r['file']}.marker.{r['io_type']}"
                  for r in read_batched_table(table.storage, instant).to_pylist()}
    assert on_storage == set(done)  # nothing of the bad requests, not even their good half


def _batches(server: MarkerServer, result: str) -> float:
    prefix = f'markerstore_marker_batches_total{{result="{result}"}} '
    for line in server.registry.render().splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix):])
    return 0.0


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
@pytest.mark.parametrize("column, value", [("size", 2**64), ("checksum", SURROGATE)])
def test_a_row_that_cannot_be_encoded_fails_only_its_request(mem_table: Table, serve: Serve,
                                                             fmt: str, column: str,
                                                             value: Any) -> None:
    """The second net: a row that got past the door but does not encode fails its own
    request (400) and is not held; the other rows of its batch are written, and another
    request for the same marker is written by the next flush with its own row."""
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table, options={"markerstore.markers.batch.interval_ms": 300,
                                       "markerstore.markers.batch.format": fmt})
    client = MarkerClient(server.url, instant)
    # one flush answers three creates: the next batch waits for three creates to come back
    assert client.create_many([("p", "a_w.parquet"), ("p", "b_w.parquet"),
                               ("p", "c_w.parquet")]) == [True, True, True]
    service = server.service
    bad = MarkerName.build("p", "bad_w.parquet", "CREATE")
    good = MarkerName.build("p", "good_w.parquet", "CREATE")
    # a value the door refuses: this row is handed to the service directly
    bad_row = {**marker_row(bad, {}, 0), column: value}
    batches = _batches(server, "ok")

    async def three() -> list[Any]:
        return await asyncio.gather(
            service.create(instant, [(bad, bad_row)], "r-bad"),
            service.create(instant, [(bad, marker_row(bad, {"size": 4}, 0))], "r-same"),
            service.create(instant, [(good, marker_row(good, {"size": 3}, 0))], "r-good"),
            return_exceptions=True)

    assert server._loop is not None
    answers = asyncio.run_coroutine_threadsafe(three(), server._loop).result(30)
    bad_answer, same_answer, good_answer = answers
    assert isinstance(bad_answer, ServiceError) and bad_answer.status == 400, answers
    assert "bad_w.parquet" in bad_answer.message and "cannot be written" in bad_answer.message
    assert good_answer == [True]
    assert same_answer == [True]  # its own row, in the next flush
    assert _batches(server, "ok") == batches + 2 and _batches(server, "failed") == 0
    assert client.all() == [f"p/{n}_w.parquet.marker.CREATE"
                            for n in ("a", "b", "bad", "c", "good")]
    rows = {r["file"]: r["size"]
            for r in read_batched_table(mem_table.storage, instant).to_pylist()}
    assert rows == {"a_w.parquet": None, "b_w.parquet": None, "c_w.parquet": None,
                    "bad_w.parquet": 4, "good_w.parquet": 3}


def test_delete_refuses_a_direct_instant(tmp_path: Any, serve: Serve, http: Any) -> None:
    """DELETE of another writer's DIRECT markers is 409: the folder and the partial
    file's marker survive, so its rollback still deletes the partial file."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    partial = f"fid1_0-1-0_{instant}.parquet"
    markers.create("day=1", partial)
    data = tmp_path / "t" / "day=1" / partial
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_bytes(b"PAR1 half a file")
    server = serve(table)
    status, answer = http("DELETE", f"{server.url}/v1/markers/{instant}")
    assert status == 409 and answer["error"] == "marker_type", answer
    assert "DIRECT" in answer["message"]
    assert read_marker_type(table.storage, instant) == DIRECT
    assert markers.all() == [f"day=1/{partial}.marker.CREATE"]
    server.stop()
    result = table.rollback(instant, force=True)
    assert not isinstance(result, list)
    assert not data.exists()
    assert [f.rpartition("/")[2] for f in result.deleted_files] == [partial]


@pytest.mark.parametrize("type_file", [None, b"SOMETHING-ELSE", b""])
def test_delete_refuses_a_folder_of_unknown_mechanism(mem_table: Table, serve: Serve,
                                                      http: Any,
                                                      type_file: bytes | None) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    mem_table.commit(instant, [])  # not inflight: only the mechanism can refuse
    folder = marker_folder(mem_table.storage, instant)
    mem_table.storage.put(f"{folder}/day=1/f_w.parquet.marker.CREATE", b"")
    if type_file is not None:
        mem_table.storage.put(f"{folder}/MARKERS.type", type_file)
    server = serve(mem_table)
    status, answer = http("DELETE", f"{server.url}/v1/markers/{instant}")
    assert status == 409 and answer["error"] == "marker_type", answer
    assert mem_table.storage.exists(f"{folder}/day=1/f_w.parquet.marker.CREATE")


def test_delete_refuses_an_inflight_instant_that_is_not_sealed(mem_table: Table,
                                                               serve: Serve,
                                                               http: Any) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    client = MarkerClient(server.url, instant)
    assert client.create("p", "a_w.parquet")
    status, answer = http("DELETE", f"{server.url}/v1/markers/{instant}")
    assert status == 409 and answer["error"] == "instant_inflight", answer
    assert client.all() == ["p/a_w.parquet.marker.CREATE"]
    assert read_batched_table(mem_table.storage, instant).num_rows == 1
    assert client.create("p", "b_w.parquet")  # still open
    assert client.seal() == 2
    assert client.delete_all()
    # an instant that is no longer inflight may be cleaned without a seal
    other = mem_table.start_commit(heartbeat=False)
    assert MarkerClient(server.url, other).create("p", "c_w.parquet")
    mem_table.commit(other, [])
    # a create that raced the commit left a segment behind: cleaning it needs no seal
    ensure_marker_type(mem_table.storage, other, BATCHED)
    write_segment(mem_table.storage, other, rows_to_table([marker_row(
        MarkerName.build("p", "d_w.parquet", "CREATE"), {}, 0)]), "parquet", lambda: 7)
    status, answer = http("DELETE", f"{server.url}/v1/markers/{other}")
    assert status == 200 and answer == {"deleted": True}
    assert read_marker_type(mem_table.storage, other) is None


def test_unknown_instants_allocate_nothing(mem_table: Table, serve: Serve, http: Any) -> None:
    live = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table)
    assert MarkerClient(server.url, live).create("p", "a_w.parquet")
    held = set(server.service.states)
    assert held == {live}
    for i in range(1500):
        instant = f"20010101{i:09d}"
        route = i % 6
        if route == 0:
            assert http("GET", f"{server.url}/v1/markers/{instant}") == (
                200, {"instant": instant, "markers": []})
        elif route == 1:
            assert http("GET", f"{server.url}/v1/markers/{instant}/exists") == (
                200, {"exists": False})
        elif route == 2:
            assert http("GET", f"{server.url}/v1/markers/{instant}/has?file=f.parquet") == (
                200, {"exists": False})
        elif route == 3:
            assert http("GET", f"{server.url}/v1/markers/{instant}/created-and-merged") == (
                200, {"paths": []})
        elif route == 4:
            assert http("GET", f"{server.url}/v1/markers/{instant}?details=1") == (
                200, {"instant": instant, "rows": []})
        else:
            status, _ = http("POST", f"{server.url}/v1/markers/{instant}/seal")
            assert status == 200
    assert set(server.service.states) == held
    assert http("GET", f"{server.url}/health")[1]["markers_held"] == 1
    # the request metrics are bounded too: unusual methods count as "other"
    for method in ("PROPFIND", "MKCOL", "LOCK", "REPORT", "SEARCH"):
        assert http(method, f"{server.url}/v1/markers/{live}")[0] == 405
    text = http("GET", f"{server.url}/metrics")[1]
    assert 'method="PROPFIND"' not in text and 'method="other",status="405"' in text


def test_a_header_that_is_not_latin1_is_401(mem_table: Table, serve: Serve) -> None:
    instant = mem_table.start_commit(heartbeat=False)
    server = serve(mem_table, token="s3cret")
    pool = urllib3.PoolManager(retries=False, timeout=30)
    base = f"{server.url}/v1/markers/{instant}"
    routes = [("GET", f"{server.url}/metrics"), ("POST", f"{base}/create"),
              ("POST", f"{base}/details"), ("GET", base), ("GET", f"{base}/exists"),
              ("GET", f"{base}/has?file=f"), ("GET", f"{base}/created-and-merged"),
              ("POST", f"{base}/open"), ("POST", f"{base}/seal"), ("DELETE", base),
              ("GET", f"{server.url}/nowhere")]
    for value in (b"Bearer \xff\xfe", "Bearer s3cr\u00e9t".encode(), b"Bearer \xe2\x82\xac",
                  b"\xff s3cret", b"Bearer s3cret\xff"):
        for method, url in routes:
            response = pool.request(method, url, body=b'{"file": "f.parquet"}',
                                    headers={"Authorization": value})  # type: ignore[dict-item]
            assert response.status == 401, (value, method, url, response.data)
    client = MarkerClient(server.url, instant, token="s3cret")
    assert client.create("p", "f_w.parquet")
    assert client.all() == ["p/f_w.parquet.marker.CREATE"]


@pytest.mark.parametrize("token", ["caf\u00e9", "two words", "tab\there", "x\udcff"])
def test_a_token_that_cannot_travel_in_a_header_is_refused(mem_table: Table,
                                                          token: str) -> None:
    with pytest.raises(ConfigError, match="printable ASCII"):
        MarkerServer(mem_table, token=token)
