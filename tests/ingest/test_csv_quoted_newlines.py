"""Records with a quoted line break (CR, LF or CRLF inside a quoted field) are read by the
vectorized pass, not handed to the reference parser, and read the same as there: the
line break kept as written, an escaped quote unescaped, for the default dialect, a
backslash escape and another quote character."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errortable import parse_csv_lines
from errortable.csvtext import Dialect
from markerstore.ingest.blocks import ReadOptions, split_records
from markerstore.ingest.reader import parse_csv

_DIALECTS = [Dialect(), Dialect(escape="\\"), Dialect(quote="'", escape="'"),
             Dialect(delimiter=";", quote="'", escape="\\")]
_NAMES = ["a", "b", "c"]
# Characters of a value: line breaks, the delimiters and quotes of every dialect above,
# text (Q and E: the dialect's quote and escape, written escaped in a quoted field).
_QUOTED = st.lists(st.sampled_from(["\n", "\r", "\r\n", "x", "é", " ", ",", ";", "Q", "E",
                                    "\r\n\r\n", "yz"]), min_size=1, max_size=6)
_PLAIN = st.text(alphabet="abc19é", max_size=4)
_FIELD = st.one_of(st.tuples(st.just(True), _QUOTED), st.tuples(st.just(False), _PLAIN))


def _write(dialect: Dialect, quoted: bool, value: str | list[str]) -> tuple[str, str]:
    """A field's text in `dialect`, and the value it holds."""
    if not quoted:
        assert isinstance(value, str)
        return value, value
    q, e = dialect.quote, dialect.escape
    held = "".join(q if p == "Q" else e if p == "E" else p for p in value)
    escaped = held.replace(e, e + e) if e != q else held
    return q + escaped.replace(q, e + q) + q, held


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_DIALECTS), st.lists(st.lists(_FIELD, min_size=3, max_size=3),
                                            min_size=1, max_size=8),
       st.sampled_from(["\n", "\r\n", "\r"]))
def test_records_with_quoted_line_breaks_take_the_vectorized_pass(
        dialect: Dialect, records: list[list[tuple[bool, str | list[str]]]], end: str) -> None:
    written = [[_write(dialect, quoted, value) for quoted, value in fields]
               for fields in records]
    lines = [dialect.delimiter.join(text for text, _ in fields) for fields in written]
    expected = [{n: (value or None) for n, (_, value) in zip(_NAMES, fields, strict=True)}
                for fields in written]
    data = (end.join(lines) + end).encode()
    options = ReadOptions(delimiter=dialect.delimiter, escape=dialect.escape,
                          quote=dialect.quote)
    block = split_records(data, "csv", options=options)
    texts = block.records.to_pylist()
    blank = [i for i, t in enumerate(texts) if not t.strip()]
    schema = pa.schema([(n, pa.string()) for n in _NAMES])
    parsed = parse_csv(block.records, schema, _NAMES, False, dialect=dialect)
    # Only a record that is white space alone (a blank line: no record) is left over.
    assert parsed.suspects.tolist() == blank, (data, dialect)
    assert [t for t in texts if t.strip()] == lines
    rows = parsed.table.to_pylist()
    assert rows == [r for r, line in zip(expected, lines, strict=True) if line.strip()]
    reference = parse_csv_lines([data.decode()], header=_NAMES, dialect=dialect)
    assert reference.errors == [] and reference.records == rows, (data, dialect)


def test_a_quoted_crlf_lf_and_cr_come_back_as_written() -> None:
    data = b'1,"a\r\nb","c\nd"\r\n2,"e\rf",""\n'
    block = split_records(data, "csv", options=ReadOptions())
    schema = pa.schema([(n, pa.string()) for n in _NAMES])
    parsed = parse_csv(block.records, schema, _NAMES, False)
    assert parsed.suspects.tolist() == []
    assert parsed.table.to_pylist() == [{"a": "1", "b": "a\r\nb", "c": "c\nd"},
                                        {"a": "2", "b": "e\rf", "c": None}]
