"""Ingest sources and schemas, without Spark."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pytest

from markerstore.ingest.schema import SchemaError, avro_to_arrow, ddl_to_arrow, load_schema
from markerstore.ingest.sources import SourceError, list_tasks, read_lines


def test_ddl_schema() -> None:
    schema = ddl_to_arrow("id BIGINT NOT NULL, name STRING, amount DECIMAL(10,2), "
                          "tags ARRAY<STRING>, pos STRUCT<x: DOUBLE, y: DOUBLE>, day DATE")
    assert schema.field("id").type == pa.int64() and not schema.field("id").nullable
    assert schema.field("amount").type == pa.decimal128(10, 2)
    assert schema.field("tags").type == pa.list_(pa.string())
    assert schema.field("pos").type == pa.struct([("x", pa.float64()), ("y", pa.float64())])
    assert schema.field("day").type == pa.date32()


@pytest.mark.parametrize(("ddl", "fragment"), [
    ("", "empty"), ("id", "expected 'name TYPE'"), ("id BIGINTX", "unknown type 'BIGINTX'"),
    ("a INT, a INT", "appear twice"), ("d DECIMAL(60,2)", "precision 1..38"),
    ("a ARRAY<INT", "unbalanced"),
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
        got = [text for task in tasks for _, _, text in read_lines(task)]
        assert got == lines, split
    whole = list_tasks(str(path))[0]
    numbered = list(read_lines(whole))
    assert numbered[0][:2] == (0, 1) and numbered[-1][1] == 500


def test_csv_is_never_split(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("a,b\n" + "".join(f"{i},x\n" for i in range(1000)))
    tasks = list_tasks(str(path), split_bytes=100)
    assert len(tasks) == 1 and tasks[0].whole_file


def test_gzip_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "x.json.gz"
    with gzip.open(path, "wt") as handle:
        handle.write('{"a": 1}\n{"a": 2}\n')
    tasks = list_tasks(str(path), split_bytes=4)
    assert len(tasks) == 1 and tasks[0].format == "json"
    assert [t for _, _, t in read_lines(tasks[0])] == ['{"a": 1}', '{"a": 2}']
