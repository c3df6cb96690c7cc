"""CSV as RFC 4180 reads it, through the ingest's task path: a quoted field holds
delimiters, "" and line breaks (LF and CRLF kept as written); a record spanning lines is
one row or one error record (its whole text, first line and byte offset); a block never
cuts a record, whatever its size; a quote never closed makes the rest one error record;
nullValue / emptyValue as Spark reads them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errortable import parse_csv_lines
from markerstore.ingest.blocks import split_records
from markerstore.ingest.csvsplit import count_line_ends, line_ends_of, record_ends
from markerstore.values.csv import QuoteScanner, join_records
from tests.support.ingest_run import ordered, reasons, run

ABC = "a STRING, b STRING, c STRING"


def test_a_quoted_newline_is_part_of_one_record(tmp_path: Path) -> None:
    """Today the fragment `a time",5,6` was written as a row beside a parse error."""
    data = b'a,b,c\n"Once upon \na time",5,6\n7,8,9\n'
    rows, errors = run(tmp_path / "in.csv", data, ABC)
    assert rows == ordered([{"a": "Once upon \na time", "b": "5", "c": "6"},
                            {"a": "7", "b": "8", "c": "9"}])
    assert errors == []


def test_quotes_and_newlines_in_one_field(tmp_path: Path) -> None:
    """Today: three parse errors for one record, and the record lost."""
    data = b'a,b\n1,"ha \n""ha"" \nha"\n'
    rows, errors = run(tmp_path / "in.csv", data, "a BIGINT, b STRING")
    assert rows == [{"a": 1, "b": 'ha \n"ha" \nha'}] and errors == []


def test_crlf_inside_a_field_is_kept_and_line_ends_are_not(tmp_path: Path) -> None:
    data = b'a,b,c\r\n"x\r\ny","p,q",""""\r\n'
    rows, errors = run(tmp_path / "in.csv", data, ABC)
    assert rows == [{"a": "x\r\ny", "b": "p,q", "c": '"'}] and errors == []


def test_a_record_over_lines_that_fails_is_one_error_with_its_line_and_offset(
        tmp_path: Path) -> None:
    data = b'a,b,c\n1,2,3\n"two\nlines",only\n4,5,6\n'
    rows, errors = run(tmp_path / "in.csv", data, ABC)
    assert sorted(r["a"] for r in rows) == ["1", "4"]
    (error,) = errors
    assert json.loads(error["record"]) == '"two\nlines",only'
    assert error["context"]["sourceLine"] == "3"
    assert error["context"]["sourceOffset"] == str(data.index(b'"two'))
    assert "expected 3 fields, got 2" in error["message"]


def test_a_quote_never_closed_makes_the_rest_one_error(tmp_path: Path) -> None:
    data = b'a,b,c\n1,2,3\n4,"never closed,6\n7,8,9\n10,11,12\n'
    rows, errors = run(tmp_path / "in.csv", data, ABC)
    assert rows == [{"a": "1", "b": "2", "c": "3"}]
    assert reasons(errors) == [("parse", "3")]
    assert json.loads(errors[0]["record"]) == '4,"never closed,6\n7,8,9\n10,11,12'
    assert "never closed" in errors[0]["message"]


def test_a_stray_quote_is_an_error_not_a_row(tmp_path: Path) -> None:
    data = b'a,b,c\n1,x"y,3\n4,"5"6,7\n8,9,10\n'
    rows, errors = run(tmp_path / "in.csv", data, ABC)
    assert rows == [{"a": "8", "b": "9", "c": "10"}]
    assert reasons(errors) == [("parse", "2"), ("parse", "3")]


def test_a_newline_straddling_every_block_boundary(tmp_path: Path) -> None:
    """The block reader cuts only at record ends: records whose quoted newlines fall on
    block boundaries read the same at every block size."""
    body = "".join(f'{i},"line {i}\nnext, ""q""\r\nend",{i * 7}\n' for i in range(12))
    data = ("a,b,c\n" + body).encode()
    whole = run(tmp_path / "whole.csv", data, ABC)
    assert len(whole[0]) == 12 and whole[1] == []
    for block_bytes in (1, 7, 31, 64):
        assert run(tmp_path / f"b{block_bytes}.csv", data, ABC,
                   block_bytes=block_bytes) == whole


def test_a_long_line_is_read(tmp_path: Path) -> None:
    """A record longer than Arrow's default CSV block (1 MiB) failed the whole task."""
    value = "x" * (3 * 1024 * 1024)
    rows, errors = run(tmp_path / "in.csv", f"a,b,c\n1,{value},3\n".encode(), ABC)
    assert len(rows) == 1 and rows[0]["b"] == value and errors == []


def test_empty_and_quoted_empty_read_as_spark_reads_them(tmp_path: Path) -> None:
    """Spark's defaults: both ,, and ,"", are null. nullValue=\\N (a token that never
    occurs) reads "" as an empty string; emptyValue gives "" another value."""
    data = b'a,b,c\n1,"",\n2,NA,"NA"\n'
    rows, _ = run(tmp_path / "d.csv", data, ABC)
    assert rows == ordered([{"a": "1", "b": None, "c": None}, {"a": "2", "b": "NA", "c": "NA"}])
    rows, _ = run(tmp_path / "n.csv", data, ABC, options={"nullValue": "\\N"})
    assert rows == ordered([{"a": "1", "b": "", "c": None}, {"a": "2", "b": "NA", "c": "NA"}])
    rows, _ = run(tmp_path / "na.csv", data, ABC, options={"nullValue": "NA"})
    assert rows == ordered([{"a": "1", "b": "", "c": None}, {"a": "2", "b": None, "c": None}])
    rows, _ = run(tmp_path / "e.csv", data, ABC, options={
        "markerstore.ingest.csv.emptyValue": "EMPTY"})
    assert rows == ordered([{"a": "1", "b": "EMPTY", "c": None},
                            {"a": "2", "b": "NA", "c": "NA"}])


def test_a_byte_order_mark_is_not_part_of_the_header(tmp_path: Path) -> None:
    rows, errors = run(tmp_path / "in.csv", b"\xef\xbb\xbfa,b,c\r\n1,2,3\r\n", ABC)
    assert rows == [{"a": "1", "b": "2", "c": "3"}] and errors == []


_PIECES = st.sampled_from([b'"', b",", b"\n", b"\r\n", b"a", b"bc", b'""', b'"x\ny"',
                           b",,", b"\xc3\xa9"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=30), st.lists(st.integers(1, 40), max_size=6))
def test_any_block_cuts_give_the_records_of_one_block(pieces: list[bytes],
                                                      cuts: list[int]) -> None:
    """Whatever the text and wherever the block reader's reads end, the records (text,
    first line, offset) are those of the text read as one block, and those errortable's
    per-line state machine joins; the vectorized record ends are the scanner's."""
    data = b"".join(pieces)
    scanner = QuoteScanner(bytes)
    assert record_ends(data, final=False).tolist() == scanner.feed(data)
    whole = split_records(data, "csv")
    expected = [(text, first + 1) for first, text in
                join_records(data.decode().splitlines(keepends=True))]
    assert list(zip(whole.records.to_pylist(), whole.lines.tolist(), strict=True)) == expected
    got: list[tuple[str, int, int]] = []
    carry, offset, line, position = b"", 0, 1, 0
    for size in [*cuts, len(data)]:  # a read of `size` bytes, then the rest
        chunk = data[position:position + size]
        position += len(chunk)
        buffer = carry + chunk
        final = position >= len(data)
        ends = record_ends(buffer, final=final)
        cut = int(ends[-1]) if len(ends) else 0
        block = split_records(buffer[:cut], "csv", line, offset, final=True)
        got += zip(block.records.to_pylist(), block.lines.tolist(), block.offsets.tolist(),
                   strict=True)
        line += buffer.count(b"\n", 0, cut)
        offset += cut
        carry = buffer[cut:]
        if final:
            break
    assert got == list(zip(whole.records.to_pylist(), whole.lines.tolist(),
                           whole.offsets.tolist(), strict=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"a", b"\r", b"\n", b"\r\n", b";", b"x\ry"]), max_size=30),
       st.lists(st.integers(1, 5), max_size=8), st.sampled_from([None, "\r\n", "\n", ";"]))
def test_line_ends_counted_a_piece_at_a_time_are_those_of_the_whole(
        pieces: list[bytes], cuts: list[int], sep: str | None) -> None:
    """A record read on a piece at a time counts its lines without holding positions: a
    CRLF or a lone CR cut by a piece's end counts once, as in the whole text (a lone CR
    that ended a piece used to be lost)."""
    data = b"".join(pieces)
    total, before, position = 0, b"", 0
    for size in [*cuts, len(data)]:
        piece = data[position:position + size]
        position += len(piece)
        total += count_line_ends(before, piece, sep, position >= len(data))
        before = piece[-1:] or before
        if position >= len(data):
            break
    assert total == len(line_ends_of(data, sep, True))


def test_the_per_line_parser_joins_records_and_numbers_them_by_first_line() -> None:
    parsed = parse_csv_lines(["a,b", '1,"x', 'y"', "2,z"])
    assert parsed.records == [{"a": "1", "b": "x\ny"}, {"a": "2", "b": "z"}]
    assert parsed.line_numbers == [2, 4]
    assert np.array_equal(record_ends(b'1,"x\ny"\n2,z\n', final=True), [8, 12])


def test_a_header_naming_a_column_twice_names_each_as_spark_does(tmp_path: Path) -> None:
    """Which of the two fields is a column `a` is unknown (the last one used to win,
    silently): the header's columns are named as Spark names them, `a1` and `a2` (the
    name and its index), so a schema of `a` keeps every record as an error record (a
    field it lacks), and a schema of `a1, a2` reads both. errortable's own reader, whose
    first record is the header, keeps refusing a name given twice."""
    data = b"id,a,a\n1,x,y\n2,z,w\n"
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, a STRING")
    assert rows == [] and reasons(errors) == [("schema", "2"), ("schema", "3")]
    assert all("'a1', 'a2'" in e["message"] for e in errors)
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, a1 STRING, a2 STRING")
    assert errors == [] and rows == [{"id": 1, "a1": "x", "a2": "y"},
                                     {"id": 2, "a1": "z", "a2": "w"}]
    parsed = parse_csv_lines(["id,a,a", "1,x,y"])
    assert parsed.records == [] and len(parsed.errors) == 1
