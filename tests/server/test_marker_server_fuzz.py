"""A seeded fuzzer against a running marker server, beside clients doing real work.

Thousands of requests, mostly malformed (values that do not encode, wrong types, path
escapes, deep nesting, bytes that are not UTF-8 or not JSON, bad instants, headers that
are not Latin-1, deletes of markers that are not the server's to delete), while several
good clients create markers of the same instant. Asserts: no 5xx, the server stays up,
nothing is written outside the table, every good client succeeds, and the markers of the
other writer (direct) are untouched.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import urllib3

from markerstore import MarkerClient, Table
from markerstore.markers import DIRECT, read_marker_type
from markerstore.markers.segments import read_batched_table
from markerstore.server.app import MarkerServer

Serve = Callable[..., MarkerServer]
SEED = 20261122
TOKEN = "fuzz-token"
FUZZ_THREADS = 3
REQUESTS_PER_THREAD = 1500
GOOD_CLIENTS = 4
GOOD_MARKERS = 30

NASTY_STRINGS = [
    "", ".", "..", "../..", "../../victim", "/etc", "/abs/olute", "s3://other/x",
    "file:///etc/passwd", "a//b", "a\\b", "p\x00", "p\n", "\x7f", "\ud800", "a\udfff",
    "\udc80x", "MARKERS.type", "x.marker.CREATE", "day=1", "day=1/hour=2", "é", "日本",
    "\U0001f600", "x" * 300, "y" * 2000, "CREATE", "merge", "APPEND", "DELETE", " ",
    "%2e%2e", "\u202e", "null", "{}", "[]", '{"bucket": "b"}',
]
NASTY_NUMBERS = [0, 1, -1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63), -(2**63) - 1, 10**30,
                 0.5, -0.0, 1e308, True, False]
INSTANT_WORDS = ["..", "%2e%2e", "..%2F..", "2024", "abcdefghijklmnopq",
                 "20240101000000000x", "%ED%A0%80", "%FF%FE", "2024010100000000%00",
                 "99999999999999999", "00000000000000000"]
# The cases found by hand, sent first by every fuzzer thread: (method, route, body, headers).
KNOWN: list[tuple[str, str, Any, dict[str, Any]]] = [
    ("POST", "/create", {"file": "k_w.parquet", "size": 2**63}, {}),
    ("POST", "/create", {"file": "k_w.parquet", "size": 2**64}, {}),
    ("POST", "/create", {"file": "k_w.parquet", "checksum": "\ud800"}, {}),
    ("POST", "/create", {"file": "k_w.parquet", "task_attempt": "\ud800"}, {}),
    ("POST", "/details", {"file": "k_w.parquet", "pending_upload": "upload"}, {}),
    ("POST", "/create", {"file": "k\ud800_w.parquet"}, {}),
    ("POST", "/create", {"partition": "\ud800", "file": "k_w.parquet"}, {}),
    ("POST", "/create", {"partition": "../../victim", "file": "x.txt"}, {}),
    ("POST", "/create", b"[" * 3000, {}),
    ("GET", "", None, {"Authorization": b"Bearer \xff\xfe"}),
    ("POST", "/create", {"file": "k_w.parquet"}, {"Authorization": b"Bearer \xe2\x82\xac"}),
    ("DELETE", "", None, {}),  # the good instant: inflight, not sealed
    ("DELETE", "direct", None, {}),  # the other writer's direct markers
]
ROUTES = [("POST", "/create"), ("POST", "/details"), ("GET", ""), ("GET", "/exists"),
          ("GET", "/has"), ("GET", "/created-and-merged"), ("POST", "/open"),
          ("DELETE", ""), ("POST", "/seal"), ("PUT", "/create"), ("GET", "/nope")]


class Fuzzer:
    """One thread's seeded request generator."""

    def __init__(self, seed: int, url: str, instants: dict[str, str]) -> None:
        self.rng = random.Random(seed)
        self.url = url
        self.instants = instants
        self.pool = urllib3.PoolManager(retries=False, timeout=30, maxsize=2)

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        kind = rng.randrange(8 if depth < 3 else 5)
        if kind == 0:
            return rng.choice(NASTY_STRINGS)
        if kind == 1:
            return rng.choice(NASTY_NUMBERS)
        if kind == 2:
            return None
        if kind == 3:
            return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(9)))
        if kind == 4:
            return rng.randrange(-10, 10**6)
        if kind == 5:
            return [self.value(depth + 1) for _ in range(rng.randrange(4))]
        if kind == 6:
            return {rng.choice(NASTY_STRINGS + ["bucket", "key", "upload_id", "parts",
                                                "size", "file"]): self.value(depth + 1)
                    for _ in range(rng.randrange(4))}
        return self.upload()

    def upload(self) -> dict[str, Any]:
        upload: dict[str, Any] = {"bucket": "b", "key": "t/k", "upload_id": "u",
                                  "parts": [[1, "e"]], "size": 1}
        if self.rng.random() < 0.7:
            upload[self.rng.choice(list(upload))] = self.value(2)
        return upload

    def marker(self) -> dict[str, Any]:
        rng = self.rng
        body: dict[str, Any] = {"partition": f"f={rng.randrange(50)}",
                                "file": f"fz{rng.randrange(10**6)}_w.parquet"}
        for key in ("io_type", "task_attempt", "size", "checksum", "pending_upload"):
            if rng.random() < 0.3:
                body[key] = {"io_type": "CREATE", "task_attempt": "1.0", "size": 10,
                             "checksum": "c", "pending_upload": None}[key]
        for _ in range(rng.choice([0, 0, 1, 1, 1, 2, 3])):  # break some fields
            key = rng.choice(["partition", "file", "io_type", "task_attempt", "size",
                              "checksum", "pending_upload", "owner"])
            body[key] = self.value() if key != "pending_upload" or rng.random() < 0.5 \
                else self.upload()
        if rng.random() < 0.05:
            body.pop("file")
        return body

    def body(self) -> bytes:
        rng = self.rng
        kind = rng.randrange(12)
        if kind <= 5:
            return json.dumps(self.marker()).encode()
        if kind <= 7:
            markers = [self.marker() for _ in range(rng.randrange(1, 6))]
            return json.dumps({"markers": markers}).encode()
        if kind == 8:
            return json.dumps(self.value()).encode()
        if kind == 9:
            return rng.choice([b"[" * 3000, b"{" * 5000, b'{"a":' * 2000, b"[" * 100_000,
                               b'{"file": "f.parquet", "size": NaN}', b"\xef\xbb\xbf{}",
                               b'{"file": "a\xff"}', b'{"file": "f", "size": 1' + b"0" * 5000
                               + b"}", b"", b"null", b'"\\ud800"', b"{\"markers\": {}}"])
        data = bytearray(json.dumps(self.marker()).encode())
        for _ in range(rng.randrange(1, 4)):  # flip a few bytes
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)

    def instant(self) -> str:
        rng = self.rng
        pick = rng.random()
        if pick < 0.55:
            return self.instants["good"]
        if pick < 0.65:
            return self.instants["direct"]
        if pick < 0.7:
            return self.instants["completed"]
        if pick < 0.85:
            return f"{rng.randrange(10**16, 10**17)}"
        return rng.choice(INSTANT_WORDS)

    def headers(self) -> dict[str, Any]:
        rng = self.rng
        headers: dict[str, Any] = {"Content-Type": rng.choice(
            ["application/json", "application/json; charset=latin-1", "text/plain",
             "application/json; charset=nonsense"])}
        pick = rng.random()
        if pick < 0.85:
            headers["Authorization"] = f"Bearer {TOKEN}"
        elif pick < 0.9:
            headers["Authorization"] = rng.choice([b"Bearer \xff\xfe", b"Bearer \xe2\x82\xac",
                                                   "Bearer fuzz-tok\u00e9n".encode(),
                                                   b"\xff " + TOKEN.encode()])
        elif pick < 0.95:
            headers["Authorization"] = rng.choice(["Bearer", "Basic x", "Bearer  ", ""])
        if rng.random() < 0.2:
            headers["X-Request-Id"] = rng.choice(["r1", "x" * 200, "a b", "é"])
        return headers

    def query(self) -> str:
        rng = self.rng
        parts = []
        for key in ("file", "partition", "io_type", "details"):
            if rng.random() < 0.6:
                value = rng.choice(["f.parquet", "..", "%2F", "%00", "%ED%A0%80", "%FF",
                                    "a%2F..%2F..", "CREATE", "1", "x" * 2000, ""])
                parts.append(f"{key}={value}")
        return "?" + "&".join(parts) if parts else ""

    def known(self, case: tuple[str, str, Any, dict[str, Any]]) -> tuple[str, int, bytes]:
        method, route, body, extra = case
        instant = self.instants["good"]
        if route == "direct":
            route, instant = "", self.instants["direct"]
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {TOKEN}", **extra}
        return self.send(method, f"{self.url}/v1/markers/{instant}{route}", data, headers)

    def send(self, method: str, url: str, body: bytes | None, headers: dict[str, Any]
             ) -> tuple[str, int, bytes]:
        response = self.pool.request(method, url, body=body, headers=headers)
        what = f"{method} {url[len(self.url):][:120]} {body[:120] if body else b''!r}"
        return what, response.status, response.data

    def one(self) -> tuple[str, int, bytes]:
        rng = self.rng
        method, route = rng.choice(ROUTES)
        instant = self.instant()
        if method == "POST" and route == "/seal" and instant == self.instants["good"]:
            route = "/open"  # sealing is the good writer's own business
        url = f"{self.url}/v1/markers/{instant}{route}"
        if route in ("", "/has"):
            url += self.query()
        body = self.body() if method in ("POST", "PUT") else None
        return self.send(method, url, body, self.headers())


@pytest.mark.campaign
def test_fuzzed_requests_never_5xx_and_never_hurt_good_clients(tmp_path: Path,
                                                               serve: Serve) -> None:
    root = tmp_path / "t"
    table = Table(str(root))
    good = table.start_commit(heartbeat=False)
    direct = table.start_commit(heartbeat=False)
    completed = table.start_commit(heartbeat=False)
    table.commit(completed, [])
    partial = f"fid1_0-1-0_{direct}.parquet"
    table.markers(direct).create("day=1", partial)
    (root / "day=1").mkdir(parents=True, exist_ok=True)
    (root / "day=1" / partial).write_bytes(b"PAR1 half a file")
    server = serve(table, token=TOKEN)
    driver = MarkerClient(server.url, good, token=TOKEN)
    instants = {"good": good, "direct": direct, "completed": completed}

    five_hundreds: list[str] = []
    bad_answers: list[str] = []
    good_deletes: list[int] = []
    failures: list[BaseException] = []
    created: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def fuzz(index: int) -> None:
        fuzzer = Fuzzer(SEED + index, server.url, instants)
        try:
            for n in range(REQUESTS_PER_THREAD):
                what, status, data = fuzzer.known(KNOWN[n]) if n < len(KNOWN) \
                    else fuzzer.one()
                if status >= 500:
                    five_hundreds.append(f"{status} {what}: {data[:300]!r}")
                elif status != 200:
                    answer = json.loads(data)
                    if not (set(answer) == {"error", "message"} and "\n" not in
                            answer["message"] and len(answer["message"]) < 2000):
                        bad_answers.append(f"{status} {what}: {data[:300]!r}")
                if what.startswith(f"DELETE /v1/markers/{good}"):
                    good_deletes.append(status)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    def work(worker: int) -> None:
        client = MarkerClient(server.url, good, token=TOKEN, initialize=False)
        try:
            i = 0
            while i < GOOD_MARKERS or not done.is_set():
                partition, name = f"w={worker}", f"g{i}_w.parquet"
                if i % 3 == 2:
                    assert client.create_many([(partition, name), (partition, "x" + name)]) \
                        == [True, True]
                    names = [name, "x" + name]
                else:
                    assert client.create(partition, name, task_attempt=f"{worker}.0")
                    names = [name]
                if i % 5 == 0:
                    client.update(partition, name, size=7, checksum="c", pending_upload={
                        "bucket": "b", "key": f"t/{partition}/{name}", "upload_id": "u",
                        "parts": [[1, "e"]], "size": 7})
                with lock:
                    created.extend(f"{partition}/{n}.marker.CREATE" for n in names)
                i += 1
                time.sleep(0.002)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    started = time.monotonic()
    fuzzers = [threading.Thread(target=fuzz, args=(i,)) for i in range(FUZZ_THREADS)]
    workers = [threading.Thread(target=work, args=(w,)) for w in range(GOOD_CLIENTS)]
    for t in workers + fuzzers:
        t.start()
    for t in fuzzers:
        t.join()
    done.set()
    for t in workers:
        t.join()
    elapsed = time.monotonic() - started

    assert failures == []
    assert five_hundreds == []
    assert bad_answers == []
    assert good_deletes and set(good_deletes) <= {401, 409}
    # the server is up and still serves the good writer
    pool = urllib3.PoolManager(retries=False, timeout=30)
    assert pool.request("GET", f"{server.url}/health").status == 200
    assert set(created) <= set(driver.all())
    assert len(created) >= GOOD_CLIENTS * GOOD_MARKERS
    rows = read_batched_table(table.storage, good).to_pylist()
    on_storage = {f"{r['partition']}/{r['file']}.marker.{r['io_type']}" for r in rows}
    assert on_storage == set(driver.all())
    # the other writer's direct markers are untouched, and nothing escaped the table
    assert read_marker_type(table.storage, direct) == DIRECT
    assert table.markers(direct).all() == [f"day=1/{partial}.marker.CREATE"]
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")
                   if p.is_file())
    assert [f for f in files if not f.startswith("t/.markerstore/")] == [
        f"t/day=1/{partial}"]
    # requests for unknown instants held nothing
    assert set(server.service.states) <= {good, direct, completed}
    assert elapsed < 60, elapsed
