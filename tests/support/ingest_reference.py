"""The per-record ingest reader that markerstore used before the vectorized one: the
reference the differential test compares the product's reader against (tests only).

Every line goes through errortable's ``parse_json_lines`` / ``parse_csv_lines`` (json.loads
or the csv module per line) and ``Validator.split_records`` (Python dicts to Arrow); a
Parquet file through ``Validator.split_arrow``. It yields, per batch of lines, the good
rows and the error records, exactly as the old ``_Reader`` of pipeline.py did before the
rows went to the JVM.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from markerstore.ingest.sources import SourceTask, read_lines

BATCH_LINES = 20_000


def _split_csv(header: str | None) -> list[str]:
    return next(csv.reader([header or ""]))


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    context = record.get("context")
    if isinstance(context, list):  # Arrow maps come back as (key, value) pairs
        record = {**record, "context": dict(context)}
    return record


def read(task: SourceTask, header: str | None, validator: Any, ctx: Any,
         storage_options: Mapping[str, Any] | None = None
         ) -> Iterator[tuple[pa.RecordBatch, list[dict[str, Any]]]]:
    """(good rows, error records) per batch of the task's lines."""
    from errortable import parse_csv_lines, parse_json_lines

    if task.format == "parquet":
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(task.url, "rb", **dict(storage_options or {})) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=BATCH_LINES):
                good, errors = validator.split_arrow(batch, ctx)
                yield good, [_jsonable(r) for r in errors.to_pylist()]
        return
    lines: list[str] = []
    first_line = 2 if task.format == "csv" else 1
    skip_header = task.format == "csv"

    def flush(chunk: list[str], first: int) -> tuple[pa.RecordBatch, list[dict[str, Any]]]:
        if task.format == "csv":
            parsed = parse_csv_lines(chunk, ctx, header=_split_csv(header), first_line=first)
        else:
            parsed = parse_json_lines(chunk, ctx, first_line=first)
        good, errors = validator.split_records(parsed.records, ctx,
                                               line_numbers=parsed.line_numbers)
        return good, list(parsed.errors) + list(errors)

    for _, _, text in read_lines(task, dict(storage_options or {})):
        if skip_header:
            skip_header = False
            continue
        lines.append(text)
        if len(lines) >= BATCH_LINES:
            yield flush(lines, first_line)
            first_line += len(lines)
            lines = []
    if lines:
        yield flush(lines, first_line)
