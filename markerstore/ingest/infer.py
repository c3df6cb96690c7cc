"""What ingest reads of the source on the driver, before Spark starts: a schema inferred
from the first records (when none is given) and the header record of each CSV file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.errors import SchemaError, SourceError
from markerstore.ingest.blocks import ENCODING, ReadOptions, read_blocks
from markerstore.ingest.csvtypes import Rules, csv_schema
from markerstore.ingest.header import (
    Header,
    drop_header,
    encoding_advice,
    encoding_hint,
    read_header_at,
    safe_names,
    with_skip,
)
from markerstore.ingest.jsontypes import JsonRules, json_schema
from markerstore.ingest.options import IngestOptions
from markerstore.ingest.sources import SourceTask

SAMPLE_BYTES = 1024 * 1024  # read a block at a time: a first record may be huge


def _records(task: SourceTask, storage_options: Mapping[str, Any] | None, limit: int,
             options: ReadOptions, header: bool = False) -> list[str]:
    """The first `limit` text records of a task (a CSV record may span lines); with
    `header`, without the file's header record (its first record that is not empty, be
    it text or not, as every task drops it). Records that are no text in the files'
    encoding are left out, unless they are most of those read: then the source is read
    in the wrong encoding, a SourceError naming the option that reads it."""
    found: list[str] = []
    undecodable = 0
    for block in read_blocks(task, dict(storage_options or {}), SAMPLE_BYTES, options):
        if header:
            block, dropped = drop_header(block)
            header = not dropped
        undecodable += sum(r.reason == ENCODING for r in block.raw)
        found += block.records.slice(0, limit - len(found)).to_pylist()
        if len(found) + undecodable >= limit:
            break
    if undecodable > len(found):
        raise SourceError(f"{task.url}: {undecodable} of the first {undecodable + len(found)} "
                          f"records are not {options.encoding} text: " + encoding_advice())
    return found


def infer_schema(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
                 settings: Mapping[str, Any] | None = None, *,
                 case_sensitive: bool = False) -> pa.Schema:
    """A schema from the first records of the source (Parquet: the file's own schema,
    each type as Spark reads it, :mod:`~markerstore.ingest.parquet`), read and typed as
    the ingest's options in `settings` say (markerstore.config: the dialect, header,
    value patterns, nulls, Spark's inference options, how many records): see
    :mod:`~markerstore.ingest.csvtypes` and :mod:`~markerstore.ingest.jsontypes`. CSV
    columns are named by each file's header as Spark names them (:func:`safe_names`;
    `case_sensitive`: Spark's ``spark.sql.caseSensitive``) and typed by name, as the
    ingest reads them: files whose headers list the columns in other orders type each
    column by its own values. Without a header record the columns are named as Spark
    names them, _c0, _c1, ..."""
    resolved = config.resolve(settings)
    reading = IngestOptions.from_settings(resolved)
    options = reading.read_options()
    first = tasks[0]
    if first.format == "parquet":
        from markerstore.ingest.parquet import spark_schema

        return spark_schema(first.url, storage_options)
    if first.format != "csv":
        return _json_schema(_sample(tasks, storage_options, resolved, options),
                            JsonRules(resolved[config.INGEST_PREFERS_DECIMAL],
                                      resolved[config.INGEST_PRIMITIVES_AS_STRING]))
    tasks = with_skip(tasks, storage_options, options, resolved[config.INGEST_CSV_SKIP],
                      resolved[config.INGEST_SPLIT_BYTES])
    header, null_value = reading.csv_header, reading.null_value
    samples: list[tuple[list[str] | None, list[str]]] = []
    limit = resolved[config.INGEST_INFER_RECORDS]
    for task in tasks:
        named = header and task.start == 0  # a file's first range holds its header
        names = _header_names(task, storage_options, options, case_sensitive,
                              null_value) if named else None
        found = [t for t in _records(task, storage_options, limit, options, named) if t]
        if header and named:
            samples.append((names, found))
        elif samples and header:
            samples[-1][1].extend(found)  # a later range of the file before
        else:
            samples.append((None, found))
        limit -= len(found)
        if limit <= 0:
            break
    if header and not any(names is not None for names, _ in samples):
        raise SchemaError("cannot infer a schema: the CSV source holds no record; "
                          "pass --schema")
    rules = Rules(resolved[config.INGEST_INFER_SCHEMA], resolved[config.INGEST_PREFER_DATE],
                  reading.null_padding)
    return csv_schema(samples, options, reading.value_formats(), null_value,
                      reading.empty_value, rules)


def _sample(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
            resolved: config.Settings, options: ReadOptions) -> list[str]:
    """The first JSON records of the source that are not blank."""
    lines: list[str] = []
    limit = resolved[config.INGEST_INFER_RECORDS]
    for task in tasks:
        lines += [t for t in _records(task, storage_options, limit - len(lines), options)
                  if t.strip()]
        if len(lines) >= limit:
            break
    return lines[:limit]


def _header_names(task: SourceTask, storage_options: Mapping[str, Any] | None,
                  options: ReadOptions, case_sensitive: bool, null_value: str
                  ) -> list[str] | None:
    """The column names of a CSV file's header, as Spark names them (None: the file holds
    no record); a header that is no text in the files' encoding is a SourceError naming
    the `encoding` option."""
    header = read_header_at(task, storage_options, options)
    if header.data is not None:
        raise SourceError(encoding_hint(task.url, header.data, options))
    if header.start is None:
        return None
    fields = _split_header(header.text, options)
    if fields is None:
        raise SchemaError("cannot infer a schema: the CSV header record does not split "
                          "into fields (a stray quote?); pass --schema")
    names = safe_names(fields, case_sensitive, null_value)
    twice = sorted({n for n, k in Counter(names).items() if k > 1})
    if twice:
        raise SchemaError(f"cannot infer a schema: the CSV header of {task.url} names column(s) "
                          f"{', '.join(map(repr, twice))} twice, even as Spark renames a "
                          "repeated name; pass --schema")
    return names


def _split_header(text: str, options: ReadOptions) -> list[str] | None:
    from markerstore.values.csv import CsvError, split_record

    try:
        return [value for value, _ in split_record(text, dialect=options.dialect)]
    except CsvError:
        return None


def _json_schema(lines: list[str], rules: JsonRules) -> pa.Schema:
    """The sampled objects' schema by Spark's rules (:mod:`~markerstore.ingest.jsontypes`)."""
    records = []
    for text in lines:
        try:
            value = json.loads(text, parse_float=Decimal)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    if not records:
        raise SchemaError("cannot infer a schema: the first lines hold no JSON object; "
                          "pass --schema")
    schema = json_schema(records, rules)
    if not schema:
        raise SchemaError("cannot infer a schema: the first JSON objects have no member; "
                          "pass --schema")
    return schema


_SEPARATORS = {";": "';'", "\t": "a tab ('\\t')", "|": "'|'", ",": "','"}


def separator_hint(url: str, header: str, options: ReadOptions) -> str | None:
    """Why `header` looks read with the wrong separator (one column, holding another
    common separator), or None."""
    from markerstore.values.csv import CsvError, split_record

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

    first = {t.url: t for t in reversed(tasks)}  # each file's first task (its base)

    def header(url: str) -> Header:
        return read_header_at(first[url], storage_options, options)

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
