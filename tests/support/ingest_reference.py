"""The per-record ingest reader that markerstore used before the vectorized one: the
reference the differential test compares the product's reader against (tests only).

Every line, read as bytes with its line end, goes through errortable's
``parse_json_lines`` / ``parse_csv_lines`` (markerstore.values.json per line; the CSV records
joined from their lines by markerstore.values.csv's state machine, then split into fields, all
in Python) and ``Validator.split_records`` (Python dicts to Arrow); a Parquet file through
``Validator.split_arrow``. It yields the good rows and the error records, as the old
``_Reader`` of pipeline.py did before the rows went to the JVM.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

import fsspec
import pyarrow as pa

from markerstore.ingest.sources import SourceTask
from markerstore.values.csv import join_records, split_record, strip_line_end

BATCH_LINES = 20_000
LONE_CR = re.compile(rb"(?<=\r)(?!\n)(?=.)", re.S)


def _split_csv(header: str | None) -> list[str]:
    try:
        return [name for name, _ in split_record(header or "")] if header else []
    except ValueError:
        return []


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    context = record.get("context")
    if isinstance(context, list):  # Arrow maps come back as (key, value) pairs
        record = {**record, "context": dict(context)}
    return record


def _lines(task: SourceTask, storage_options: Mapping[str, Any] | None) -> Iterator[bytes]:
    """The task's physical lines as bytes with their line ends, by the byte-range rule
    (a range starts after the first newline at or after its start, unless it is 0, and
    ends with the line that crosses its end); a UTF-8 byte order mark at the start of the
    file dropped."""
    compression = "infer" if task.whole_file else None
    with fsspec.open(task.url, "rb", compression=compression,
                     **dict(storage_options or {})) as handle:
        offset = task.start
        if task.start:
            handle.seek(task.start - 1)
            if handle.read(1) != b"\n":
                offset += len(handle.readline())
        first = task.start == 0
        while task.end is None or offset < task.end:
            raw = handle.readline()
            if not raw:
                return
            offset += len(raw)
            yield raw[3:] if first and raw.startswith(b"\xef\xbb\xbf") else raw
            first = False


def read(task: SourceTask, header: str | None, validator: Any, ctx: Any,
         storage_options: Mapping[str, Any] | None = None, options: Any = None
         ) -> Iterator[tuple[pa.RecordBatch, list[dict[str, Any]]]]:
    """(good rows, error records) per batch of the task's lines: errortable's per-line
    parsers (which join a CSV record's lines) over the raw lines, `options` its
    ParseOptions."""
    from errortable import parse_csv_lines, parse_json_lines

    if task.format == "parquet":
        import pyarrow.parquet as pq

        with fsspec.open(task.url, "rb", **dict(storage_options or {})) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=BATCH_LINES):
                good, errors = validator.split_arrow(batch, ctx)
                yield good, [_jsonable(r) for r in errors.to_pylist()]
        return
    lines = list(_lines(task, storage_options))
    if task.format == "csv":  # a lone CR ends a CSV line too (Spark's default lineSep)
        lines = [piece for line in lines for piece in LONE_CR.split(line)]
        records = list(join_records(lines))[1:]  # the first record is the header
        first = records[0][0] if records else len(lines)
        body = lines[first:]
        parsed = parse_csv_lines(body, ctx, header=_split_csv(header), first_line=first + 1,
                                 options=options)
    else:
        parsed = parse_json_lines([strip_line_end(line) for line in lines], ctx,
                                  options=options)
    good, errors = validator.split_records(parsed.records, ctx,
                                           line_numbers=parsed.line_numbers)
    yield good, list(parsed.errors) + list(errors)
