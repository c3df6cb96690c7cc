"""JSON files as documents (Spark's `multiLine`): the records of a file are the elements
of its top-level array, each a row or one error record with its first line and byte
offset; any other document is one record. Records = rows + error records, per file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markerstore.ingest.infer import infer_schema
from markerstore.ingest.jsondoc import record_spans
from markerstore.ingest.sources import list_tasks
from tests.support.ingest_run import ordered, reasons, run

DOC = {"multiLine": "true"}
SCHEMA = "id BIGINT, s STRING"


def _run(tmp_path: Path, data: bytes, options: dict[str, str] | None = None
         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "doc.json", data, SCHEMA,
                       options=DOC if options is None else options, counts=counts)
    assert counts["records"] == len(rows) + len(errors), counts
    return rows, errors, counts


def test_a_pretty_printed_array_is_one_record_per_element(tmp_path: Path) -> None:
    data = (b'[\n  {\n    "id": 1,\n    "s": "a,] [{\\" b"\n  },\n'
            b'  {"id": "two",\n   "s": "x"},\n'
            b'  {"id": 3, "s": "line\\nbreak"}\n]\n')
    rows, errors, counts = _run(tmp_path, data)
    assert rows == ordered([{"id": 1, "s": 'a,] [{" b'}, {"id": 3, "s": "line\nbreak"}])
    assert reasons(errors) == [("cast", "6")]
    (error,) = errors
    assert json.loads(error["record"]) == {"id": "two", "s": "x"}
    assert counts == {"records": 3, "lines": 9}


def test_an_element_that_fails_to_parse_is_one_error_with_its_text_line_and_offset(
        tmp_path: Path) -> None:
    bad = b'{"id": 2,\n "id": 3}'  # a key twice
    deep = b"[" * 600 + b"]" * 600
    data = b'[{"id": 1},\n ' + bad + b',\n 7,\n {"id": 4, "s": ' + deep + b"}]"
    rows, errors, _ = _run(tmp_path, data)
    assert rows == [{"id": 1, "s": None}]
    assert reasons(errors) == [("parse", "2"), ("parse", "4"), ("parse", "5")]
    by_line = {e["context"]["sourceLine"]: e for e in errors}
    assert json.loads(by_line["2"]["record"]) == bad.decode()
    assert by_line["2"]["context"]["sourceOffset"] == str(data.index(bad))
    assert "appears twice" in by_line["2"]["message"]
    assert "expected a JSON object" in by_line["4"]["message"]
    assert "nested deeper than 512" in by_line["5"]["message"]


def test_one_object_over_lines_is_one_row(tmp_path: Path) -> None:
    rows, errors, counts = _run(tmp_path, b'\xef\xbb\xbf{\n  "id": 9,\n  "s": "x"\n}\n')
    assert rows == [{"id": 9, "s": "x"}] and errors == []
    assert counts == {"records": 1, "lines": 4}


def test_an_empty_array_or_a_blank_file_has_no_record(tmp_path: Path) -> None:
    for data in (b"[ ]\n", b"", b"  \n\n"):
        rows, errors, counts = _run(tmp_path, data)
        assert rows == [] and errors == [] and counts["records"] == 0


def test_a_document_that_is_no_json_value_is_one_error_holding_all_of_it(
        tmp_path: Path) -> None:
    """JSON lines read as a document, a trailing comma, text after the array: nothing
    in them is guessed at, nothing is lost (the record holds the whole text)."""
    for data in (b'{"id": 1}\n{"id": 2}\n', b'[{"id": 1},]', b'[{"id": 1}] trailing',
                 b'[{"id": 1}, "never closed]'):
        rows, errors, _ = _run(tmp_path, data)
        assert rows == [] and reasons(errors) == [("parse", "1")], data
        assert json.loads(errors[0]["record"]) == data.decode().strip()
    # Without the option (the default), JSON lines are records of a line each.
    rows, errors, _ = _run(tmp_path, b'{"id": 1}\n{"id": 2}\n', options={})
    assert rows == [{"id": 1, "s": None}, {"id": 2, "s": None}] and errors == []


def test_bytes_that_are_not_utf8_make_their_element_an_encoding_error(tmp_path: Path) -> None:
    data = b'[{"id": 1, "s": "ok"},\n {"id": 2, "s": "\xff"}]'
    rows, errors, _ = _run(tmp_path, data)
    assert rows == [{"id": 1, "s": "ok"}]
    assert reasons(errors) == [("encoding", "2")]


def test_a_document_over_the_size_limit_is_one_size_error(tmp_path: Path) -> None:
    data = b"[" + b",\n".join(b'{"id": %d}' % i for i in range(2000)) + b"]\n"
    rows, errors, counts = _run(tmp_path, data, {**DOC, "markerstore.ingest.record.max_bytes":
                                                 "4096"})
    assert rows == [] and reasons(errors) == [("size", "1")]
    assert errors[0]["context"]["recordBytes"] == str(len(data))
    assert counts == {"records": 1, "lines": 2000}


def test_a_schema_is_inferred_from_the_elements(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_bytes(b'[\n {"id": 1,\n  "s": "x"},\n {"id": 2, "d": 1.5}\n]')
    schema = infer_schema(list_tasks(str(path), json_documents=True), None,
                          {"multiLine": "true"})
    assert schema == pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.float64())])


def test_a_large_document_is_one_task(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b",".join(b'{"id": %d}' % i for i in range(5000)) + b"]")
    assert len(list_tasks(str(path), split_bytes=1024)) > 1
    (task,) = list_tasks(str(path), split_bytes=1024, json_documents=True)
    assert task.whole_file


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.text(alphabet='ab,[]{}":\\\n é', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(alphabet="ab,[]{", max_size=3), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_VALUES, max_size=6), st.sampled_from([None, 0, 2]),
       st.sampled_from(["", " ", "\n"]))
def test_the_elements_found_are_the_arrays_elements(values: list[Any], indent: int | None,
                                                   pad: str) -> None:
    """For any array however printed, the records are its elements, each parsing to the
    value it holds."""
    data = (pad + json.dumps(values, indent=indent, ensure_ascii=False) + pad).encode()
    starts, stops = record_spans(data)
    assert [json.loads(data[a:b]) for a, b in zip(starts, stops, strict=True)] == values


def test_hostile_whitespace_and_backslashes_cost_no_pass_per_byte(tmp_path: Path) -> None:
    """Megabytes of whitespace around an element and long runs of backslashes before
    quotes: the elements are still found, each read as it is."""
    text = '"' + "\\\\" * 50_000 + '\\"' + '"'  # a string: 50,000 backslashes and a quote
    data = (b"[" + b" " * 2_000_000 + b'{"id": 1, "s": ' + text.encode() + b"}"
            + b"\n" * 200_000 + b", " + b"\t" * 1_000_000 + b'{"id": 2}]')
    rows, errors, counts = _run(tmp_path, data)
    assert errors == [] and counts["records"] == 2
    assert rows == ordered([{"id": 1, "s": "\\" * 50_000 + '"'}, {"id": 2, "s": None}])
