"""What ingest reads of the source on the driver, before Spark starts: a schema inferred
from the first records (when none is given) and the header line of each CSV file."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from markerstore.errors import SchemaError
from markerstore.ingest.sources import SourceTask, read_lines


def infer_schema(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
                 sample_lines: int = 2000) -> pa.Schema:
    """A schema from the first records of the source (Parquet: the file's own schema)."""
    first = tasks[0]
    if first.format == "parquet":
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(first.url, "rb", **dict(storage_options or {})) as handle:
            return pq.read_schema(handle)
    lines = []
    for task in tasks:
        for _, _, text in read_lines(task, dict(storage_options or {})):
            if text.strip():
                lines.append(text)
            if len(lines) >= sample_lines:
                break
        if len(lines) >= sample_lines:
            break
    if first.format == "csv":
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(pa.BufferReader("\n".join(lines).encode()))
        return table.schema
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


def csv_header(task: SourceTask, storage_options: Mapping[str, Any] | None) -> str:
    for _, _, text in read_lines(SourceTask(task.url, task.format),
                                 dict(storage_options or {})):
        return text
    return ""
