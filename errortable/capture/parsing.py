"""Raw JSON / CSV records into records and parse-error records (with source file + line).

The records then go through :meth:`errortable.capture.validator.Validator.split_records` with their
line numbers, so every error row names the line it came from. :func:`parse_json_lines` and
:func:`parse_csv_lines` take physical lines (a CSV record may span several: see
:mod:`markerstore.values.csv`) and give the error records as dicts; :func:`parse_json_block`
and :func:`parse_csv_block` take whole records and give the same error records as one
Arrow table built column by column (for a block of suspect records in ingest: no dict and
no record build per bad record). :func:`raw_errors` makes the error records of records
that are not text (bytes that are not UTF-8, reason ``encoding``; a record over the size
limit, reason ``size``).

A record whose bytes are not UTF-8 keeps them exactly: ``record`` holds its text with
U+FFFD for the bad bytes (to read), ``context['recordBase64']`` its bytes (to recover),
unless a PII policy drops payloads.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from errortable.capture import records as R
from errortable.capture.errorrows import parse_error_table
from errortable.config import ErrorTableConfig
from markerstore.values.csv import CsvError, Dialect, field_values, join_records, split_record
from markerstore.values.json import load_object
from markerstore.values.shapes import ShapeError


@dataclass(frozen=True)
class ParseOptions:
    """How records read (Spark's option names, see markerstore.config): CSV `null_value`
    and `empty_value`; JSON `allow_non_numeric_numbers`, `text_columns`, the STRING
    columns that take any JSON value as its JSON text, and `binary_columns`, the BINARY
    columns whose JSON strings are base64; CSV `null_padding` (DuckDB's): a record with
    fewer fields than the header has nulls for the missing last ones."""

    null_value: str = ""
    empty_value: str = ""
    allow_non_numeric_numbers: bool = True
    text_columns: frozenset[str] = frozenset()
    binary_columns: frozenset[str] = frozenset()
    null_padding: bool = False


@dataclass
class Failure:
    """One record that failed to parse: where it starts, its text, why; `extra` context
    entries (the bytes of a record that is not UTF-8, the size of one too large)."""

    line: int
    text: str
    exc: BaseException
    schema: str | None = None
    offset: int | None = None
    reason: str = R.PARSE
    extra: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Only the exception's class and text go into the error record; its traceback
        # holds the parser's frames (several KiB a record), so a block of many bad
        # records would hold them all at once.
        self.exc.__traceback__ = None
        self.exc.__context__ = None


class RecordTooLarge(ShapeError):
    """A record larger than the size limit (markerstore.ingest.record.max_bytes): its text
    names sizes only."""


@dataclass
class ParseResult:
    """Records parsed from raw lines, the line number of each, and the lines that failed."""

    records: list[dict[str, Any]] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_in(self) -> int:
        return len(self.records) + len(self.errors)


@dataclass
class BlockParse:
    """Records parsed from a block, their line numbers, and the parse-error records as an
    Arrow table in the ErrorRecord schema."""

    records: list[dict[str, Any]]
    line_numbers: list[int]
    errors: pa.Table


_ESCAPED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8, escaped

# (line number, byte offset or None, text or bytes) of each record
Numbered = Iterator[tuple[int, "int | None", "str | bytes"]]


def encoding_failure(line: int, data: bytes, offset: int | None = None,
                     encoding: str = "utf-8") -> Failure:
    """The failure of a record whose bytes are not `encoding` (a Python codec; its bytes
    kept in base64)."""
    try:
        data.decode(encoding)
        raise ValueError(f"not an encoding failure: the bytes are {encoding}")
    except UnicodeDecodeError as exc:
        return Failure(line, data.decode(encoding, "replace"), exc, None, offset, R.ENCODING,
                       {R.RECORD_BASE64: base64.b64encode(data).decode("ascii")})


def size_failure(line: int, prefix: bytes, size: int, limit: int,
                 offset: int | None = None) -> Failure:
    """The failure of a record of `size` bytes, over `limit`; `prefix` is its start."""
    exc = RecordTooLarge(f"a record of {size} bytes, larger than the limit of {limit} bytes "
                         f"(markerstore.ingest.record.max_bytes); record holds its first "
                         f"{len(prefix)} bytes")
    return Failure(line, prefix.decode("utf-8", "replace"), exc, None, offset, R.SIZE,
                   {R.RECORD_BYTES: str(size)})


def _numbered(lines: Iterable[str | bytes], first_line: int,
              line_numbers: Iterable[int] | None, offsets: Iterable[int] | None = None
              ) -> Numbered:
    numbers = itertools.count(first_line) if line_numbers is None else iter(line_numbers)
    places: Iterator[int | None] = iter(offsets) if offsets is not None else \
        itertools.repeat(None)
    for line in lines:
        yield next(numbers), next(places), line


def _texts(records: Numbered) -> Iterator[tuple[int, int | None, str | Failure]]:
    """Each record as text, or, when its bytes are not UTF-8, as its failure."""
    for line_no, offset, item in records:
        if not isinstance(item, bytes):
            yield line_no, offset, item
            continue
        try:
            yield line_no, offset, item.decode("utf-8")
        except UnicodeDecodeError:
            yield line_no, offset, encoding_failure(line_no, item, offset)


def _json_records(records: Numbered, result: ParseResult | BlockParse,
                  options: ParseOptions) -> Iterator[Failure]:
    """Parse JSON records into `result`'s records; yield the records that fail."""
    for line_no, offset, line in _texts(records):
        if isinstance(line, Failure):
            yield line
            continue
        stripped = line.strip()
        if not stripped:
            continue
        try:
            value = load_object(stripped, options.allow_non_numeric_numbers,
                                options.text_columns, options.binary_columns)
        except (ValueError, RecursionError) as exc:  # UnicodeEncodeError too
            yield Failure(line_no, stripped, exc, None, offset)
            continue
        result.records.append(value)
        result.line_numbers.append(line_no)


def _csv_records(records: Numbered, header: Sequence[str] | None, dialect: Dialect,
                 result: ParseResult | BlockParse, options: ParseOptions
                 ) -> Iterator[Failure]:
    """Parse CSV records into `result`'s records; yield the records that fail (an empty
    record and a comment line are none)."""
    comment = dialect.comment
    columns = list(header) if header is not None else None
    twice = _named_twice(columns)
    schema = _csv_schema(columns, twice)
    for line_no, offset, record in _texts(records):
        if isinstance(record, Failure):
            yield record
            continue
        if not record or (comment and record.startswith(comment)):
            continue  # an empty line; one of spaces is a record (RFC 4180: spaces are
        try:  # part of a field), of one field
            fields = split_record(record, dialect=dialect)
        except CsvError as exc:
            yield Failure(line_no, record, exc, schema, offset)
            continue
        if columns is None:
            columns = [value for value, _ in fields]
            twice = _named_twice(columns)
            schema = _csv_schema(columns, twice)
            continue
        if twice is not None:  # which of the fields is the column's is unknown
            yield Failure(line_no, record, twice, schema, offset)
            continue
        if options.null_padding and len(fields) < len(columns):
            fields = fields + [("", False)] * (len(columns) - len(fields))
        if len(fields) != len(columns):
            mismatch = ShapeError(f"expected {len(columns)} fields, got {len(fields)}")
            yield Failure(line_no, record, mismatch, schema, offset)
            continue
        values = field_values(fields, options.null_value, options.empty_value)
        result.records.append(dict(zip(columns, values, strict=True)))
        result.line_numbers.append(line_no)


def _csv_schema(columns: Sequence[str] | None, twice: ShapeError | None) -> str | None:
    """The `schema` of a CSV record's error record: its header's columns, as text (None
    before the header is known, or when it names a column twice)."""
    if columns is None or twice is not None:
        return None
    return json.dumps({"type": "csv", "fields": [
        {"name": c, "type": "string", "nullable": True} for c in columns]},
        separators=(",", ":"))


def _named_twice(columns: Sequence[str] | None) -> ShapeError | None:
    """The error of every record under a header that names a column twice, or None."""
    seen: set[str] = set()
    for name in columns or ():
        if name in seen:
            return ShapeError(f"the header names column {json.dumps(name)} twice: which "
                              "field is the column's is unknown")
        seen.add(name)
    return None


def _as_dicts(failures: Iterable[Failure], config: ErrorTableConfig | None,
              base: dict[str, str]) -> list[dict[str, Any]]:
    builder = R.RecordBuilder(config)
    return [failure_record(builder, base, f) for f in failures]


def failure_record(builder: R.RecordBuilder, base: Mapping[str, str], failure: Failure
                   ) -> dict[str, Any]:
    """The error record of one failure, built by `builder` (its PII policy applied: a
    policy that drops or redacts payloads drops the raw bytes too)."""
    context = dict(base)
    context[R.SOURCE_LINE] = str(failure.line)
    if failure.offset is not None:
        context[R.SOURCE_OFFSET] = str(failure.offset)
    context.update((k, v) for k, v in failure.extra.items()
                   if not (builder.protects and k == R.RECORD_BASE64))
    error_class = type(failure.exc).__name__
    message = " ".join(str(failure.exc).split())
    safe = R.safe_exception_text(failure.exc) if builder.protects else None
    detail = message if not builder.protects else safe or ""
    return builder.build(reason=failure.reason,
                         detail=R.exception_detail(error_class, detail),
                         error_class=error_class, text=message, record=failure.text,
                         schema=failure.schema, context=context, safe_text=safe)


def failures_table(failures: Iterable[Failure], config: ErrorTableConfig | None,
              base: dict[str, str]) -> pa.Table:
    """The parse-error records column by column (the same records as :func:`_as_dicts`
    builds one by one, which it still does under a PII policy)."""
    from errortable import schema as S

    found = list(failures)
    builder = R.RecordBuilder(config)
    table = parse_error_table(builder, base, found)
    if table is None:
        return S.records_to_arrow(_as_dicts(found, config, base))
    return table


def raw_errors(failures: Iterable[Failure],
               context: R.CaptureContext | Mapping[str, Any] | None = None, *,
               config: ErrorTableConfig | None = None) -> pa.Table:
    """The error records of failures made elsewhere (:func:`encoding_failure`,
    :func:`size_failure`), as one Arrow table."""
    return failures_table(failures, config, R.CaptureContext.of(context).base())


def _text_lines(lines: Iterable[str | bytes], dialect: Dialect) -> Iterator[
        tuple[int, str | bytes]]:
    """Physical CSV lines joined into records: (index of the first line, record). A record
    with a line that is not UTF-8 is given as bytes (each line's bytes, joined)."""
    texts = [line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
             for line in lines]
    for first, record in join_records(texts, dialect=dialect):
        if _ESCAPED.search(record):  # a line that was not UTF-8: its bytes again
            yield first, record.encode("utf-8", "surrogateescape")
        else:
            yield first, record


def parse_json_lines(lines: Iterable[str | bytes],
                     context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                     first_line: int = 1, config: ErrorTableConfig | None = None,
                     line_numbers: Iterable[int] | None = None,
                     options: ParseOptions | None = None) -> ParseResult:
    """Parse JSON lines (one object per line; blank lines are skipped, not rows). A line
    that is not a JSON object becomes a parse error record, one whose bytes are not UTF-8
    an encoding error record. Lines are numbered from `first_line`, or by `line_numbers`
    (one per line) when given."""
    result = ParseResult()
    failures = _json_records(_numbered(lines, first_line, line_numbers), result,
                             options or ParseOptions())
    result.errors = _as_dicts(failures, config, R.CaptureContext.of(context).base())
    return result


def parse_json_block(lines: Iterable[str | bytes],
                     context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                     config: ErrorTableConfig | None = None,
                     line_numbers: Iterable[int] | None = None,
                     offsets: Iterable[int] | None = None,
                     options: ParseOptions | None = None) -> BlockParse:
    """:func:`parse_json_lines` with the error records as one Arrow table; `offsets` are
    the byte offsets of the records in their file (the errors' ``sourceOffset``)."""
    result = BlockParse([], [], pa.table({}))
    failures = _json_records(_numbered(lines, 1, line_numbers, offsets), result,
                             options or ParseOptions())
    result.errors = failures_table(failures, config, R.CaptureContext.of(context).base())
    return result


def parse_csv_lines(lines: Iterable[str | bytes],
                    context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                    header: Sequence[str] | None = None, delimiter: str = ",",
                    first_line: int = 1, config: ErrorTableConfig | None = None,
                    line_numbers: Iterable[int] | None = None,
                    options: ParseOptions | None = None, escape: str = '"',
                    dialect: Dialect | None = None) -> ParseResult:
    """Parse CSV lines as RFC 4180 records (a quoted field may hold line breaks, so a
    record may span lines; it is numbered by its first line); the first record is the
    header unless `header` is given. Empty fields are null (see :class:`ParseOptions`); a
    record with the wrong number of fields or bad quoting is a parse error record, one
    whose bytes are not UTF-8 an encoding error record. Lines are numbered as in
    :func:`parse_json_lines`. `dialect` (else the `delimiter` and `escape`) says how the
    text is written (:class:`markerstore.values.csv.Dialect`)."""
    result = ParseResult()
    dialect = Dialect.of(dialect, delimiter, escape)
    numbers = list(line_numbers) if line_numbers is not None else None
    joined = ((numbers[i] if numbers is not None else first_line + i, None, record)
              for i, record in _text_lines(lines, dialect))
    failures = _csv_records(joined, header, dialect, result, options or ParseOptions())
    result.errors = _as_dicts(failures, config, R.CaptureContext.of(context).base())
    return result


def parse_csv_block(records: Iterable[str | bytes],
                    context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                    header: Sequence[str] | None = None, delimiter: str = ",",
                    config: ErrorTableConfig | None = None,
                    line_numbers: Iterable[int] | None = None,
                    offsets: Iterable[int] | None = None,
                    options: ParseOptions | None = None, escape: str = '"',
                    dialect: Dialect | None = None) -> BlockParse:
    """Whole CSV records (each may hold line breaks in quoted fields) parsed as
    :func:`parse_csv_lines` parses them, the error records as one Arrow table."""
    result = BlockParse([], [], pa.table({}))
    failures = _csv_records(_numbered(records, 1, line_numbers, offsets), header,
                            Dialect.of(dialect, delimiter, escape), result,
                            options or ParseOptions())
    result.errors = failures_table(failures, config, R.CaptureContext.of(context).base())
    return result
