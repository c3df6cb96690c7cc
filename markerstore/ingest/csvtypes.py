"""The schema of CSV records inferred from a sample of them, by the rules of Spark's CSV
inference (``inferSchema``, with ``preferDate``), read as the ingest reads values.

Each sampled record is split as every task splits it (the dialect's quote, escape and
white space rules) and named by its own file's header (files may list the columns in
other orders: the ingest reads them by name), and its values follow Spark's null rules
(``nullValue``, ``emptyValue``): a null value types nothing. A column then takes the
first type of Spark's order that reads each of its values::

    BIGINT, DECIMAL(p, 0), DOUBLE, DECIMAL(38, s), DATE, TIMESTAMP, TIMESTAMP_NTZ,
    BOOLEAN, STRING

DECIMAL(p, 0) takes integers past BIGINT's range, and integers grouped as a `locale`
other than en-US groups them (``1.180`` in pt-BR, as Spark's inference reads them);
DECIMAL(38, s) numbers with a fraction as such a locale writes them (``346,50`` in
fr-FR, which Spark infers as STRING). A column of codes with zeros before their first
digit (``08111000``) takes no number type: as a number its zeros would be lost.

reading each value as the ingest's own cast will (:func:`markerstore.values.cast.cast`, with
the patterns of ``dateFormat`` and ``timestampFormat``). So the inferred schema reads
every sampled value without a cast error, which Arrow's own inference does not promise:
it reads ``null`` and ``NA`` as nulls (a column of numbers with one ``NA`` became BIGINT,
and each such record a cast error), ``0x10`` as 16 and a time of day as TIME, which
Spark cannot hold.

Where the ingest reads a value otherwise than Spark (docs/INGEST.md), inference
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
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from markerstore.errors import SchemaError
from markerstore.ingest.blocks import ReadOptions
from markerstore.ingest.schema import MAX_DECIMAL_PRECISION
from markerstore.values import locales, numbers
from markerstore.values.cast import CAST_ERRORS, cast
from markerstore.values.csv import CsvError, field_values, split_record, strip_line_end
from markerstore.values.formats import ValueFormats

TIMESTAMP = pa.timestamp("us", tz="UTC")
TIMESTAMP_NTZ = pa.timestamp("us")


@dataclass(frozen=True)
class Rules:
    """Spark's options of CSV inference: `types` (inferSchema; false: every column
    STRING), `dates` (preferDate); and DuckDB's `null_padding` (a short record's missing
    last fields are null)."""

    types: bool = True
    dates: bool = True
    null_padding: bool = False


Sample = tuple["list[str] | None", Sequence[str]]  # (a file's column names, its records)


def csv_schema(samples: Sequence[Sample], options: ReadOptions,
               formats: ValueFormats | None = None, null_value: str = "",
               empty_value: str = "", rules: Rules = Rules()) -> pa.Schema:
    """The schema of the sampled records (their text, each with or without its line end),
    each file's records with its header's column names (as the ingest reads them, by
    name: the columns in the order they first appear); without names, as Spark names
    columns (_c0, _c1, ...) by the first record's fields."""
    columns: dict[str, list[str | None]] = {}
    sampled = kept = 0
    width = 0
    for names, records in samples:
        rows = [f for f in (_split(r, options) for r in records) if f is not None]
        if names is None:
            if not rows:
                continue
            names = [f"_c{i}" for i in range(len(rows[0]))] if not columns else list(columns)
        width = len(names)
        for name in names:
            columns.setdefault(name, [])
        sampled += len(rows)
        for fields in rows:
            if rules.null_padding and len(fields) < width:
                fields = fields + [("", False)] * (width - len(fields))
            if len(fields) != width:
                continue
            kept += 1
            for name, value in zip(names, field_values(fields, null_value, empty_value),
                                   strict=True):
                columns[name].append(value)
    if not columns:
        raise SchemaError("cannot infer a schema: the CSV source holds no record; "
                          "pass --schema")
    if sampled and not kept:
        raise SchemaError(f"cannot infer a schema: none of the first {sampled} CSV records "
                          f"has the {width} field(s) of its header or of the first record; "
                          "pass --schema")
    return pa.schema([pa.field(name, column_type(values, formats, rules)
                               if rules.types else pa.string())
                      for name, values in columns.items()])


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
    locale = formats.locale if formats is not None else locales.DEFAULT
    if not any(_LEADING_ZEROS.match(v) for v in present):  # else codes, not numbers
        yield pa.int64()
        decimal = _decimal(present, locale)
        if decimal is not None:
            yield decimal
        yield pa.float64()
        fraction = _fraction(present, locale)
        if fraction is not None:
            yield fraction
    if rules.dates:
        yield pa.date32()
    yield TIMESTAMP  # by timestampFormat, else ISO 8601 with an offset
    if formats is None or formats.pattern_for(TIMESTAMP) is None:
        yield TIMESTAMP_NTZ  # ISO 8601 without one (Spark: a TIMESTAMP too)
    yield pa.bool_()


_INTEGER = re.compile(r"[+-]?0*([0-9]+)")
# A number written with zeros before its first digit (a code: 08111000, a zip code, a
# station id): its column is text, where Spark makes it a number and the zeros are lost.
_LEADING_ZEROS = re.compile(r"[+-]?0[0-9]")


def _localized(present: list[str], locale: str) -> list[str]:
    """The values as plain text where they are numbers as `locale` writes them, but in
    en-US (Spark's inference reads no grouping there)."""
    if locales.is_default(locale):
        return present
    return numbers.normalized(pa.array(present, pa.string()), locale).to_pylist()


def _decimal(present: list[str], locale: str = locales.DEFAULT) -> pa.DataType | None:
    """The DECIMAL(p,0) Spark infers for integers past BIGINT's range, and for integers
    written with the grouping of a locale other than en-US, as it merges each value's
    type: DECIMAL(10,0) in INT's range, (20,0) in BIGINT's, else (its digits, 0). None
    when a value is no integer, or the type needs more than 38 digits."""
    whole = 0
    for text in _localized(present, locale):
        match = _INTEGER.fullmatch(text)
        if match is None:
            return None
        digits = match.group(1)
        value = int(digits)
        whole = max(whole, 10 if value < 2**31 else 20 if value < 2**63 else len(digits))
    return pa.decimal128(whole, 0) if whole <= MAX_DECIMAL_PRECISION else None


def _fraction(present: list[str], locale: str) -> pa.DataType | None:
    """The DECIMAL(38,s) of numbers with a fraction as a locale other than en-US writes
    them (``346,50`` in fr-FR), `s` the most fraction digits sampled (Spark infers STRING:
    its inference reads them as doubles, which take no decimal comma); the widest
    precision, as a sample does not tell how large the values past it are. None when a
    value is none, or its digits take more than 38."""
    if locales.is_default(locale):
        return None
    valid = numbers.numbers_of(pa.array(present, pa.string()), locale)
    if not pc.all(valid).as_py():
        return None
    whole = scale = 0
    for text in _localized(present, locale):
        number = Decimal(text).as_tuple()
        exponent = int(number.exponent)
        scale = max(scale, -exponent)
        whole = max(whole, len(number.digits) + exponent)
    if not scale or whole + scale > MAX_DECIMAL_PRECISION:
        return None
    return pa.decimal128(MAX_DECIMAL_PRECISION, scale)
