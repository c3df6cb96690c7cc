"""Raw JSON / CSV lines into records and parse-error records (with source file + line).

The records then go through :meth:`errortable.capture.Validator.split_records` with their
line numbers, so every error row names the line it came from.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from errortable import records as R
from errortable.config import ErrorTableConfig


@dataclass
class ParseResult:
    """Records parsed from raw lines, the line number of each, and the lines that failed."""

    records: list[dict[str, Any]] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rows_in(self) -> int:
        return len(self.records) + len(self.errors)


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
    return builder.build(reason=R.PARSE, detail=R.exception_detail(error_class, message),
                         error_class=error_class, text=message, record=text, schema=schema,
                         context=context)


def parse_json_lines(lines: Iterable[str | bytes],
                     context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                     first_line: int = 1, config: ErrorTableConfig | None = None,
                     line_numbers: Iterable[int] | None = None) -> ParseResult:
    """Parse JSON lines (one object per line; blank lines are skipped, not rows). A line
    that is not valid UTF-8 or not a JSON object becomes a parse error record. Lines are
    numbered from `first_line`, or by `line_numbers` (one per line) when given."""
    ctx = R.CaptureContext.of(context)
    builder, base, result = R.RecordBuilder(config), ctx.base(), ParseResult()
    for line_no, line in _numbered(lines, first_line, line_numbers):
        text, decode_error = _text(line)
        stripped = text.strip()
        if not stripped:
            continue
        if decode_error is not None:
            result.errors.append(_parse_error(builder, base, line_no, stripped, decode_error))
            continue
        try:
            value = json.loads(stripped)
            if not isinstance(value, dict):
                raise ValueError(f"expected a JSON object, got {type(value).__name__}")
            if "\\u" in stripped:  # a lone surrogate escape is no text Arrow can hold
                json.dumps(value, ensure_ascii=False).encode("utf-8")
        except ValueError as exc:  # UnicodeEncodeError too
            result.errors.append(_parse_error(builder, base, line_no, stripped, exc))
            continue
        result.records.append(value)
        result.line_numbers.append(line_no)
    return result


def parse_csv_lines(lines: Iterable[str | bytes],
                    context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                    header: Sequence[str] | None = None, delimiter: str = ",",
                    first_line: int = 1, config: ErrorTableConfig | None = None,
                    line_numbers: Iterable[int] | None = None) -> ParseResult:
    """Parse CSV lines, one record per line; the first line is the header unless `header`
    is given. Empty fields are null; a line with the wrong number of fields, bad quoting or
    bad UTF-8 is a parse error record. Lines are numbered as in :func:`parse_json_lines`."""
    ctx = R.CaptureContext.of(context)
    builder, base, result = R.RecordBuilder(config), ctx.base(), ParseResult()
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
            result.errors.append(_parse_error(builder, base, line_no, text, exc, schema))
            continue
        if columns is None:
            columns = fields
            continue
        if schema is None:
            schema = json.dumps({"type": "csv", "fields": [
                {"name": c, "type": "string", "nullable": True} for c in columns]},
                separators=(",", ":"))
        if len(fields) != len(columns):
            mismatch = ValueError(f"expected {len(columns)} fields, got {len(fields)}")
            result.errors.append(_parse_error(builder, base, line_no, text, mismatch, schema))
            continue
        result.records.append({c: (v if v != "" else None) for c, v in
                               zip(columns, fields, strict=True)})
        result.line_numbers.append(line_no)
    return result
