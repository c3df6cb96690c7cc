"""What ingest reads of the source on the driver, before Spark starts: a schema inferred
from the first records (when none is given) and the header record of each CSV file."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.errors import SchemaError
from markerstore.ingest.blocks import ReadOptions, read_blocks
from markerstore.ingest.csvtypes import Rules, csv_schema
from markerstore.ingest.header import Header, read_header_at
from markerstore.ingest.jsontypes import JsonRules, json_schema
from markerstore.ingest.sources import SourceTask
from markerstore.ingest.task import read_options, value_formats

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
                 settings: Mapping[str, Any] | None = None) -> pa.Schema:
    """A schema from the first records of the source (Parquet: the file's own schema),
    read and typed as the ingest's options in `settings` say (markerstore.config: the
    dialect, header, value patterns, nulls, Spark's inference options, how many
    records): see :mod:`~markerstore.ingest.csvtypes` and
    :mod:`~markerstore.ingest.jsontypes`. Without a header record the columns are named
    as Spark names them, _c0, _c1, ..."""
    resolved = config.resolve(settings)
    options = read_options(resolved)
    header = resolved[config.INGEST_CSV_HEADER]
    sample_lines = resolved[config.INGEST_INFER_RECORDS]
    first = tasks[0]
    if first.format == "parquet":
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(first.url, "rb", **dict(storage_options or {})) as handle:
            return pq.read_schema(handle)
    csv = first.format == "csv"
    lines: list[str] = []
    header_text: str | None = None
    for task in tasks:
        # an empty CSV record is none (one of spaces is one, as in every task), a blank
        # JSON line neither
        found = [t for t in _records(task, storage_options, sample_lines, options)
                 if (t if csv else t.strip())]
        if csv and header and task.start == 0 and found:  # each file's header record
            header_text = found[0] if header_text is None else header_text
            found = found[1:]
        lines += found
        if len(lines) >= sample_lines:
            break
    lines = lines[:sample_lines]
    if csv:
        if header and header_text is None:
            raise SchemaError("cannot infer a schema: the CSV source holds no record; "
                              "pass --schema")
        rules = Rules(resolved[config.INGEST_INFER_SCHEMA], resolved[config.INGEST_PREFER_DATE])
        return csv_schema(header_text, lines, options, value_formats(resolved),
                          resolved[config.INGEST_NULL_VALUE],
                          resolved[config.INGEST_EMPTY_VALUE], rules)
    return _json_schema(lines, JsonRules(resolved[config.INGEST_PREFERS_DECIMAL],
                                         resolved[config.INGEST_PRIMITIVES_AS_STRING]))


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
