"""Every input of the parsing issue, end to end through Spark: `markerstore.ingest` with the
default options and `markerstore ingest` with nullValue, allowNonNumericNumbers and sep
(a tab-separated file) set.
A CSV record with quoted newlines is one row; 100,000 '[' is one error record, not a failed
job; bytes that are not UTF-8 are an encoding error record whose bytes the error table
gives back; NaN follows allowNonNumericNumbers; "" follows nullValue; a nested value for a
STRING column is its JSON text. What the tables hold is read back from their files."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import errortable
from markerstore.cli.ingest import ingest as ingest_command
from markerstore.ingest.pipeline import ingest
from tests.ingest.test_ingest import cli
from tests.support.readback import assert_records

pytestmark = pytest.mark.spark

SCHEMA = "id BIGINT, a STRING, b STRING, d DOUBLE"
CSV = (b"id,a,b\r\n"
       b'1,"Once upon \na time",5\n'  # a quoted newline: one record
       b'2,"ha \n""ha"" \nha",x\r\n'  # quotes and newlines: one record
       b'3,"",\n'  # a quoted empty string and an empty field
       b'4,"crlf\r\nkept",y\n')
NOT_UTF8 = b'{"id": 42, "a": "\xff"}'
JSON = (b'{"id": 10, "a": "ok"}\n' + b"[" * 100_000 + b"\n" + NOT_UTF8 + b"\n"
        b'{"id": 11, "d": NaN}\n{"id": 12, "a": [1, 2], "b": {"x": 1}}\n')


def _source(tmp_path: Path, sep: bytes = b",") -> Path:
    src = tmp_path / "src"
    src.mkdir()
    (src / "records.csv").write_bytes(CSV.replace(b",", sep))  # no comma inside a field
    (src / "lines.json").write_bytes(JSON)
    return src


def _rows(table: Path) -> dict[int, dict[str, Any]]:
    files = [str(p) for p in table.rglob("*.parquet") if ".markerstore" not in p.parts]
    return {r["id"]: r for r in pq.read_table(files).to_pylist()}


def _errors(table: Path) -> list[tuple[str, str, int, bytes | None]]:
    """(reason, source file name, line, the bytes of recordBase64) of each error record,
    read from the committed error files with DuckDB."""
    found = errortable.read(str(table) + "_errors").query("e", """
        SELECT reason, source_file, source_line, from_base64(context['recordBase64'])
        FROM e ORDER BY source_file, source_line""").fetchall()
    return [(r, f.rsplit("/", 1)[-1], n, b) for r, f, n, b in found]


def _common(rows: dict[int, dict[str, Any]], errors: list[Any]) -> None:
    assert rows[1]["a"] == "Once upon \na time" and rows[1]["b"] == "5"
    assert rows[2]["a"] == 'ha \n"ha" \nha' and rows[2]["b"] == "x"
    assert rows[4]["a"] == "crlf\r\nkept"
    assert rows[12]["a"] == "[1, 2]" and rows[12]["b"] == '{"x": 1}'
    assert not any("\ufffd" in str(v) or 'time"' in str(v) for r in rows.values()
                   for v in r.values())
    assert ("parse", "lines.json", 2, None) in errors
    assert ("encoding", "lines.json", 3, NOT_UTF8) in errors


def test_ingest_reads_every_input_of_the_issue(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    result = ingest(str(_source(tmp_path)), str(table), schema=SCHEMA, spark=spark,
                    markers="direct", progress=False)
    rows, errors = _rows(table), _errors(table)
    _common(rows, errors)
    assert sorted(rows) == [1, 2, 3, 4, 10, 11, 12]
    assert rows[3]["a"] is None and rows[3]["b"] is None  # Spark's default: both null
    assert math.isnan(rows[11]["d"])  # allowNonNumericNumbers: Spark's default
    assert len(errors) == 2
    assert result.error_records == {"parse": 1, "encoding": 1}
    assert_records(str(table), result.source_records, rows=7, errors=result.error_records)
    assert result.source_records == 9


def test_cli_ingest_with_parsing_options(tmp_path: Path) -> None:
    table = tmp_path / "t"
    out = cli("ingest", str(_source(tmp_path, b"\t")), str(table), "--schema", SCHEMA,
              "--master", "local[2]", "--no-progress", "--json", "--option", "nullValue=\\N",
              "--option", "allowNonNumericNumbers=false", "--option", "sep=\\t")
    assert out.returncode == 0, out.stderr[-2000:]
    rows, errors = _rows(table), _errors(table)
    _common(rows, errors)
    assert sorted(rows) == [1, 2, 3, 4, 10, 12]
    assert rows[3]["a"] == "" and rows[3]["b"] is None  # nullValue=\N: "" is a string
    assert ("parse", "lines.json", 4, None) in errors and len(errors) == 3  # NaN refused
    summary = json.loads(out.stdout)
    assert summary["error_records_by_reason"] == {"encoding": 1, "parse": 2}
    assert summary["source_records"] == 9
    assert_records(str(table), 9, rows=6, errors={"encoding": 1, "parse": 2})
    help_text = CliRunner().invoke(ingest_command, ["--help"]).output
    assert all(name in help_text for name in ("sep", "header", "nullValue",
                                              "allowNonNumericNumbers"))
    assert base64.b64encode(NOT_UTF8).decode() in str(
        errortable.read(str(table) + "_errors").fetchall())
