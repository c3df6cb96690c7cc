"""The ErrorRecord schema: read from ``schemas/error_record.avsc``, never restated in code.

The Arrow schema (for Parquet error files and for reading) is derived from the Avro one,
so a change to the .avsc file is a change everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from importlib.resources import files
from typing import Any

import fastavro
import pyarrow as pa

from markerstore import arrow_avro

SCHEMA_PACKAGE = "markerstore.schemas"
SCHEMA_FILE = "error_record.avsc"


@lru_cache(maxsize=1)
def avsc_text() -> str:
    """The text of error_record.avsc as shipped with the package."""
    return (files(SCHEMA_PACKAGE) / SCHEMA_FILE).read_text(encoding="utf-8")


def avro_schema() -> dict[str, Any]:
    """The ErrorRecord schema as JSON (a fresh copy each call)."""
    schema: dict[str, Any] = json.loads(avsc_text())
    return schema


@lru_cache(maxsize=1)
def avro_schema_json() -> str:
    """The ErrorRecord schema as compact JSON (what Parquet error files store)."""
    return json.dumps(avro_schema(), separators=(",", ":"))


@lru_cache(maxsize=1)
def parsed_schema() -> Any:
    """The schema parsed by fastavro, for writers and readers."""
    return fastavro.parse_schema(avro_schema())


@lru_cache(maxsize=1)
def arrow_schema() -> pa.Schema:
    """ErrorRecord as an Arrow schema: the same fields, types and nullability."""
    return arrow_avro.arrow_schema(avro_schema())


def empty_table() -> pa.Table:
    return arrow_schema().empty_table()


def records_to_arrow(records: Iterable[dict[str, Any]]) -> pa.Table:
    """Error records (dicts in the ErrorRecord shape) as an Arrow table."""
    schema = arrow_schema()
    names = schema.names
    columns: dict[str, list[Any]] = {n: [] for n in names}
    appenders = [(columns[n].append, n) for n in names]
    for record in records:
        for append, name in appenders:
            append(record.get(name))
    arrays = []
    for f in schema:
        values = columns[f.name]
        arrays.append(_map_array(values, f.type) if pa.types.is_map(f.type)
                      else pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _map_array(values: list[Any], map_type: pa.MapType) -> pa.Array:
    """A map column from dicts (or None), built from flat keys and items: much faster than
    pa.array over lists of pairs. A null start offset marks a null map (pyarrow's rule)."""
    keys: list[Any] = []
    items: list[Any] = []
    offsets: list[int | None] = []
    for value in values:
        if value is None:
            offsets.append(None)
            continue
        offsets.append(len(keys))
        pairs = value.items() if isinstance(value, dict) else value
        for key, item in pairs:
            keys.append(key)
            items.append(item)
    offsets.append(len(keys))
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()),
                                   pa.array(keys, map_type.key_type),
                                   pa.array(items, map_type.item_type))


def arrow_to_records(table: pa.Table) -> list[dict[str, Any]]:
    """ErrorRecord rows of an Arrow table as dicts (maps become dicts, as Avro wants);
    column by column, which is several times faster than Table.to_pylist here."""
    columns: list[list[Any]] = []
    for f in table.schema:
        chunked = table.column(f.name)
        array = chunked.combine_chunks() if chunked.num_chunks != 1 else chunked.chunk(0)
        if pa.types.is_map(f.type):
            offsets = array.offsets.to_pylist()
            keys = array.keys.to_pylist()
            items = array.items.to_pylist()
            nulls = array.is_null().to_pylist() if array.null_count else None
            columns.append([
                None if nulls is not None and nulls[i] else
                dict(zip(keys[offsets[i]:offsets[i + 1]], items[offsets[i]:offsets[i + 1]],
                         strict=True))
                for i in range(len(array))])
        else:
            columns.append(array.to_pylist())
    names = table.schema.names
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
