"""An integer no double holds (past about 1.8e308) is inferred STRING, read as its JSON
text: Spark's rule (DOUBLE past 38 digits) made it a DOUBLE column, and then the sampled
record that typed it failed its own cast. CSV inference reads the same text as a STRING
column too."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from markerstore.ingest.infer import infer_schema
from markerstore.ingest.sources import list_tasks
from tests.ingest.test_csv_inference import _ddl
from tests.support.ingest_run import run

HUGE = "1" + "0" * 399  # 400 digits
FITS = "9" * 38  # DECIMAL(38, 0)
PAST = "9" * 39  # past 38 digits: a double holds it (rounded), as Spark reads it


@pytest.mark.parametrize(("value", "alone", "with_a_fraction", "text"), [
    (HUGE, pa.string(), pa.string(), [HUGE, "2.5"]),
    ("-" + HUGE, pa.string(), pa.string(), ["-" + HUGE, "2.5"]),
    (FITS, pa.decimal128(38, 0), pa.float64(), None),
    (PAST, pa.float64(), pa.float64(), None),
    (f"[1, {HUGE}]", pa.string(), pa.string(), [f"[1, {HUGE}]", "2.5"]),
    (f'{{"b": {HUGE}}}', pa.string(), pa.string(), [f'{{"b": {HUGE}}}', "2.5"]),
])
@pytest.mark.parametrize("options", [{}, {"prefersDecimal": "true"}])
def test_a_json_integer_no_double_holds_is_text(
        tmp_path: Path, value: str, alone: pa.DataType, with_a_fraction: pa.DataType,
        text: list[str] | None, options: dict[str, str]) -> None:
    """The type holds every sampled value: alone, and merged with a number that has a
    fraction (2.5); each record is then a row, the text column holding the JSON text."""
    for name, data, expected in (("alone", f'{{"a": {value}, "b": 1}}\n', alone),
                                 ("merged", f'{{"a": {value}, "b": 1}}\n{{"a": 2.5}}\n',
                                  with_a_fraction)):
        source = tmp_path / f"{name}.jsonl"
        source.write_text(data)
        inferred = infer_schema(list_tasks(str(source)), None, options)
        assert (inferred.field("a").type, inferred.field("b").type) == (expected, pa.int64())
        ddl = ", ".join(f"`{f.name}` {_ddl(f.type)}" for f in inferred)
        rows, errors = run(tmp_path / f"again-{name}.jsonl", data.encode(), ddl,
                           options=options)
        assert errors == [] and len(rows) == data.count("\n"), ddl
        if text is not None:
            assert sorted(r["a"] for r in rows) == sorted(text[:len(rows)])


def test_csv_inference_reads_the_same_integer_as_text(tmp_path: Path) -> None:
    data = f"a,b\n{HUGE},1\n{PAST},2\n".encode()
    source = tmp_path / "in.csv"
    source.write_bytes(data)
    inferred = infer_schema(list_tasks(str(source)), None, {})
    assert (inferred.field("a").type, inferred.field("b").type) == (pa.string(), pa.int64())
    rows, errors = run(tmp_path / "again.csv", data, "a STRING, b BIGINT")
    assert errors == [] and sorted(r["a"] for r in rows) == sorted([HUGE, PAST])
