"""What ingest reads of the source on the driver, before Spark starts: a schema inferred
from the first records (when none is given) and the header record of each CSV file."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable.convert import CAST_ERRORS, cast
from errortable.datetimes import ValueFormats
from markerstore.errors import SchemaError
from markerstore.ingest.blocks import ReadOptions, read_blocks
from markerstore.ingest.header import Header, read_header_at
from markerstore.ingest.sources import SourceTask

SAMPLE_BYTES = 1024 * 1024  # read a block at a time: a first record may be huge


def _records(task: SourceTask, storage_options: Mapping[str, Any] | None, limit: int,
             options: ReadOptions) -> list[str]:
    """The first `limit` text records of a task (a CSV record may span lines)."""
    found: list[str] = []
    for block in read_blocks(task, dict(storage_options or {}), SAMPLE_BYTES, options):
        found += block.records.slice(0, limit - len(found)).to_pylist()
        if len(found) >= limit:
            break
    return found


def infer_schema(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
                 sample_lines: int = 2000, options: ReadOptions | None = None,
                 header: bool = True, formats: ValueFormats | None = None) -> pa.Schema:
    """A schema from the first records of the source (Parquet: the file's own schema).
    CSV records are read with `options` (its separator); without a `header` record the
    columns are named as Spark names them, _c0, _c1, ... Dates and timestamps in CSV are
    inferred by Spark's rules, with the patterns of `formats` (see _spark_type)."""
    first = tasks[0]
    if first.format == "parquet":
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(first.url, "rb", **dict(storage_options or {})) as handle:
            return pq.read_schema(handle)
    options = options or ReadOptions()
    lines: list[str] = []
    for task in tasks:
        # an empty CSV record is none (one of spaces is one, as in every task), a blank
        # JSON line neither
        lines += [t for t in _records(task, storage_options, sample_lines, options)
                  if (t if first.format == "csv" else t.strip())]
        if len(lines) >= sample_lines:
            break
    lines = lines[:sample_lines]
    if first.format == "csv":
        return _csv_schema(lines, options, header, formats)
    records = []
    for text in lines:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    if not records:
        raise SchemaError("cannot infer a schema: the first lines hold no JSON object; "
                          "pass --schema")
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    fields = []
    for name in names:
        values = [r.get(name) for r in records]
        try:
            arrow_type = pa.array(values).type
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrow_type = pa.string()
        if arrow_type == pa.null():
            arrow_type = pa.string()
        fields.append(pa.field(name, arrow_type))
    return pa.schema(fields)


def _csv_schema(lines: list[str], options: ReadOptions, header: bool,
                formats: ValueFormats | None) -> pa.Schema:
    if not lines:
        raise SchemaError("cannot infer a schema: the CSV source holds no record; "
                          "pass --schema")
    text = "\n".join(lines).encode()
    table = _read_sample(text, options, header)
    temporal = [f.name for f in table.schema if _is_temporal(f.type)]
    if temporal:  # Spark's own rules decide these: read their text
        texts = _read_sample(text, options, header, {n: pa.string() for n in temporal})
    else:
        texts = table
    fields = [_spark_type(f, texts.column(i), formats) for i, f in enumerate(table.schema)]
    if not header:
        fields = [f.with_name(f"_c{i}") for i, f in enumerate(fields)]
    return pa.schema(fields)


def _read_sample(text: bytes, options: ReadOptions, header: bool,
                 column_types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
    """The sampled records as Arrow reads and types them (`column_types` aside)."""
    import pyarrow.csv as pcsv

    from markerstore.ingest.reader import arrow_dialect

    try:
        return pcsv.read_csv(
            pa.BufferReader(text),
            read_options=pcsv.ReadOptions(autogenerate_column_names=not header),
            parse_options=arrow_dialect(options.delimiter, options.escape,
                                        newlines_in_values=True, quote=options.quote),
            convert_options=pcsv.ConvertOptions(column_types=column_types))
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # its message may quote a record
        raise SchemaError("cannot infer a schema: the first CSV records do not read as "
                          "one table (a record with another number of fields?); pass "
                          "--schema") from None


def _is_temporal(arrow_type: pa.DataType) -> bool:
    return (pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type)
            or pa.types.is_timestamp(arrow_type))


def _spark_type(field: pa.Field, values: pa.ChunkedArray, formats: ValueFormats | None
                ) -> pa.Field:
    """`field` as Spark's CSV inference types a column of text (its ``preferDate``
    rules): a DATE if every sampled value (not null, not empty) reads by ``dateFormat``,
    else a TIMESTAMP if every one reads by ``timestampFormat`` (each pattern given in
    `formats`, else ISO 8601 as Arrow reads it), else text. So a time of day is text,
    as in Spark; and a column Arrow would type by ISO 8601 is text when a pattern given
    reads none of it. A timestamp read by a pattern is UTC (Spark's TIMESTAMP); one
    read as ISO 8601 keeps the type Arrow gives it."""
    if not (pa.types.is_string(field.type) or _is_temporal(field.type)):
        return field
    text = values.combine_chunks()
    text = text.filter(pc.fill_null(pc.not_equal(text, ""), False))
    if len(text) == 0:
        return field
    patterned = formats is not None and formats.pattern_for(pa.timestamp("us", tz="UTC"))
    if patterned:
        stamp: pa.DataType = pa.timestamp("us", tz="UTC")
    else:
        stamp = field.type if pa.types.is_timestamp(field.type) else pa.timestamp("s")
    for target in (pa.date32(), stamp):
        try:
            cast(text, target, formats)
        except CAST_ERRORS:
            continue
        return field.with_type(target)
    return field.with_type(pa.string())


_SEPARATORS = {";": "';'", "\t": "a tab ('\\t')", "|": "'|'", ",": "','"}


def separator_hint(url: str, header: str, options: ReadOptions) -> str | None:
    """Why `header` looks read with the wrong separator (one column, holding another
    common separator), or None."""
    from errortable.csvtext import CsvError, split_record

    try:
        fields = split_record(header, dialect=options.dialect)
    except CsvError:
        return None
    others = [s for s in _SEPARATORS if s != options.delimiter and s in header]
    if len(fields) != 1 or not others:
        return None
    sep, name = others[0], _SEPARATORS[others[0]]
    return (f"{url}: its header reads as one column with the separator "
            f"{_SEPARATORS.get(options.delimiter, repr(options.delimiter))} and holds {name}: "
            f"give the separator (--option sep={sep!r}), or --option "
            f"sep={options.delimiter!r} if one column is meant")


def csv_headers(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
                options: ReadOptions | None = None, threads: int = 16) -> dict[str, Header]:
    """The header of each CSV file of `tasks` (its text and where its record starts), by
    URL, read side by side (a source of many small files on S3 costs a round trip each)."""
    from concurrent.futures import ThreadPoolExecutor

    def header(url: str) -> Header:
        return read_header_at(SourceTask(url, "csv"), storage_options, options)

    files = list(dict.fromkeys(t.url for t in tasks if t.format == "csv"))
    if len(files) <= 1:
        return {url: header(url) for url in files}
    with ThreadPoolExecutor(min(threads, len(files))) as pool:
        return dict(zip(files, pool.map(header, files), strict=True))


def csv_header(task: SourceTask, storage_options: Mapping[str, Any] | None,
               options: ReadOptions | None = None) -> str:
    """The header of a CSV file: its first record that is not empty (a byte order mark
    dropped); empty when the file has none, or when that record is not text."""
    from markerstore.ingest.header import read_header

    return read_header(task, storage_options, options)
