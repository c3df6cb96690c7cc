"""Byte ranges of CSV of every shape that once broke them (issue 38): fields that end with a
line break (each line flips the quote state, so no look-back decides), quoted fields larger
than the record limit (quote-free, or a single line), gadgets on range boundaries, a quote
never closed. The look-back's window is shrunk to a few dozen bytes and the limit to 256,
so that files of a few KiB show what a look-back of a window cannot see; the ranges (told
their state by the driver's first pass, or finding it themselves) must read what the file
read whole reads, and that must be what Python's `csv` module reads: the same records
at the same offsets, each too large one a `size` error record of its true size, so no byte
is counted twice and no row comes from inside a field."""

from __future__ import annotations

import csv
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.s3 import MotoS3
from markerstore.ingest import csvranges, quotestates
from markerstore.ingest.blocks import ReadOptions, read_blocks
from markerstore.ingest.csvranges import ends_inside, inside_at
from markerstore.ingest.quotestates import quote_states
from markerstore.ingest.sources import SourceTask, list_tasks
from markerstore.values.csv import Dialect, split_record
from tests.ingest.test_csv_ranges import Record, _read, _reads
from tests.support.ingest_run import run

LIMIT = 256
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_PLAIN = st.text(alphabet="ab1 é", max_size=4)
_QUOTED = st.text(alphabet='ab,\n\r" é', max_size=8).map(
    lambda t: '"' + t.replace('"', '""') + '"')
_RECORD = st.lists(st.one_of(_PLAIN, _QUOTED), min_size=1, max_size=4).map(",".join)
_END = st.sampled_from(["\n", "\r\n", "\r"])


@pytest.fixture(autouse=True)
def _small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Look-back windows of 16 to 64 bytes, and the pass reading 37 bytes at a time."""
    monkeypatch.setattr(csvranges, "LOOK_BACK_BYTES", 16)
    monkeypatch.setattr(csvranges, "LOOK_BACK_MAX", 64)
    monkeypatch.setattr(quotestates, "PASS_BYTES", 37)


@st.composite
def _flips(draw: Any) -> str:
    """Records whose quoted text ends with a line break: every line flips the state."""
    end = draw(_END)
    return "".join(f'{i},"text {i}{end}",{i % 7}{end}'
                   for i in range(draw(st.integers(3, 40))))


@st.composite
def _large(draw: Any) -> str:
    """A record with a quoted field larger than the limit: lines that look like records
    (quote-free, or with doubled quotes), or one line without a break."""
    end = draw(_END)
    lines = draw(st.integers(LIMIT // 8, LIMIT // 3))
    if draw(st.booleans()):
        body = "y" * (lines * 9)
    else:
        gadget = draw(st.sampled_from(["", '""', ',""', '"",x']))
        body = "".join(f"{i},v{gadget}{end}" for i in range(lines))
    return f'7,"{body}",8{end}'


@st.composite
def shaped_csv(draw: Any) -> bytes:
    """A header, then pieces of every shape in any order; maybe a quote never closed."""
    parts = ["h1,h2\n"]
    for _ in range(draw(st.integers(1, 6))):
        shape = draw(st.sampled_from(["records", "flips", "large", "gadget", "empty"]))
        if shape == "records":
            parts += [draw(_RECORD) + draw(_END) for _ in range(draw(st.integers(1, 6)))]
        elif shape == "flips":
            parts.append(draw(_flips()))
        elif shape == "large":
            parts.append(draw(_large()))
        elif shape == "gadget":  # fake records, a doubled quote and CRLF in quoted fields
            parts.append('1,"\n2,3\n""\r\n4,"",5\n"\n' + '"a""b",",\n"\r\n')
        else:
            parts.append(draw(_END))
    if draw(st.booleans()):
        parts.append('9,"never closed\n' + "".join(f"{i},x\n" for i in range(20)))
    return "".join(parts).encode()


def python_csv(data: bytes) -> list[Record]:
    """What Python's `csv` module reads: each record's offset, first line and text (a
    record over the limit: ("size", its bytes without its line end)), and last the
    physical lines; and the fields of each record, which :func:`split_record` must give."""
    lines = _LINE.findall(data.decode())
    consumed = 0

    def feed() -> Any:
        nonlocal consumed
        for line in lines:
            consumed += 1
            yield line

    found: list[Record] = []
    offset, first = 0, 0
    for row in csv.reader(feed()):
        text = "".join(lines[first:consumed])
        size = len(text.encode())
        end = 2 if text.endswith("\r\n") else int(text.endswith(("\r", "\n")))
        text = text[:len(text) - end]  # without its line end
        if size - end > LIMIT:
            found.append((offset, first + 1, ("size", size - end)))
        else:
            found.append((offset, first + 1, text))
            if text.count('"') % 2 == 0:  # (not a quote never closed)
                assert [v for v, _ in split_record(text)] == (row or [""]), text
        offset, first = offset + size, consumed
    return [*found, (len(data), 0, ("lines", len(lines)))]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=shaped_csv(), cuts=st.lists(st.integers(1, 1 << 14), min_size=1, max_size=10),
       block=st.sampled_from([7, 64, 1 << 16]))
def test_every_shape_in_ranges_reads_as_the_whole_file_and_pythons_csv(
        tmp_path: Path, data: bytes, cuts: list[int], block: int) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(data)
    url = f"file://{path}"
    options = ReadOptions(max_record_bytes=LIMIT)
    whole = _read(path, [SourceTask(url, "csv")], options, block)
    assert whole == python_csv(data)
    points = sorted({c % len(data) for c in cuts} - {0})
    ranges = [SourceTask(url, "csv", a, b) for a, b in itertools.pairwise([0, *points, None])]
    for driver in (True, False):
        assert _read(path, ranges, options, block, driver) == whole, (points, driver)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=shaped_csv(), block=st.sampled_from([3, 7, 37, 300, 1 << 16]), crlf=st.booleans())
def test_the_map_read_a_block_at_a_time_is_the_map_of_the_whole_text(
        tmp_path: Path, data: bytes, block: int, crlf: bool) -> None:
    """The first pass's map of lines (csvranges.segment_map), read in blocks of a few
    bytes and with lines longer than a block read by the quote scanner, is the map of the
    whole text read at once; with ``lineSep`` CRLF too (a CR or a LF alone is text)."""
    dialect = Dialect(line_sep="\r\n") if crlf else Dialect()
    if crlf:
        data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    whole = data[:csvranges._last_line_end(data, dialect.line_sep, True) + 1]
    path = tmp_path / "m.csv"
    path.write_bytes(data)
    with open(path, "rb") as handle:
        assert csvranges.segment_map(handle, 0, len(whole), block, dialect) == (
            ends_inside(whole, False, dialect), ends_inside(whole, True, dialect))


def test_the_python_csv_reference_reads_a_flip_and_a_large_field() -> None:
    """The reference itself: the records and sizes of a small file written out."""
    data = b'h\n1,"a\n",2\n7,"' + b"y" * 300 + b'",8\r\n'
    assert python_csv(data) == [(0, 1, "h"), (2, 2, '1,"a\n",2'),
                                (11, 4, ("size", 306)), (len(data), 0, ("lines", 4))]


def _oversized(body: str) -> bytes:
    return ("a,b\n1,x\n" + '2,"' + body + '",3\n'
            + "".join(f"{i},after\n" for i in range(100))).encode()


@pytest.mark.parametrize("body", [
    "".join(f"{i},inner {i}\n" for i in range(600)),  # 6 KB of lines like records
    "y" * 6000,  # one line
    "".join(f'{i},""inner""\n' for i in range(500)),  # doubled quotes on every line
])
@pytest.mark.parametrize("driver", [True, False])
def test_a_field_larger_than_the_limit_is_one_size_error_in_ranges_of_any_size(
        tmp_path: Path, body: str, driver: bool) -> None:
    """A 6 KB quoted field with the limit at 2 KB, ranges of 300 B to 2.5 KB: one `size`
    error record of its true size, the rows before and after it, nothing from inside it
    (before: rows read from inside the field while the error record held it whole)."""
    data = _oversized(body)
    path = tmp_path / "big.csv"
    path.write_bytes(data)
    url = f"file://{path}"
    options = ReadOptions(max_record_bytes=2048)
    whole = _read(path, [SourceTask(url, "csv")], options, 1 << 16)
    field = data.index(b'2,"')
    size = data.index(b"\n0,after") - field
    assert [r for r in whole if isinstance(r[2], tuple)][0] == (field, 3, ("size", size))
    assert len(whole) == 2 + 1 + 100 + 1
    for split in (300, 700, 1500, 2500):
        tasks = list_tasks(str(path), split_bytes=split)
        assert _read(path, tasks, options, 1 << 16, driver) == whole, split


def test_through_the_task_path_the_error_record_and_rows_are_the_whole_files(
        tmp_path: Path) -> None:
    """Ingest's task path (header, validation, error records) in ranges of 500 bytes: the
    rows and error records of the file read whole; the size error record's offset and
    true size; records = rows + error records."""
    data = _oversized("".join(f"{i},inner {i}\n" for i in range(600)))
    options = {"markerstore.ingest.record.max_bytes": "2048"}
    counts: dict[str, int] = {}
    rows, errors = run(tmp_path / "r.csv", data, "a BIGINT, b STRING", options=options,
                       split_bytes=500, counts=counts)
    whole_rows, whole_errors = run(tmp_path / "w.csv", data, "a BIGINT, b STRING",
                                   options=options)
    assert rows == whole_rows and len(rows) == 101

    def key(e: dict[str, Any]) -> tuple[str, ...]:
        context = e["context"]
        return context["reason"], context["sourceOffset"], context["recordBytes"], e["record"]

    assert [key(e) for e in errors] == [key(e) for e in whole_errors]
    assert [key(e)[:3] for e in errors] == [
        ("size", str(data.index(b'2,"')), str(data.index(b"\n0,after") - data.index(b'2,"')))]
    assert counts["records"] == len(rows) + len(errors) == 102


def test_a_range_reads_its_bytes_and_the_pass_each_byte_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Quote-flip lines cut into ranges of 4 KiB with a look-back of at most 64 bytes: the
    driver's pass reads each byte of the file about once (its looks back and the lines
    between the ranges' starts); told its state, each range reads from its start to a
    read past its end (before: each range looked back to the file's start)."""
    data = b"id,note,n\n" + "".join(f'{i},"text {i}\n",{i % 7}\n'
                                    for i in range(4000)).encode()
    path = tmp_path / "flip.csv"
    path.write_bytes(data)
    tasks = list_tasks(str(path), split_bytes=4096)
    spans = _reads(monkeypatch)
    told = quote_states(tasks, None, ReadOptions(), threads=1)
    assert sum(b - a for a, b in spans) < 1.2 * len(data)
    for task in told[1:]:
        spans.clear()
        list(read_blocks(task, None, 1 << 20))
        assert min(a for a, _ in spans) >= task.start - 2
        assert max(b for _, b in spans) <= (task.end or len(data)) + 2 * (64 << 10)
    with open(path, "rb") as handle:  # no window decides, and the states alternate
        starts = [csvranges.first_line_start(handle, t.start, 1 << 16) for t in tasks[1:]]
        assert all(inside_at(handle, at) is None for at in starts)
    assert {t.quoted for t in told[1:]} == {True, False}


@pytest.mark.s3
def test_the_first_pass_over_s3_gives_the_states_of_the_local_file(
        moto_s3: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    """The driver's pass reads an S3 object on its threads (s3fs, one handle each) and
    gives each range the state the same bytes on local disk give; the ranges then read
    the records of the file read whole."""
    data = (b"id,note,n\n" + "".join(f'{i},"text {i}\n",{i % 7}\n' for i in range(3000)
                                     ).encode() + b'9,"' + b"y\n" * 300 + b'",9\n')
    moto_s3.client().put_object(Bucket=s3_bucket, Key="flip.csv", Body=data)
    (tmp_path / "flip.csv").write_bytes(data)
    options = moto_s3.storage_options()
    remote = quote_states(list_tasks(f"s3://{s3_bucket}/flip.csv", options, split_bytes=4001),
                          options, ReadOptions(max_record_bytes=LIMIT))
    local = quote_states(list_tasks(str(tmp_path / "flip.csv"), split_bytes=4001), None,
                         ReadOptions(max_record_bytes=LIMIT))
    assert len(remote) > 10 and [t.quoted for t in remote] == [t.quoted for t in local]
    read = [(o, t) for task in remote
            for block in read_blocks(task, options, 1 << 16, ReadOptions(max_record_bytes=LIMIT))
            for t, o in zip(block.records.to_pylist(), block.offsets.tolist(), strict=True)]
    whole = _read(tmp_path / "flip.csv", [SourceTask(f"file://{tmp_path}/flip.csv", "csv")],
                  ReadOptions(max_record_bytes=LIMIT), 1 << 16)
    assert sorted(read) == [(o, t) for o, _, t in whole[:-1] if isinstance(t, str)]
