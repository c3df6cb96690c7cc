"""The vectorized ingest reader against the per-record reference
(tests/support/ingest_reference.py): identical good rows and identical error rows (reason,
line, record text, fingerprint) over inputs with every kind of bad line, whole files and
byte ranges, JSON and CSV. The ingest against Spark's own readers, over a corpus from the
specifications: tests/ingest/test_spark_differential.py."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import errortable
from markerstore.commit import TaskSpec
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.sources import SourceTask, list_tasks
from markerstore.ingest.task import IngestTask
from tests.support import ingest_reference as reference

DDL = ("id BIGINT, i32 INT, s STRING, d DOUBLE, f FLOAT, b BOOLEAN, dt DATE, "
       "ts TIMESTAMP, dec DECIMAL(10,2), bin BINARY, day STRING")
CHECKS = {"non_negative": "d >= 0", "short": "length(s) < 40"}


def _good(i: int, rng: random.Random) -> dict[str, Any]:
    return {"id": i, "i32": rng.randrange(-2**31, 2**31), "s": f"name {i} é",
            "d": rng.uniform(0, 1e6) * rng.choice([1, 1e-9, 1e12]),
            "f": rng.uniform(0, 100), "b": rng.random() < 0.5,
            "dt": f"2026-0{1 + i % 9}-1{i % 10}", "ts": f"2026-11-19T0{i % 10}:00:00+00:00",
            "dec": f"{i % 1000}.{i % 100:02d}", "bin": "eHl6", "day": f"2026-11-{10 + i % 3}"}


def _variants(row: dict[str, Any]) -> list[bytes]:
    """The bad (or odd) lines built from one good row."""
    text = json.dumps(row)
    odd: list[Any] = [
        text[:-7], text[:-1] + ",}", "[1, 2]", '"just a string"', "5", "null", "",
        "   ", "\t", text + "\r", "  " + text + "  ",
        text.replace('"s": ', '"s": "dup", "s": '), {**row, "extra": 1},
        {**row, "d": float("nan")}, text.replace(f'"d": {json.dumps(row["d"])}', '"d": NaN'),
        text.replace(f'"d": {json.dumps(row["d"])}', '"d": Infinity'),
        {**row, "d": 1e400 if False else 1e308 * 10}, {**row, "f": 1e39},
        {**row, "id": 2**70}, {**row, "i32": 2**31}, {**row, "id": 2**53 + 1, "d": 2**53 + 1},
        {**row, "d": 2**53}, {**row, "id": 1.0}, {**row, "id": 1.5}, {**row, "id": "12"},
        {**row, "id": "twelve"}, {**row, "id": True}, {**row, "s": 5}, {**row, "s": None},
        {**row, "s": {"nested": 1}}, {**row, "s": [1, 2]}, {**row, "b": 1}, {**row, "b": "true"},
        {**row, "d": "1.5"}, {**row, "d": "x"}, {**row, "dt": 20260101},
        {**row, "dt": "2026-02-30"}, {**row, "dt": "2026-1-5"},
        {**row, "ts": "2026-11-19T05:00:00"},
        {**row, "ts": "2026-11-19 05:00:00Z"}, {**row, "dec": 1.5}, {**row, "dec": "1.234"},
        {**row, "dec": "123456789.1"}, {**row, "bin": 7}, {**row, "id": None},
        {**row, "day": None}, {**row, "day": "a/b"}, {**row, "day": ".."}, {**row, "day": ""},
        {**row, "d": -1.0}, {**row, "s": "x" * 50}, {k: v for k, v in row.items() if k != "f"},
        {**row, "s": "caf\u00e9 \ud83d\ude00"}, {**row, "s": "tab\there"},
    ]
    lines = []
    for item in odd:
        if isinstance(item, dict):
            lines.append(json.dumps(item).encode())
        else:
            lines.append(item.encode())
    lines += [text.replace('"s": "', '"s": "\\ud800').encode(),
              text.replace('"s": "', '"s": "\\u00e9\\"').encode(),
              text.replace('"s": "', '"s": "\x01').encode(),
              text.encode().replace(b"name", b"na\xff\xfeme"),
              text.encode().replace(b'"id"', b'"i\xc3d"'),
              text.encode()[:-1] + b"\xe2\x82",
              b'{"id": 1, "day": "2026-11-10", "d": 1e400}',
              b'{"id": 1, "day": "2026-11-10", "d": 1.0, "nested": {"a": [1,]}}',
              # hostile: deep nesting, a key twice deep down, a huge exponent, NaN and a
              # value for a STRING column, each in a known or an ignored field; a BOM
              text.replace('"s": ', '"s": ' + "[" * 600 + "]" * 600 + ', "x": ').encode(),
              text.replace('"s": ', '"x": {"k": 1, "k": 2}, "s": ').encode(),
              text.replace('"s": ', '"x": [-1E+999], "s": ').encode(),
              text.replace('"s": ', '"x": NaN, "s": ').encode(),
              json.dumps({**row, "x": [[1]], "s": {"a": [1, 2.5]}}).encode(),
              b"\xef\xbb\xbf" + text.encode()]
    return lines


def _json_lines(rows: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    lines: list[bytes] = []
    for i in range(rows):
        row = _good(i, rng)
        if rng.random() < 0.05:
            variants = _variants(row)
            lines.append(variants[i % len(variants)])
        else:
            lines.append(json.dumps(row).encode())
    for i, extra in enumerate(_variants(_good(rows, rng))):  # every kind at least once
        lines.insert(7 * i + 3, extra)
    return lines


def _new_reader(schema: pa.Schema, validator: Any) -> IngestTask:
    spec = TaskSpec("file:///unused", "i", "u", "direct")
    return IngestTask(spec, validator, errortable.CaptureContext, block_bytes=4096)


def _run(tasks: list[SourceTask], validator: Any, header: str | None,
         ) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], list[tuple[str, ...]],
                    list[tuple[str, ...]]]:
    new = _new_reader(validator.target_schema, validator)
    old_good, old_errors, new_good, new_errors = [], [], [], []
    for task in tasks:
        ctx = errortable.CaptureContext(task_attempt="t", source_file=task.url)
        for good, errors in reference.read(task, header, validator, ctx,
                                           options=new.parse_options):
            old_good += _rows(pa.Table.from_batches([good]))
            old_errors += [_error(e) for e in errors]
        for table, error_rows in new.results(task, header, ctx):
            new_good += _rows(table)
            if error_rows is not None:
                new_errors += [_error(reference._jsonable(e)) for e in error_rows.to_pylist()]
    return sorted(old_good), sorted(new_good), sorted(old_errors), sorted(new_errors)


def _rows(table: pa.Table) -> list[tuple[str, ...]]:
    """Rows as comparable tuples (dates and times as their integers: the reference keeps
    values Python's datetime cannot hold)."""
    table = table.combine_chunks()
    table = pa.table({f.name: _as_int(table.column(f.name)) if pa.types.is_temporal(f.type)
                      else table.column(f.name) for f in table.schema})
    out = []
    for row in table.to_pylist():
        out.append(tuple(repr(v) if not (isinstance(v, float) and math.isnan(v)) else "nan"
                         for v in row.values()))
    return out


def _as_int(column: pa.ChunkedArray) -> pa.Array:
    array = column.combine_chunks()
    return array.view(pa.int32() if pa.types.is_date32(array.type) else pa.int64())


def _error(record: dict[str, Any]) -> tuple[str, ...]:
    """An error record as compared: every field but its uuid and time, the whole context
    (the key and partition path it names, the column, the check, the message) but the
    byte offset, which only the ingest's reader knows."""
    context = dict(record["context"])
    context.pop("sourceOffset", None)
    return (context["reason"], context.get("sourceLine", ""), str(record["record"]),
            context.get("fingerprint", ""), context.get("sourceFile", ""),
            context.get("column", ""), context.get("check", ""), str(record.get("message")),
            str(record.get("schema")), json.dumps(sorted(context.items())))


def _assert_same(tasks: list[SourceTask], validator: Any, header: str | None = None
                 ) -> tuple[int, int]:
    old_good, new_good, old_errors, new_errors = _run(tasks, validator, header)
    assert new_good == old_good
    assert new_errors == old_errors
    return len(new_good), len(new_errors)


def test_json_every_kind_of_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(b"\n".join(_json_lines(3000, 1)) + b"\n")
    schema = ddl_to_arrow(DDL)
    validator = errortable.Validator(schema, "id", ["day"], CHECKS)
    good, bad = _assert_same(list_tasks(str(path)), validator)
    assert good > 2500 and bad > 100
    kinds = {e[0] for e in _run(list_tasks(str(path)), validator, None)[3]}
    assert {"parse", "cast", "key", "partition", "check", "schema"} <= kinds


def test_json_byte_ranges_and_no_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(b"\r\n".join(_json_lines(1500, 2)))
    schema = ddl_to_arrow(DDL)
    validator = errortable.Validator(schema, "id", ["day"], CHECKS)
    for split in (997, 10_000):
        tasks = list_tasks(str(path), split_bytes=split)
        assert len(tasks) > 1
        _assert_same(tasks, validator)


def test_json_extra_columns_ignored_and_no_checks(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(b"\n".join(_json_lines(1000, 3)))
    validator = errortable.Validator(ddl_to_arrow(DDL), extra_columns="ignore")
    _assert_same(list_tasks(str(path)), validator)


def test_json_nested_types_go_the_reference_way(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_text('{"a": [1, 2], "b": {"x": 1}}\n{"a": "no"}\n{"a": [3]}\n\n')
    validator = errortable.Validator(ddl_to_arrow("a ARRAY<BIGINT>, b STRUCT<x: INT>"))
    assert _assert_same(list_tasks(str(path)), validator) == (2, 1)


CSV_DDL = "id BIGINT, name STRING, score DOUBLE, ok BOOLEAN, day DATE"


def _csv_text(rows: int, seed: int) -> bytes:
    rng = random.Random(seed)
    odd = ['1,"a, with comma",1.5,true,2026-01-01', '2,"multi\nline",2.5,false,2026-01-02',
           '3,"say ""hi""",3,1,2026-01-03', "4,x,nope,true,2026-01-04", "5,x,1.5,maybe,2026-01-05",
           "6,x,1.5,true,2026-02-30", "7,x,1.5", "8,x,1.5,true,2026-01-01,extra", "", "   ",
           ",x,1.5,true,2026-01-01", '9,a"b,1,true,2026-01-01', '10,"a"b,1,true,2026-01-01',
           '11, "a",1,true,2026-01-01', "12,,,,", "13,x,-2,true,2026-01-01",
           "14,x,1e400,true,2026-01-01", "15,x, 1.5,true,2026-01-01", "16,x,1.5,TRUE,2026-01-01",
           '17,"",1,true,2026-01-01', "18,x\r,1,true,2026-01-01", "x,y,1,true,2026-01-01",
           "99999999999999999999,x,1,true,2026-01-01", '"19",x,1,true,2026-01-01']
    lines = ["id,name,score,ok,day"]
    for i in range(rows):
        if rng.random() < 0.1:
            lines.append(odd[i % len(odd)])
        else:
            lines.append(f"{i},name {i},{rng.uniform(0, 100)},{rng.random() < 0.5},"
                         f"2026-11-{10 + i % 3}")
    lines[5:5] = odd
    data = "\r\n".join(lines).encode()
    return data.replace(b"name 7,", b"na\xffme 7,")


def test_csv_every_kind_of_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(_csv_text(2000, 4))
    validator = errortable.Validator(ddl_to_arrow(CSV_DDL), "id", [], {"pos": "score >= 0"})
    tasks = list_tasks(str(path))
    good, bad = _assert_same(tasks, validator, reference_header(path))
    assert good > 1700 and bad > 50


@pytest.mark.parametrize("redact", [(), ("name",)])
def test_csv_values_that_do_not_cast_against_the_reference(tmp_path: Path,
                                                            redact: tuple[str, ...]) -> None:
    """A value that does not cast fails its row in the vectorized pass with the record
    the reference gives it: the key and the partition path read from the text where the
    key's or the partition's own value does not cast, the message, and a redacted
    payload under a PII policy."""
    from errortable.config import ErrorTableConfig

    path = tmp_path / "in.csv"
    path.write_bytes(_csv_text(1500, 8))
    validator = errortable.Validator(ddl_to_arrow(CSV_DDL), "id", ["day"],
                                     {"pos": "score >= 0", "named": "name <> 'x'"},
                                     config=ErrorTableConfig(redact=redact))
    good, bad = _assert_same(list_tasks(str(path)), validator, reference_header(path))
    assert good > 1200 and bad > 100


def reference_header(path: Path) -> str:
    """The header line as ingest's driver reads it (first line, decoded, no line end)."""
    first = path.read_bytes().split(b"\n", 1)[0]
    return first.decode("utf-8", "replace").rstrip("\r\n")


@pytest.mark.parametrize("text", [b"", b"id,name\n", b"id,name", b"\n\n", b"name,id\r\n1,2\r\n"])
def test_csv_header_only_empty_and_reordered(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(text)
    validator = errortable.Validator(ddl_to_arrow("id BIGINT, name STRING"), "id")
    _assert_same(list_tasks(str(path)), validator, reference_header(path))


def test_csv_unknown_header_column(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_bytes(b"id,other\n1,2\n3,4\n")
    validator = errortable.Validator(ddl_to_arrow("id BIGINT, name STRING"))
    assert _assert_same(list_tasks(str(path)), validator, reference_header(path)) == (0, 2)


def test_empty_json_file(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(b"")
    validator = errortable.Validator(ddl_to_arrow("id BIGINT"))
    assert _assert_same(list_tasks(str(path)), validator) == (0, 0)


def test_parquet_source(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [1, None, 3], "name": ["a", "b", None]}),
                   str(tmp_path / "in.parquet"))
    validator = errortable.Validator(ddl_to_arrow("id BIGINT, name STRING"), "id")
    assert _assert_same(list_tasks(str(tmp_path / "in.parquet")), validator) == (2, 1)


def test_the_vectorized_pass_takes_the_plain_lines(tmp_path: Path) -> None:
    """The comparison above means something only if the fast pass decides most lines:
    plain lines are never suspects, and each kind of odd line is."""
    from markerstore.ingest.blocks import split_records
    from markerstore.ingest.parse import csv_pattern, csv_text, json_query, parse_json
    from markerstore.values.csv import Dialect

    def split_lines(data: bytes) -> pa.Array:
        return split_records(data).records

    rng = random.Random(5)
    schema = ddl_to_arrow(DDL)
    plain = b"\n".join(json.dumps(_good(i, rng)).encode() for i in range(500))
    parsed = parse_json(split_lines(plain), schema, json_query(schema, False))
    assert parsed.table.num_rows == 500 and len(parsed.suspects) == 0
    odd = b"\n".join(_variants(_good(1, rng))[:9])
    assert len(parse_json(split_lines(odd), schema, json_query(schema, False)).suspects) == 9
    text = "\n".join(f'{i},"n, {i}",{i / 3},true,2026-01-0{1 + i % 9}' for i in range(300))
    parsed = csv_text(split_lines(text.encode()), ddl_to_arrow(CSV_DDL),
                      ["id", "name", "score", "ok", "day"], False, dialect=Dialect())
    assert parsed.table.num_rows == 300 and len(parsed.suspects) == 0
    good, failed = errortable.Validator(ddl_to_arrow(CSV_DDL)).split_text(
        parsed.table, None, None, lambda rows: ["{}"] * len(rows))
    assert good.num_rows == 300 and failed.num_rows == 0
    lines = pa.array(["a,b", '"a,b",c', "a;b", "a,b,c", 'a"b,c'])
    assert pc.match_substring_regex(lines, csv_pattern(2)).to_pylist() == [
        True, True, False, False, False]
    assert pc.match_substring_regex(lines, csv_pattern(2, ";")).to_pylist() == [
        False, False, True, False, False]



def test_a_wide_schema_stays_within_duckdbs_expression_depth() -> None:
    """The vectorized JSON query nests no deeper for more columns: with DuckDB's depth
    limit (1,000 by default) lowered to 100, 150 columns still parse (a chain of one
    AND per column failed the whole task with a ParserException past the limit)."""
    from markerstore import duck
    from markerstore.ingest.blocks import split_records
    from markerstore.ingest.parse import json_query, parse_json

    names = [f"c{i}" for i in range(150)]
    schema = ddl_to_arrow(", ".join(f"{n} BIGINT" for n in names))
    lines = [json.dumps({n: i * j for j, n in enumerate(names)}) for i in range(3)]
    lines += [json.dumps({"c0": "x"}), json.dumps({"c5": 5})]
    con = duck.local()
    con.execute("SET max_expression_depth TO 100")
    try:
        parsed = parse_json(split_records("\n".join(lines).encode()).records, schema,
                            json_query(schema, False))
    finally:
        con.execute("RESET max_expression_depth")
    assert parsed.table.num_rows == 4 and parsed.suspects.tolist() == [3]
