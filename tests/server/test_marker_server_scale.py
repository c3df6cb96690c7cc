"""The marker server's compact state (issue 13): keys instead of names, segments as bytes.

The dedupe state must answer exactly as a Python set of names would; a streamed GET
must return every marker once; a restarted server must hold exactly what the first one
acknowledged. Speed and memory are measured in benchmarks/bench_scale.py, not here.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
import urllib3

from markerstore import Table
from markerstore.markers.segments import read_batched_table
from markerstore.server import keys as keys_module
from markerstore.server import state as state_module
from markerstore.server.app import MarkerServer
from markerstore.server.client import MarkerClient
from markerstore.server.keys import KeySet, key_of, keys_of, names_of
from markerstore.server.state import file_id_key, file_ids_of

Serve = Callable[..., MarkerServer]
SEED = 20261122


def _name(rng: random.Random) -> str:
    partition = rng.choice(["", "p=1", "p=2/q=é", "日付=2024-01-01", "a b"])
    file_name = f"{rng.randrange(400)}_{rng.choice(['w', 'x'])}.parquet"
    io = rng.choice(["CREATE", "MERGE", "APPEND"])
    return f"{partition}/{file_name}.marker.{io}" if partition else f"{file_name}.marker.{io}"


def test_keyset_dedupes_exactly_like_a_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random adds (one by one, in batches, and vectorized from Arrow), with merges into
    the sorted arrays every few keys, against a Python set and dict (fixed seed)."""
    monkeypatch.setattr(keys_module, "MERGE_AT", 37)
    rng = random.Random(SEED)
    keys, names, values = KeySet(), set(), {}
    for step in range(400):
        how = rng.random()
        batch = [_name(rng) for _ in range(rng.randrange(1, 60))]
        if how < 0.4:
            for name in batch:
                value = rng.randrange(0, 5)
                assert keys.add(key_of(name), value) == (name not in names)
                names.add(name)
                if value or name not in values:
                    values[name] = value or values.get(name, 0)
        elif how < 0.7:
            vals = [rng.randrange(0, 5) for _ in batch]
            keys.add_many([key_of(n) for n in batch], vals)
            for name, value in zip(batch, vals, strict=True):
                names.add(name)
                if value or name not in values:
                    values[name] = value or values.get(name, 0)
        else:
            fresh = len(set(batch) - names)
            assert keys.add_arrays(keys_of(pa.array(batch))) == fresh
            for name in batch:
                names.add(name)
                values.setdefault(name, 0)
        probe = [_name(rng) for _ in range(30)]
        assert len(keys) == len(names), step
        assert [n in keys for n in probe] == [n in names for n in probe], step
        assert keys.contains_many([key_of(n) for n in probe]) == [n in names for n in probe]
    keys.merge()
    assert len(keys) == len(names)
    assert all(name in keys for name in names)
    assert {n: keys.value(key_of(n)) for n in names} == values
    assert keys >= names
    assert "never/added.parquet.marker.CREATE" not in keys
    keys.clear()
    assert len(keys) == 0 and not any(n in keys for n in names)


def test_vectorized_keys_and_names_match_one_by_one() -> None:
    rng = random.Random(SEED)
    rows = []
    for _ in range(3000):  # more than keys.SMALL: DuckDB hashes them
        partition = rng.choice(["", "p=1", "p=2/q=é", "日付=2024-01-01"])
        rows.append((partition, f"{rng.randrange(10**6)}_{rng.randrange(9)}-1-0.parquet",
                     rng.choice(["CREATE", "MERGE", "APPEND"])))
    table = pa.table({"partition": [r[0] for r in rows], "file": [r[1] for r in rows],
                      "io_type": [r[2] for r in rows]})
    names = names_of(table).to_pylist()
    assert names == [f"{p}/{f}.marker.{io}" if p else f"{f}.marker.{io}" for p, f, io in rows]
    assert len(names) > keys_module.SMALL
    vectorized = keys_of(pa.array(names)).astype(">u8").tobytes()
    assert vectorized == b"".join(key_of(n) for n in names)
    small = keys_of(pa.array(names[:10])).astype(">u8").tobytes()
    assert small == b"".join(key_of(n) for n in names[:10])
    ids = keys_of(file_ids_of(table)).astype(">u8").tobytes()
    assert ids == b"".join(file_id_key(p, f.split("_", 1)[0]) for p, f, _ in rows)


def _stream(url: str) -> tuple[dict[str, Any], dict[str, str]]:
    response = urllib3.PoolManager(retries=False, timeout=60).request("GET", url)
    assert response.status == 200
    return json.loads(response.data), dict(response.headers)


def test_streamed_get_returns_every_marker_once(tmp_path: Any, serve: Serve,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "BATCH_ROWS", 97)  # many pieces per segment
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table, options={"markerstore.markers.batch.max_segments": 4})
    client = MarkerClient(server.url, instant)
    expected = set()
    for call in range(12):
        batch = [(f"p={call % 3}", f"f{call}-{i}_w.parquet") for i in range(250)]
        assert client.create_many(batch) == [True] * len(batch)
        expected |= {f"{p}/{f}.marker.CREATE" for p, f in batch}
    assert client.create_many([("p=0", "f0-0_w.parquet")]) == [False]  # deduped
    answer, headers = _stream(f"{server.url}/v1/markers/{instant}")
    assert headers.get("Transfer-Encoding") == "chunked"
    assert answer["instant"] == instant
    assert len(answer["markers"]) == len(expected) == 3000
    assert set(answer["markers"]) == expected
    assert client.all() == sorted(expected)
    # details: one row per marker, every column, created_at in milliseconds
    client.update("p=1", "f1-7_w.parquet", size=42, checksum="c")  # a second row of one
    rows, _ = _stream(f"{server.url}/v1/markers/{instant}?details=true")
    assert len(rows["rows"]) == 3000
    by_name = {f"{r['partition']}/{r['file']}.marker.{r['io_type']}": r for r in rows["rows"]}
    assert set(by_name) == expected
    assert by_name["p=1/f1-7_w.parquet.marker.CREATE"]["size"] == 42
    assert all(isinstance(r["created_at"], int) for r in rows["rows"])
    assert len(client.all()) == 3000  # the overlapping segments are deduplicated
    assert client.to_arrow().num_rows == 3000
    assert client.created_and_merged_paths() == {n.split(".marker.")[0] for n in expected}
    # an instant without markers streams an empty list
    other = table.start_commit(heartbeat=False)
    assert _stream(f"{server.url}/v1/markers/{other}")[0] == {"instant": other, "markers": []}


def test_reload_after_restart_holds_the_same_set(tmp_path: Any, serve: Serve,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "BATCH_ROWS", 101)
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    options = {"markerstore.markers.batch.interval_ms": 5}
    first = MarkerServer(table, options=options)
    first.start()
    try:
        client = MarkerClient(first.url, instant)
        rng = random.Random(SEED)
        created = set()
        for _ in range(15):
            batch = [(f"d={rng.randrange(7)}", f"f{rng.randrange(5000)}_w.parquet")
                     for _ in range(300)]
            client.create_many(batch)
            created |= {f"{p}/{f}.marker.CREATE" for p, f in batch}
        before = client.all()
        held = len(first.service.states[instant].names)
    finally:
        first.stop()
    assert before == sorted(created) and held == len(created)
    second = serve(Table(str(tmp_path / "t")))
    client = MarkerClient(second.url, instant)
    assert client.all() == before
    state = second.service.states[instant]
    assert len(state.names) == len(created) and state.names >= created
    assert sum(s.num_rows for s in state.segments) == len(created)
    # every marker it loaded is deduped; new ones are created
    again = [tuple(n.split(".marker.")[0].split("/")) for n in sorted(created)[:500]]
    assert client.create_many(again) == [False] * len(again)
    assert client.create_many([("d=9", "new_w.parquet")]) == [True]
    on_storage = read_batched_table(table.storage, instant)
    assert on_storage.num_rows == len(created) + 1
