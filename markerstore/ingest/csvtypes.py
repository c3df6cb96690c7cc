"""The schema of CSV records inferred from a sample of them, by the rules of Spark's CSV
inference (``inferSchema``, with ``preferDate``), read as the ingest reads values.

Each sampled record is split as every task splits it (the dialect's quote, escape and
white space rules), and its values follow Spark's null rules (``nullValue``,
``emptyValue``): a null value types nothing. A column then takes the first type of
Spark's order that reads each of its values::

    BIGINT, DECIMAL(p, 0), DOUBLE, DATE, TIMESTAMP, BOOLEAN, STRING

reading each value as the ingest's own cast will (:func:`errortable.convert.cast`, with
the patterns of ``dateFormat`` and ``timestampFormat``). So the inferred schema reads
every sampled value without a cast error, which Arrow's own inference does not promise:
it reads ``null`` and ``NA`` as nulls (a column of numbers with one ``NA`` became BIGINT,
and each such record a cast error), ``0x10`` as 16 and a time of day as TIME, which
Spark cannot hold.

Where the ingest reads a value otherwise than Spark (docs/ERROR_TABLE.md), inference
follows the ingest: `` 7`` is no number (Spark: DOUBLE), ``1`` and ``true`` in one
column are BOOLEAN (Spark: STRING); and a time of day is text (Spark's default parser
reads ``10:00:00`` as that time today). Spark's INT and BIGINT are both BIGINT here. A
record that does not split, or has another number of fields than the first, is left
out of the sample: it is an error record when the ingest reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from errortable.convert import CAST_ERRORS, cast
from errortable.csvtext import CsvError, field_values, split_record, strip_line_end
from errortable.datetimes import ValueFormats
from markerstore.errors import SchemaError
from markerstore.ingest.blocks import ReadOptions
from markerstore.ingest.schema import MAX_DECIMAL_PRECISION

TIMESTAMP = pa.timestamp("us", tz="UTC")
TIMESTAMP_NTZ = pa.timestamp("us")


@dataclass(frozen=True)
class Rules:
    """Spark's options of CSV inference: `types` (inferSchema; false: every column
    STRING), `dates` (preferDate)."""

    types: bool = True
    dates: bool = True


def csv_schema(header: str | None, records: Sequence[str], options: ReadOptions,
               formats: ValueFormats | None = None, null_value: str = "",
               empty_value: str = "", rules: Rules = Rules()) -> pa.Schema:
    """The schema of `records` (their text, each with or without its line end): named by
    the `header` record, else as Spark names columns (_c0, _c1, ...)."""
    rows = [fields for fields in (_split(r, options) for r in records) if fields is not None]
    if header is not None:
        named = _split(header, options)
        if named is None:
            raise SchemaError("cannot infer a schema: the CSV header record does not split "
                              "into fields (a stray quote?); pass --schema")
        names = [value for value, _ in named]
    elif rows:
        names = [f"_c{i}" for i in range(len(rows[0]))]
    else:
        raise SchemaError("cannot infer a schema: the CSV source holds no record; "
                          "pass --schema")
    width = len(names)
    sampled = len(rows)
    rows = [r for r in rows if len(r) == width]
    if sampled and not rows:
        raise SchemaError(f"cannot infer a schema: none of the first {sampled} CSV records "
                          f"has the {width} field(s) of the "
                          f"{'header' if header is not None else 'first'}; pass --schema")
    columns: list[list[str | None]] = [[] for _ in range(width)]
    for fields in rows:
        for column, value in zip(columns, field_values(fields, null_value, empty_value),
                                 strict=True):
            column.append(value)
    return pa.schema([pa.field(name, column_type(values, formats, rules)
                               if rules.types else pa.string())
                      for name, values in zip(names, columns, strict=True)])


def _split(text: str, options: ReadOptions) -> list[tuple[str, bool]] | None:
    try:
        return split_record(strip_line_end(text, options.line_sep), dialect=options.dialect)
    except CsvError:
        return None


def column_type(values: Sequence[str | None], formats: ValueFormats | None = None,
                rules: Rules = Rules()) -> pa.DataType:
    """The first type of Spark's order that reads every value (nulls aside); STRING for a
    column of nulls only."""
    present = [v for v in values if v is not None]
    if not present:
        return pa.string()
    array = pa.array(present, pa.string())
    for target in _candidates(present, formats, rules):
        try:
            cast(array, target, formats)
        except CAST_ERRORS:
            continue
        return target
    return pa.string()


def _candidates(present: list[str], formats: ValueFormats | None, rules: Rules
                ) -> Iterator[pa.DataType]:
    yield pa.int64()
    decimal = _decimal(present)
    if decimal is not None:
        yield decimal
    yield pa.float64()
    if rules.dates:
        yield pa.date32()
    yield TIMESTAMP  # by timestampFormat, else ISO 8601 with an offset
    if formats is None or formats.pattern_for(TIMESTAMP) is None:
        yield TIMESTAMP_NTZ  # ISO 8601 without one (Spark: a TIMESTAMP too)
    yield pa.bool_()


_INTEGER = re.compile(r"[+-]?0*([0-9]+)")


def _decimal(present: list[str]) -> pa.DataType | None:
    """The DECIMAL(p,0) Spark infers for integers past BIGINT's range, as it merges each
    value's type: DECIMAL(10,0) in INT's range, (20,0) in BIGINT's, else (its digits, 0).
    None when a value is no integer, or the type needs more than 38 digits."""
    whole = 0
    for text in present:
        match = _INTEGER.fullmatch(text)
        if match is None:
            return None
        digits = match.group(1)
        value = int(digits)
        whole = max(whole, 10 if value < 2**31 else 20 if value < 2**63 else len(digits))
    return pa.decimal128(whole, 0) if whole <= MAX_DECIMAL_PRECISION else None
