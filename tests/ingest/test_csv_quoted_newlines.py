"""Records with a quoted line break (CR, LF or CRLF inside a quoted field) are read by the
vectorized pass, not handed to the reference parser, and read the same as there: the
line break kept as written, an escaped quote unescaped, for the default dialect, a
backslash escape and another quote character."""

from __future__ import annotations

import dataclasses
import re

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errortable import parse_csv_lines
from errortable.capture.parsing import ParseOptions
from markerstore.ingest.blocks import ReadOptions, split_records
from markerstore.ingest.parse import csv_text
from markerstore.values.csv import Dialect

_DIALECTS = [Dialect(), Dialect(escape="\\"), Dialect(quote="'", escape="'"),
             Dialect(delimiter=";", quote="'", escape="\\")]
_NAMES = ["a", "b", "c"]
# Characters of a value: line breaks, the delimiters and quotes of every dialect above,
# text (Q and E: the dialect's quote and escape, written escaped in a quoted field).
_QUOTED = st.lists(st.sampled_from(["\n", "\r", "\r\n", "x", "é", " ", ",", ";", "Q", "E",
                                    "\r\n\r\n", "yz"]), max_size=6)
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


def _expected(fields: list[tuple[str, str, bool]], null_value: str, empty_value: str
              ) -> dict[str, str | None]:
    """Spark's values: an empty plain field is `null_value`, ``""`` is `empty_value`, and
    a value equal to `null_value` is null."""
    values = [(empty_value if quoted else null_value) if value == "" else value
              for _, value, quoted in fields]
    return {n: (None if v == null_value else v)
            for n, v in zip(_NAMES, values, strict=True)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_DIALECTS), st.lists(st.lists(_FIELD, min_size=3, max_size=3),
                                            min_size=1, max_size=8),
       st.sampled_from(["\n", "\r\n", "\r"]), st.sampled_from(["", "x", "1"]),
       st.sampled_from(["", "x", "e"]), st.sampled_from([(False, False), (True, False),
                                                        (False, True)]))
def test_records_with_quoted_line_breaks_take_the_vectorized_pass(
        drawn: Dialect, records: list[list[tuple[bool, str | list[str]]]], end: str,
        null_value: str, empty_value: str, ignore: tuple[bool, bool]) -> None:
    dialect = dataclasses.replace(drawn, ignore_leading=ignore[0], ignore_trailing=ignore[1])
    written = [[(*_write(dialect, quoted, value), quoted) for quoted, value in fields]
               for fields in records]
    lines = [dialect.delimiter.join(text for text, _, _ in fields) for fields in written]
    data = (end.join(lines) + end).encode()
    options = ReadOptions(delimiter=dialect.delimiter, escape=dialect.escape,
                          quote=dialect.quote, ignore_leading=ignore[0],
                          ignore_trailing=ignore[1])
    block = split_records(data, "csv", options=options)
    assert block.records.to_pylist() == lines
    schema = pa.schema([(n, pa.string()) for n in _NAMES])
    parsed = csv_text(block.records, schema, _NAMES, False, null_value, empty_value,
                      dialect=dialect)
    # Only what Arrow may read otherwise is left to the reference parser: where ``""``
    # is not null, a record with two quotes between delimiters (a quoted empty field,
    # or text that looks like one inside a quoted value); white space where it is
    # ignored around values. A line break never is.
    d, q = re.escape(dialect.delimiter), re.escape(dialect.quote)
    left = [i for i, line in enumerate(lines)
            if (empty_value != null_value and re.search(f"(^|{d}){q}{q}({d}|$)", line))
            or ((dialect.ignore_leading or dialect.ignore_trailing) and " " in line)]
    assert parsed.suspects.tolist() == left, (data, dialect)
    expected = [_expected(fields, null_value, empty_value) for fields in written]
    assert parsed.table.to_pylist() == [expected[i] for i in parsed.rows.tolist()]
    reference = parse_csv_lines([data.decode()], header=_NAMES, dialect=dialect,
                                options=ParseOptions(null_value=null_value,
                                                     empty_value=empty_value))
    assert reference.errors == [] and reference.records == expected, (data, dialect)


def test_a_quoted_crlf_lf_and_cr_come_back_as_written() -> None:
    data = b'1,"a\r\nb","c\nd"\r\n2,"e\rf",""\n'
    block = split_records(data, "csv", options=ReadOptions())
    schema = pa.schema([(n, pa.string()) for n in _NAMES])
    parsed = csv_text(block.records, schema, _NAMES, False, dialect=Dialect())
    assert parsed.suspects.tolist() == []
    assert parsed.table.to_pylist() == [{"a": "1", "b": "a\r\nb", "c": "c\nd"},
                                        {"a": "2", "b": "e\rf", "c": None}]
