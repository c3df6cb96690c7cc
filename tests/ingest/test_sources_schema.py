"""Ingest sources and schemas, without Spark."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.s3 import MotoS3
from markerstore.errors import SourceError
from markerstore.ingest.blocks import read_blocks
from markerstore.ingest.infer import csv_headers
from markerstore.ingest.schema import SchemaError, avro_to_arrow, ddl_to_arrow, load_schema
from markerstore.ingest.sources import SourceTask, list_tasks, pack


def test_ddl_schema() -> None:
    schema = ddl_to_arrow("id BIGINT NOT NULL, name STRING, amount DECIMAL(10,2), "
                          "tags ARRAY<STRING>, pos STRUCT<x: DOUBLE, y: DOUBLE>, day DATE")
    assert schema.field("id").type == pa.int64() and not schema.field("id").nullable
    assert schema.field("amount").type == pa.decimal128(10, 2)
    assert schema.field("tags").type == pa.list_(pa.string())
    assert schema.field("pos").type == pa.struct([("x", pa.float64()), ("y", pa.float64())])
    assert schema.field("day").type == pa.date32()


def test_backquoted_names_hold_commas_and_brackets() -> None:
    """Spark's DDL quotes a name with backquotes: a comma or bracket there is part of it
    (a CSV header such as `a,b` read with another separator)."""
    schema = ddl_to_arrow("`a,b` STRING, `x<y)` INT, s STRUCT<`p,q`: INT, r: STRING>")
    assert schema.names == ["a,b", "x<y)", "s"]
    assert schema.field("s").type == pa.struct([("p,q", pa.int32()), ("r", pa.string())])


@pytest.mark.parametrize(("ddl", "fragment"), [
    ("", "empty"), ("id", "expected 'name TYPE'"), ("id BIGINTX", "unknown type 'BIGINTX'"),
    ("a INT, a INT", "appear twice"), ("d DECIMAL(60,2)", "precision 1..38"),
    ("a ARRAY<INT", "unbalanced brackets"), ("`a STRING", "unbalanced backquotes"),
])
def test_bad_ddl(ddl: str, fragment: str) -> None:
    with pytest.raises(SchemaError, match=fragment):
        ddl_to_arrow(ddl)


def test_avro_schema_file(tmp_path: Path) -> None:
    path = tmp_path / "s.avsc"
    path.write_text('{"type": "record", "name": "r", "fields": ['
                    '{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]},'
                    '{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}')
    schema = load_schema(str(path))
    assert schema.field("id").type == pa.int64() and not schema.field("id").nullable
    assert schema.field("note").nullable
    assert schema.field("ts").type == pa.timestamp("ms", tz="UTC")
    with pytest.raises(SchemaError, match="cannot read the schema file"):
        load_schema(str(tmp_path / "missing.avsc"))
    with pytest.raises(SchemaError, match="not valid JSON"):
        avro_to_arrow("{nope")
    with pytest.raises(SchemaError, match="invalid Avro schema"):
        avro_to_arrow({"type": "record", "name": "r", "fields": [{"name": "a", "type": "nah"}]})


def test_list_tasks_and_formats(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.csv").write_text("a\n1\n")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / ".hidden.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("x")
    tasks = list_tasks(str(tmp_path))
    assert [(t.url.rsplit("/", 1)[-1], t.format) for t in tasks] == [("a.jsonl", "json"),
                                                                     ("b.csv", "csv")]
    with pytest.raises(SourceError, match="does not exist"):
        list_tasks(str(tmp_path / "missing"))
    with pytest.raises(SourceError, match="holds no JSON, CSV or Parquet"):
        list_tasks(str(tmp_path / "notes.txt"))
    with pytest.raises(SourceError, match="unknown source format"):
        list_tasks(str(tmp_path), fmt="xml")


def test_byte_ranges_read_every_line_exactly_once(tmp_path: Path) -> None:
    lines = [f'{{"id": {i}, "pad": "{"x" * (i % 17)}"}}' for i in range(500)]
    path = tmp_path / "big.json"
    path.write_text("\n".join(lines) + "\n")
    for split in (7, 64, 100, 1000, 10**9):
        tasks = list_tasks(str(path), split_bytes=split)
        got = [text for task in tasks for block in read_blocks(task, block_bytes=50)
               for text in block.records.to_pylist()]
        assert got == lines, split
    whole = list_tasks(str(path))[0]
    blocks = list(read_blocks(whole, block_bytes=1000))
    assert (blocks[0].offsets[0], blocks[0].lines[0], blocks[-1].lines[-1]) == (0, 1, 500)


def test_a_large_csv_file_is_split_as_json_lines_are(tmp_path: Path) -> None:
    """As many ranges as a JSON-lines file of its size; a compressed one stays whole."""
    path = tmp_path / "big.csv"
    path.write_text("a,b\n" + "".join(f'{i},"x\n{i}"\n' for i in range(1000)))
    tasks = list_tasks(str(path), split_bytes=1000)
    assert len(tasks) == -(-path.stat().st_size // 1000) and tasks[0].start == 0
    assert [t.start for t in tasks] == list(range(0, path.stat().st_size, 1000))
    got = [text for task in tasks for block in read_blocks(task, block_bytes=64)
           for text in block.records.to_pylist()]
    assert got == ["a,b"] + [f'{i},"x\n{i}"' for i in range(1000)]
    packed = tmp_path / "big.csv.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert len(list_tasks(str(packed), split_bytes=1000)) == 1


def test_gzip_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.json.gz"
    with gzip.open(path, "wt") as handle:
        handle.write('{"a": 1}\n{"a": 2}\n')
    tasks = list_tasks(str(path), split_bytes=4)
    assert len(tasks) == 1 and tasks[0].format == "json"
    assert [t for b in read_blocks(tasks[0]) for t in b.records.to_pylist()] == [
        '{"a": 1}', '{"a": 2}']


def _sized(*sizes: int) -> list[SourceTask]:
    return [SourceTask(f"file:///s/{i}.json", "json", size=n) for i, n in enumerate(sizes)]


def test_pack_puts_small_splits_in_one_task_per_core() -> None:
    tasks = _sized(*[35] * 8)
    assert pack(tasks, cores=2, task_bytes=1000) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    # More bytes than a wave of tasks may read: whole waves of `cores` tasks.
    assert len(pack(tasks, cores=2, task_bytes=100)) == 4
    # Never more tasks than splits; a tiny task size gives one task per split.
    assert pack(tasks, cores=2, task_bytes=1) == [[i] for i in range(8)]
    assert pack(_sized(10), cores=8, task_bytes=1) == [[0]]
    # Empty files: every task still gets a split.
    assert pack(_sized(0, 0, 0), cores=2, task_bytes=1) == [[0, 2], [1]]


def test_pack_balances_bytes_largest_first() -> None:
    packed = pack(_sized(90, 10, 10, 10, 50, 40), cores=2, task_bytes=1000)
    assert sorted(sum((90, 10, 10, 10, 50, 40)[i] for i in p) for p in packed) == [100, 110]


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=60), st.integers(1, 16),
       st.integers(1, 10**10))
def test_pack_reads_every_split_once_in_balanced_waves(sizes: list[int], cores: int,
                                                       task_bytes: int) -> None:
    tasks = _sized(*sizes)
    packed = pack(tasks, cores, task_bytes)
    assert sorted(i for p in packed for i in p) == list(range(len(sizes)))
    assert all(p == sorted(p) and p for p in packed)
    waves = -(-sum(sizes) // (cores * task_bytes)) or 1
    assert len(packed) == min(len(sizes), cores * waves)
    loads = [sum(sizes[i] for i in p) for p in packed]
    # Largest first to the lightest task: no task exceeds another by more than a split.
    assert max(loads) - min(loads) <= max(sizes)


@pytest.mark.s3
def test_an_s3_source_is_listed_in_a_few_requests_and_its_headers_read_side_by_side(
        moto_s3: MotoS3, s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """40 files cost a listing, not a request each, and their CSV headers (read side by
    side) are each its own file's."""
    client = moto_s3.client()
    for i in range(40):
        client.put_object(Bucket=s3_bucket, Key=f"src/day={i % 3}/part-{i:02d}.csv",
                          Body=f"id,v{i}\n{i},x\n".encode())
    client.put_object(Bucket=s3_bucket, Key="src/_SUCCESS", Body=b"")
    options = moto_s3.storage_options(skip_instance_cache=True)  # a client of its own
    sent: list[str] = []
    hooked: set[int] = set()
    listed = fsspec.core.url_to_fs

    def counted(url: str, **kwargs: Any) -> Any:  # the filesystem list_tasks lists with
        fs, root = listed(url, **kwargs)
        if id(fs) not in hooked:
            hooked.add(id(fs))
            fs.connect()
            fs.s3.meta.events.register("before-send.s3",
                                       lambda **kw: sent.append(kw["event_name"]))
        return fs, root

    monkeypatch.setattr(fsspec.core, "url_to_fs", counted)
    tasks = list_tasks(f"s3://{s3_bucket}/src", options)
    assert len(tasks) == 40 and all(t.size == len(f"id,v{i}\n{i},x\n") for i, t in
                                    zip(sorted(range(40), key=lambda i: (i % 3, i)), tasks))
    assert 1 <= len(sent) <= 4, sent
    sent.clear()
    assert len(list_tasks(f"s3://{s3_bucket}/src/*/*.csv", options)) == 40
    assert 1 <= len(sent) <= 4, sent
    headers = csv_headers(tasks, moto_s3.storage_options())  # one client for them all
    assert {url: h.text for url, h in headers.items()} == {
        t.url: f"id,v{t.url.rsplit('-', 1)[1][:2].lstrip('0') or '0'}" for t in tasks}
    assert {h.start for h in headers.values()} == {0}
