"""JSON lines read as RFC 8259 says, however hostile, through the ingest's task path:
each record is a row or one error record with a clear reason, never an exception that
fails the task; NaN/Infinity follow allowNonNumericNumbers; a STRING column takes any
JSON value as its JSON text, as written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support.ingest_run import ordered, reasons, run

IDS = "id BIGINT, s STRING, d DOUBLE"


def test_deep_nesting_is_one_error_not_a_failed_task(tmp_path: Path) -> None:
    """Today one line of 100,000 '[' raised RecursionError and failed the whole ingest."""
    lines = [b'{"id": 1}', b"[" * 100_000, b'{"id": 2, "s": ' + b"[" * 600 + b"]" * 600 + b"}",
             b'{"id": 3, "s": ' + b"[" * 100 + b"]" * 100 + b"}", b'{"id": 4}']
    rows, errors = run(tmp_path / "in.json", b"\n".join(lines), IDS)
    assert sorted(r["id"] for r in rows) == [1, 3, 4]
    assert reasons(errors) == [("parse", "2"), ("parse", "3")]
    assert all("nested deeper than 512" in e["message"] for e in errors)


@pytest.mark.parametrize(("line", "why"), [
    (b'{"id": 1, "s": "\\ud800"}', "lone surrogate"),
    (b'{"id": 1, "id": 2}', 'key "id" appears twice'),
    (b'{"id": 1, "s": {"k": 1, "k": 2}}', 'key "k" appears twice'),
    (b'{"id": 1, "d": 1e400}', "too large in magnitude"),
    (b'{"id": 1, "d": -1E+999}', "too large in magnitude"),
    (b'\xef\xbb\xbf{"id": 1}', "BOM"),
    (b'{"id": 1,}', "Expecting property name"),
])
def test_hostile_records_are_error_records_with_a_reason(tmp_path: Path, line: bytes,
                                                         why: str) -> None:
    rows, errors = run(tmp_path / "in.json", b'{"id": 0}\n' + line + b"\n", IDS)
    assert rows == [{"id": 0, "s": None, "d": None}]
    assert reasons(errors) == [("parse", "2")] and why in errors[0]["message"]


def test_numbers_beyond_int64_and_huge_exponents(tmp_path: Path) -> None:
    data = b'{"id": 99999999999999999999}\n{"id": 1, "s": 99999999999999999999}\n' \
           b'{"id": 2, "d": 1e308}\n{"id": 3, "s": 1e400}\n'
    rows, errors = run(tmp_path / "in.json", data, IDS)
    assert rows == ordered([{"id": 1, "s": "99999999999999999999", "d": None},
                            {"id": 2, "s": None, "d": 1e308}])
    assert reasons(errors) == [("cast", "1"), ("parse", "4")]


def test_nan_and_infinity_follow_allow_non_numeric_numbers(tmp_path: Path) -> None:
    data = b'{"id": 1, "d": NaN}\n{"id": 2, "d": Infinity}\n{"id": 3, "d": -Infinity}\n'
    rows, errors = run(tmp_path / "on.json", data, IDS)  # Spark's default: accepted
    assert errors == [] and math.isnan(rows[0]["d"]) and \
        sorted(r["d"] for r in rows[1:]) == [-math.inf, math.inf]
    rows, errors = run(tmp_path / "off.json", data, IDS,
                       options={"allowNonNumericNumbers": "false"})
    assert rows == [] and reasons(errors) == [("parse", "1"), ("parse", "2"), ("parse", "3")]
    assert "allowNonNumericNumbers is false" in errors[0]["message"]


def test_a_string_column_takes_any_value_as_its_json_text(tmp_path: Path) -> None:
    """As Spark's JSON reader: the text as written; today a cast error."""
    data = b'{"id": 1, "s": [1, 2]}\n{"id": 2, "s": {"x": 1,  "y": [true]}}\n' \
           b'{"id": 3, "s": 1.50}\n{"id": 4, "s": false}\n{"id": 5, "s": null}\n'
    rows, errors = run(tmp_path / "in.json", data, IDS)
    assert errors == []
    assert {r["id"]: r["s"] for r in rows} == {1: "[1, 2]", 2: '{"x": 1,  "y": [true]}',
                                               3: "1.50", 4: "false", 5: None}
    rows, errors = run(tmp_path / "off.json", data, IDS,
                       options={"markerstore.ingest.json.value_as_text": "false"})
    assert sorted(r["id"] for r in rows) == [5]
    assert [e["context"]["reason"] for e in errors] == ["cast"] * 4


def test_a_byte_order_mark_at_the_start_of_the_file_is_dropped(tmp_path: Path) -> None:
    rows, errors = run(tmp_path / "in.json", b'\xef\xbb\xbf{"id": 1}\r\n{"id": 2}', IDS)
    assert sorted(r["id"] for r in rows) == [1, 2] and errors == []


def test_ignored_fields_are_read_by_the_same_rules(tmp_path: Path) -> None:
    """With extra columns ignored, what an ignored field holds is still read: the fast
    pass leaves such records to the reference parser."""
    data = b'{"id": 1, "x": {"k": 1, "k": 2}}\n{"id": 2, "x": 1e999}\n' \
           b'{"id": 3, "x": [[{"a": 1}]]}\n{"id": 4, "x": ' + b"[" * 513 + b"]" * 513 + b"}\n"
    rows, errors = run(tmp_path / "in.json", data, IDS, extra_columns="ignore")
    assert [r["id"] for r in rows] == [3]
    assert reasons(errors) == [("parse", "1"), ("parse", "2"), ("parse", "4")]
    assert json.loads(errors[0]["record"]).startswith('{"id": 1')
