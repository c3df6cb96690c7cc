"""Raw JSON / CSV lines into records and parse-error records (with source file + line).

The records then go through :meth:`errortable.capture.Validator.split_records` with their
line numbers, so every error row names the line it came from. :func:`parse_json_lines` and
:func:`parse_csv_lines` give the error records as dicts; :func:`parse_json_block` and
:func:`parse_csv_block` give the same records as one Arrow table built column by column
(for a block of suspect lines in ingest: no dict and no record build per bad line).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from errortable import records as R
from errortable.config import ErrorTableConfig
from errortable.errorrows import parse_error_table
from errortable.pii import ShapeError

# One line that failed to parse: (line number, text, exception, source schema or None).
LineFailure = tuple[int, str, BaseException, "str | None"]


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
    """Records parsed from a block of lines, their line numbers, and the parse-error
    records as an Arrow table in the ErrorRecord schema."""

    records: list[dict[str, Any]]
    line_numbers: list[int]
    errors: pa.Table


def _text(line: str | bytes) -> tuple[str, BaseException | None]:
    if isinstance(line, bytes):
        try:
            return line.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            return line.decode("utf-8", "replace"), exc
    return line, None


def _numbered(lines: Iterable[str | bytes], first_line: int,
              line_numbers: Iterable[int] | None) -> Iterable[tuple[int, str | bytes]]:
    if line_numbers is None:
        return enumerate(lines, start=first_line)
    return zip(line_numbers, lines, strict=True)


def _parse_error(builder: R.RecordBuilder, base: dict[str, str], line_no: int, text: str,
                 exc: BaseException, schema: str | None = None) -> dict[str, Any]:
    context = dict(base)
    context[R.SOURCE_LINE] = str(line_no)
    error_class = type(exc).__name__
    message = " ".join(str(exc).split())
    safe = R.safe_exception_text(exc) if builder.protects else None
    detail = message if not builder.protects else safe or ""
    return builder.build(reason=R.PARSE, detail=R.exception_detail(error_class, detail),
                         error_class=error_class, text=message, record=text, schema=schema,
                         context=context, safe_text=safe)


def _json_lines(lines: Iterable[str | bytes], first_line: int,
                line_numbers: Iterable[int] | None, result: ParseResult | BlockParse
                ) -> Iterator[LineFailure]:
    """Parse JSON lines into `result`'s records; yield the lines that fail."""
    loads = json.loads
    for line_no, line in _numbered(lines, first_line, line_numbers):
        text, decode_error = _text(line)
        stripped = text.strip()
        if not stripped:
            continue
        if decode_error is not None:
            yield line_no, stripped, decode_error, None
            continue
        try:
            value = loads(stripped)
            if not isinstance(value, dict):
                raise ShapeError(f"expected a JSON object, got {type(value).__name__}")
            if "\\u" in stripped:  # a lone surrogate escape is no text Arrow can hold
                json.dumps(value, ensure_ascii=False).encode("utf-8")
        except ValueError as exc:  # UnicodeEncodeError too
            yield line_no, stripped, exc, None
            continue
        result.records.append(value)
        result.line_numbers.append(line_no)


def _csv_lines(lines: Iterable[str | bytes], header: Sequence[str] | None, delimiter: str,
               first_line: int, line_numbers: Iterable[int] | None,
               result: ParseResult | BlockParse) -> Iterator[LineFailure]:
    """Parse CSV lines into `result`'s records; yield the lines that fail."""
    columns = list(header) if header is not None else None
    schema = None
    for line_no, line in _numbered(lines, first_line, line_numbers):
        text, decode_error = _text(line)
        text = text.rstrip("\r\n")
        if not text.strip():
            continue
        try:
            if decode_error is not None:
                raise decode_error
            fields = next(csv.reader([text], delimiter=delimiter, strict=True))
        except (csv.Error, UnicodeDecodeError, StopIteration) as exc:
            yield line_no, text, exc, schema
            continue
        if columns is None:
            columns = fields
            continue
        if schema is None:
            schema = json.dumps({"type": "csv", "fields": [
                {"name": c, "type": "string", "nullable": True} for c in columns]},
                separators=(",", ":"))
        if len(fields) != len(columns):
            mismatch = ShapeError(f"expected {len(columns)} fields, got {len(fields)}")
            yield line_no, text, mismatch, schema
            continue
        result.records.append({c: (v if v != "" else None) for c, v in
                               zip(columns, fields, strict=True)})
        result.line_numbers.append(line_no)


def _as_dicts(failures: Iterable[LineFailure], config: ErrorTableConfig | None,
              base: dict[str, str]) -> list[dict[str, Any]]:
    builder = R.RecordBuilder(config)
    return [_parse_error(builder, base, line_no, text, exc, schema)
            for line_no, text, exc, schema in failures]


def _as_table(failures: Iterable[LineFailure], config: ErrorTableConfig | None,
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


def parse_json_lines(lines: Iterable[str | bytes],
                     context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                     first_line: int = 1, config: ErrorTableConfig | None = None,
                     line_numbers: Iterable[int] | None = None) -> ParseResult:
    """Parse JSON lines (one object per line; blank lines are skipped, not rows). A line
    that is not valid UTF-8 or not a JSON object becomes a parse error record. Lines are
    numbered from `first_line`, or by `line_numbers` (one per line) when given."""
    result = ParseResult()
    failures = _json_lines(lines, first_line, line_numbers, result)
    result.errors = _as_dicts(failures, config, R.CaptureContext.of(context).base())
    return result


def parse_json_block(lines: Iterable[str | bytes],
                     context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                     config: ErrorTableConfig | None = None,
                     line_numbers: Iterable[int] | None = None) -> BlockParse:
    """:func:`parse_json_lines` with the error records as one Arrow table."""
    result = BlockParse([], [], pa.table({}))
    failures = _json_lines(lines, 1, line_numbers, result)
    result.errors = _as_table(failures, config, R.CaptureContext.of(context).base())
    return result


def parse_csv_lines(lines: Iterable[str | bytes],
                    context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                    header: Sequence[str] | None = None, delimiter: str = ",",
                    first_line: int = 1, config: ErrorTableConfig | None = None,
                    line_numbers: Iterable[int] | None = None) -> ParseResult:
    """Parse CSV lines, one record per line; the first line is the header unless `header`
    is given. Empty fields are null; a line with the wrong number of fields, bad quoting or
    bad UTF-8 is a parse error record. Lines are numbered as in :func:`parse_json_lines`."""
    result = ParseResult()
    failures = _csv_lines(lines, header, delimiter, first_line, line_numbers, result)
    result.errors = _as_dicts(failures, config, R.CaptureContext.of(context).base())
    return result


def parse_csv_block(lines: Iterable[str | bytes],
                    context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                    header: Sequence[str] | None = None, delimiter: str = ",",
                    config: ErrorTableConfig | None = None,
                    line_numbers: Iterable[int] | None = None) -> BlockParse:
    """:func:`parse_csv_lines` with the error records as one Arrow table."""
    result = BlockParse([], [], pa.table({}))
    failures = _csv_lines(lines, header, delimiter, 1, line_numbers, result)
    result.errors = _as_table(failures, config, R.CaptureContext.of(context).base())
    return result
