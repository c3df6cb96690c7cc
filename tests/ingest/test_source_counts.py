"""What the ingest's task counts in its source (the commit checks source records = rows
written + error records): records as the parsers read them (a CSV record spanning lines is
one, a record set apart for its bytes or its size is one, a blank JSON line and an empty
CSV line are none) and physical lines; and that every record counted is one row or one
error record, however the file is cut into blocks or byte ranges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import errortable
from markerstore.commit import TaskSpec
from markerstore.ingest.infer import csv_header
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.sources import list_tasks
from markerstore.ingest.task import IngestTask

AB = "a BIGINT, b STRING"


def _read(path: Path, data: bytes, ddl: str = AB, split_bytes: int | None = None,
          **kwargs: Any) -> tuple[dict[str, int], int, list[str]]:
    """(source counts, rows, error reasons) of reading `data` as the ingest's tasks do."""
    path.write_bytes(data)
    tasks = list_tasks(str(path), split_bytes=split_bytes) if split_bytes else \
        list_tasks(str(path))
    task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"),
                      errortable.Validator(ddl_to_arrow(ddl)), errortable.CaptureContext,
                      **kwargs)
    source: dict[str, int] = {}
    rows, reasons = 0, []
    for t in tasks:
        header = csv_header(t, None) if t.format == "csv" else None
        ctx = errortable.CaptureContext(task_attempt="t", source_file=t.url)
        for good, errors in task.results(t, header, ctx, source=source):
            rows += good.num_rows
            reasons += [] if errors is None else errors.column("reason").to_pylist()
    return source, rows, sorted(reasons)


@pytest.mark.parametrize(("name", "data", "records", "lines", "rows", "reasons"), [
    ("empty.json", b"", 0, 0, 0, []),
    ("blank.json", b'{"a": 1}\n\n  \n\t\r\n{"a": 2}', 2, 5, 2, []),
    ("bytes.json", b'{"a": 1}\n{"a": 2, "b": "\xff"}\n[\n', 3, 3, 1, ["encoding", "parse"]),
    ("cr_only.json", b'{"a": 1}\r{"a": 2}\r', 1, 1, 0, ["parse"]),
    ("header_only.csv", b"a,b\n", 0, 1, 0, []),
    ("bom.csv", b"\xef\xbb\xbfa,b\r\n1,x\r\n", 1, 2, 1, []),
    ("spanning.csv", b'a,b\n1,"x\ny\r\nz"\n2,y', 2, 5, 2, []),
    ("unclosed.csv", b'a,b\n1,"x\n2,y\n3,z\n', 1, 4, 0, ["parse"]),
    ("empty_line.csv", b"a,b\n1,x\n\n2,y\n", 2, 4, 2, []),
    ("spaces_line.csv", b"a,b\n1,x\n   \n2,y\n", 3, 4, 2, ["parse"]),
    ("cr_only.csv", b"a,b\r1,x\r2,y\r", 2, 3, 2, []),  # a lone CR ends a line, as in Spark
    ("cr_lf_mixed.csv", b"a,b\r\n1,x\r\r\n2,\"y\rz\"\n", 2, 5, 2, []),
    ("bytes.csv", b'a,b\n1,"x\n\xff"\n2,y\n', 2, 4, 1, ["encoding"]),
])
def test_source_records_are_what_the_parsers_read(tmp_path: Path, name: str, data: bytes,
                                                  records: int, lines: int, rows: int,
                                                  reasons: list[str]) -> None:
    source, got_rows, got_reasons = _read(tmp_path / name, data)
    assert (got_rows, got_reasons) == (rows, reasons)
    assert source == {"records": records, "lines": lines}
    assert source["records"] == got_rows + len(got_reasons)


def test_a_line_of_spaces_is_a_record_of_one_field(tmp_path: Path) -> None:
    """RFC 4180: spaces are part of a field. With one column, it is a row; it was
    skipped as blank, and lost."""
    source, rows, reasons = _read(tmp_path / "one.csv", b"b\nx\n   \n\ny\n", "b STRING")
    assert (source, rows, reasons) == ({"records": 3, "lines": 5}, 3, [])


def test_counts_add_up_over_blocks_byte_ranges_and_a_record_too_large(tmp_path: Path
                                                                      ) -> None:
    lines = [b'{"a": %d, "b": "%s"}' % (i, b"x" * (i % 50)) for i in range(2000)]
    lines[700] = b'{"a": 1, "b": "' + b"y" * 5000 + b'"}'
    lines[900] = b""
    data = b"\n".join(lines) + b"\n"
    source, rows, reasons = _read(tmp_path / "in.json", data, split_bytes=9000,
                                  block_bytes=1024, options={
                                      "markerstore.ingest.record.max_bytes": 4096})
    assert source == {"records": 1999, "lines": 2000}
    assert (rows, reasons) == (1998, ["size"])
    csv = b"a,b\n" + b"".join(b'%d,"%s\n%s"\n' % (i, b"p" * (i % 70), b"q") for i in range(900))
    source, rows, reasons = _read(tmp_path / "in.csv", csv, block_bytes=333)
    assert (source, rows, reasons) == ({"records": 900, "lines": 1801}, 900, [])
