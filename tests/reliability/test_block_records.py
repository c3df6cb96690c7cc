"""Blocks cut by a record count (markerstore.ingest.blocks.BLOCK_RECORDS) and suspects
parsed a batch at a time (markerstore.ingest.task.REFERENCE_RECORDS) give exactly the
rows, error records, line numbers and source counts of one pass: with both limits a few
records, each file reads as it does with the defaults."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import patch

import pytest

from markerstore.ingest import blocks, task
from markerstore.ingest import parse as reader
from tests.support.ingest_run import run

JSON_LINES = (b'\xef\xbb\xbf{"a": 1}\n\n{"a": 2, "b": "x"}\r\nnot json\n{"a": "y"}\n   \n'
              b'[1]\n{"a": 3}\n{"a": 4, "b": [0, 0, 0]}\n{"a": 5}') * 7
CSV = (b'a,b\n1,x\n2,"two\nlines"\n3\n\n4,y,z\n"5",""\r\nq,w\n6,"a ""q"" b"\n7,last') * 5
DOCUMENT = (b'[{"a": 1}, {"a": 2,\n "b": "x"}, 3, {"a": "y"},\n\n {"a": 4}, [1, [2]], '
            b'{"a": 5, "b": {"c": [0, 0]}}, {"a": 6}]\n')


@pytest.mark.parametrize(("name", "data", "options"), [
    ("in.json", JSON_LINES, None),
    ("in.csv", CSV, None),
    ("doc.json", DOCUMENT, {"multiLine": "true"}),
])
def test_a_few_records_at_a_time_read_as_one_pass(tmp_path: Path, name: str, data: bytes,
                                                  options: dict[str, str] | None) -> None:
    (tmp_path / "whole").mkdir()
    (tmp_path / "pieces").mkdir()
    whole: dict[str, int] = {}
    rows, errors = run(tmp_path / "whole" / name, data, "a BIGINT, b STRING",
                       options=options, counts=whole)
    pieces: dict[str, int] = {}
    with patch.object(blocks, "BLOCK_RECORDS", 3), patch.object(task, "REFERENCE_RECORDS", 2), \
            patch.object(reader, "PARSE_VALUES", 4):
        cut_rows, cut_errors = run(tmp_path / "pieces" / name, data, "a BIGINT, b STRING",
                                   options=options, counts=pieces, block_bytes=64)
    assert cut_rows == rows and len(rows) >= 5
    assert _errors(cut_errors) == _errors(errors) and len(errors) >= 3
    assert pieces == whole and pieces["records"] == len(rows) + len(errors)


def _errors(errors: list[dict[str, object]]) -> list[tuple[object, ...]]:
    """What an error record says of its record (not its uid or time)."""
    keep = ("reason", "sourceLine", "sourceOffset")
    return sorted((e["record"], e["message"], *(dict(e["context"]).get(k) for k in keep))
                  for e in errors)


def test_what_duckdb_cannot_take_falls_back_to_the_reference(tmp_path: Path) -> None:
    """A DuckDB error in the vectorized pass makes its lines suspects, which the reference
    parser decides: the same rows and error records, never a failed task."""
    import duckdb

    rows, errors = run(tmp_path / "a.json", JSON_LINES, "a BIGINT, b STRING")

    def fails(*_: object) -> None:
        raise duckdb.InvalidInputException("cannot take this")

    with patch.object(reader, "_relation", fails):
        fallback = run(tmp_path / "b.json", JSON_LINES, "a BIGINT, b STRING")
    assert fallback[0] == rows and _errors(fallback[1]) == _errors(errors)
