"""A JSON number for a DECIMAL column reads exactly as its text says, as Spark's JSON
reader reads it (every such record was a cast error: the number was a double first)."""

from __future__ import annotations

import decimal
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
