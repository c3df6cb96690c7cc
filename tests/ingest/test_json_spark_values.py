"""JSON values read as Spark's JSON reader reads them where the ingest read them
otherwise: a JSON number for a DECIMAL column exactly as its text says (every such record
was a cast error: the number was a double first), and a string for a BINARY column as
base64, as Spark's JSON writer writes bytes (it was read as the bytes of the text)."""

from __future__ import annotations

import decimal
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.ingest_run import run

DDL = "id BIGINT, d DECIMAL(38,23), n ARRAY<STRUCT<k: DECIMAL(10,2)>>"
LINES = (b'{"id": 1, "d": 12.34, "n": [{"k": 1.5}, {"k": 7}]}\n'
         b'{"id": 2, "d": 0.12345678901234567890123, "n": []}\n'
         b'{"id": 3, "d": 1e2, "n": [{"k": -0.25}]}\n'
         b'{"id": 4, "d": "5.5", "n": null}\n'
         b'{"id": 5, "d": -123456789012345.6789, "n": [{"k": 99999999.99}]}\n')


@pytest.mark.spark
def test_json_numbers_read_into_decimals_as_spark_reads_them(spark: Any,
                                                              tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(LINES)
    theirs = {r["id"]: (r["d"], None if r["n"] is None else [s["k"] for s in r["n"]])
              for r in spark.read.schema(DDL).json(str(source)).collect()}
    rows, errors = run(tmp_path / "again.jsonl", LINES, DDL)
    assert errors == []
    ours = {r["id"]: (r["d"], None if r["n"] is None else [s["k"] for s in r["n"]])
            for r in rows}
    assert ours == theirs
    assert ours[2][0] == decimal.Decimal("0.12345678901234567890123")  # not via a double


# base64 of every length and padding, the URL-safe alphabet, text that is no base64
BINARY_VALUES = ['"YWJj"', '""', '"7"', '"abc"', '"true"', '"YWI="', '"YWI"', '"YW Jj"',
                 "null", "1", '"Zm9vYmFy"', '"Zm9vYg=="', '"Zm9vYg="', '"w7o="', '"_-8="',
                 '"+/8="']


@pytest.mark.spark
def test_json_strings_read_into_binary_as_base64_as_spark_reads_them(
        spark: Any, tmp_path: Path) -> None:
    lines = "".join(f'{{"id": {i}, "v": {v}}}\n' for i, v in enumerate(BINARY_VALUES))
    source = tmp_path / "in.jsonl"
    source.write_text(lines)
    frame = (spark.read.schema("id BIGINT, v BINARY, _corrupt_record STRING")
             .option("mode", "PERMISSIVE").json(str(source)))
    theirs = {json.loads(r["_corrupt_record"])["id"] if r["_corrupt_record"] else r["id"]:
              "error" if r["_corrupt_record"] else r["v"] for r in frame.collect()}
    rows, errors = run(tmp_path / "again.jsonl", lines.encode(), "id BIGINT, v BINARY")
    ours = {r["id"]: r["v"] for r in rows}
    ours.update({int(e["context"]["sourceLine"]) - 1: "error" for e in errors})
    assert {i: (bytes(v) if isinstance(v, (bytes, bytearray)) else v)
            for i, v in theirs.items()} == ours
    assert ours[0] == b"abc" and ours[2] == "error"
    assert {e["context"]["reason"] for e in errors} == {"cast"}


def test_a_csv_field_for_binary_is_its_bytes(tmp_path: Path) -> None:
    """CSV has no base64: a BINARY field is its text's bytes, as in Spark's CSV reader."""
    rows, errors = run(tmp_path / "in.csv", b"id,v\n1,YWJj\n2,caf\xc3\xa9\n",
                       "id BIGINT, v BINARY")
    assert errors == [] and [r["v"] for r in rows] == [b"YWJj", "café".encode()]
