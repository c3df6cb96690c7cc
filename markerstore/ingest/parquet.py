"""Parquet sources read as Spark reads them, so that every table the ingest commits from
one is readable by Spark with the schema it reports.

A Parquet file says its types; Spark takes most of them as they are and refuses some
(``PARQUET_TYPE_ILLEGAL``): an inferred schema (:func:`spark_schema`) maps each Arrow
type pyarrow reads to the one Spark reads, or, where Spark reads none, to the nearest it
holds:

| Parquet (as pyarrow reads it) | Spark | note |
|---|---|---|
| INT96 | TIMESTAMP (UTC) | Spark's and Hive's old timestamps: an instant |
| TIMESTAMP with a zone (isAdjustedToUTC), any unit | TIMESTAMP (UTC) | |
| TIMESTAMP without a zone, s / ms / us | TIMESTAMP_NTZ | as Spark 4 reads them |
| TIMESTAMP(NANOS) | the same, in microseconds | Spark refuses it; cut to the microsecond |
| UINT8, UINT16, UINT32, UINT64 | SMALLINT, INT, BIGINT, DECIMAL(20,0) | as Spark reads them |
| FLOAT16 | FLOAT | Spark refuses it; every half float is a float |
| DECIMAL(p,s), p > 38 | DECIMAL(38,s) (s at most 38) | Spark refuses it; a value past it: `cast` |
| dictionary of T | T | |
| large string, string view | STRING | |
| large binary, binary view, fixed-size binary | BINARY | |
| large list, fixed-size list | ARRAY | |
| DATE (date64) | DATE | a value that is not a whole day is a `cast` error record |
| TIME | STRING (``HH:MM:SS[.fraction]``) | Spark 4 reads no TIME |
| duration (an INT64 pyarrow marks) | BIGINT (its count of units) | as Spark reads the column |
| null (UNKNOWN) | INT, all null | as Spark reads it |
| list view, large list view | ARRAY | |
| an extension type (UUID, JSON, bool8) | its storage's: BINARY, STRING, TINYINT | |

Nanoseconds are cut to the microsecond at or before the value (the digits past the sixth
dropped from its ISO text), as Spark cuts INT96's. The tasks read INT96 as microseconds
(pyarrow's ``coerce_int96_timestamp_unit``: years 1 to 9999, where nanoseconds overflow
past 2262) and cut nanoseconds to microseconds before the Validator casts each column to
its target type (:func:`spark_batch`); a value a cast refuses is one ``cast`` error
record, as for any source.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from markerstore.ingest.schema import MAX_DECIMAL_PRECISION

INT96_UNIT = "us"  # how the tasks read INT96 timestamps
UTC = "UTC"
_UNSIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(),
             pa.uint64(): pa.decimal128(20, 0)}


def open_parquet(handle: Any) -> pq.ParquetFile:
    """A Parquet file as the ingest reads it: INT96 timestamps in microseconds."""
    return pq.ParquetFile(handle, coerce_int96_timestamp_unit=INT96_UNIT)


def spark_schema(url: str, storage_options: Mapping[str, Any] | None = None) -> pa.Schema:
    """The schema Spark reads a Parquet file's columns as (the module's table)."""
    import fsspec

    with fsspec.open(url, "rb", **dict(storage_options or {})) as handle:
        return spark_types(open_parquet(handle))


def spark_types(parquet: pq.ParquetFile) -> pa.Schema:
    """The schema of `parquet` in Spark's types."""
    schema = parquet.schema_arrow
    int96 = _int96_leaves(parquet)
    return pa.schema([pa.field(f.name, spark_type(f.type, int96), f.nullable)
                      for f in schema])


def _leaves(arrow: pa.DataType) -> int:
    """How many Parquet leaf columns a column of `arrow` is."""
    if pa.types.is_dictionary(arrow):
        return _leaves(arrow.value_type)
    if pa.types.is_map(arrow):
        return _leaves(arrow.key_type) + _leaves(arrow.item_type)
    if _is_list(arrow):
        return _leaves(arrow.value_type)
    if pa.types.is_struct(arrow):
        return sum(_leaves(f.type) for f in arrow)
    return 1


def _int96_leaves(parquet: pq.ParquetFile) -> Iterator[bool]:
    """Whether each leaf column, in order, is INT96 (none, where the leaves do not line up
    with the Arrow schema's)."""
    columns = [parquet.schema.column(i).physical_type == "INT96"
               for i in range(len(parquet.schema))]
    if len(columns) != sum(_leaves(f.type) for f in parquet.schema_arrow):
        columns = [False] * len(columns)
    return iter(columns)


def _is_list(arrow: pa.DataType) -> bool:
    return (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)
            or pa.types.is_fixed_size_list(arrow) or pa.types.is_list_view(arrow)
            or pa.types.is_large_list_view(arrow))


def spark_type(arrow: pa.DataType, int96: Iterator[bool] | None = None) -> pa.DataType:
    """The type Spark reads a Parquet column of `arrow` as; `int96` tells, leaf by leaf in
    order, which leaves are INT96 (none: no leaf is)."""
    leaves = int96 if int96 is not None else iter(())
    if pa.types.is_dictionary(arrow):
        return spark_type(arrow.value_type, leaves)
    if pa.types.is_map(arrow):
        key = spark_type(arrow.key_type, leaves)
        return pa.map_(key, spark_type(arrow.item_type, leaves))
    if _is_list(arrow):
        return pa.list_(spark_type(arrow.value_type, leaves))
    if pa.types.is_struct(arrow):
        return pa.struct([pa.field(f.name, spark_type(f.type, leaves), f.nullable)
                          for f in arrow])
    from_int96 = next(leaves, False)
    if isinstance(arrow, pa.BaseExtensionType):
        return spark_type(arrow.storage_type)
    return _leaf(arrow, from_int96)


def _leaf(arrow: pa.DataType, int96: bool) -> pa.DataType:
    if pa.types.is_timestamp(arrow):
        return pa.timestamp("us", UTC) if int96 or arrow.tz is not None else pa.timestamp("us")
    if arrow in _UNSIGNED:
        return _UNSIGNED[arrow]
    if pa.types.is_float16(arrow):
        return pa.float32()
    if pa.types.is_decimal(arrow):
        precision = min(arrow.precision, MAX_DECIMAL_PRECISION)
        return pa.decimal128(precision, min(arrow.scale, precision))
    if pa.types.is_large_string(arrow) or pa.types.is_string_view(arrow):
        return pa.string()
    if (pa.types.is_large_binary(arrow) or pa.types.is_binary_view(arrow)
            or pa.types.is_fixed_size_binary(arrow)):
        return pa.binary()
    if pa.types.is_date64(arrow):
        return pa.date32()
    if pa.types.is_time(arrow):
        return pa.string()
    if pa.types.is_duration(arrow):
        return pa.int64()
    if pa.types.is_null(arrow):
        return pa.int32()
    return arrow


def _unread(arrow: pa.DataType) -> bool:
    """Whether a column of `arrow` holds what the Validator's casts cannot take as it is:
    nanoseconds (a cast would refuse the digits past microseconds), an extension type (its
    storage is what Spark reads), a view (Arrow's cast of a list view loses its values,
    and an error record's payload cannot take rows of a string view)."""
    if pa.types.is_timestamp(arrow):
        return arrow.unit == "ns"
    if isinstance(arrow, pa.BaseExtensionType) or pa.types.is_list_view(arrow) or \
            pa.types.is_large_list_view(arrow) or pa.types.is_string_view(arrow) or \
            pa.types.is_binary_view(arrow):
        return True
    if pa.types.is_dictionary(arrow):
        return _unread(arrow.value_type)
    if pa.types.is_map(arrow):
        return _unread(arrow.key_type) or _unread(arrow.item_type)
    if _is_list(arrow):
        return _unread(arrow.value_type)
    return pa.types.is_struct(arrow) and any(_unread(f.type) for f in arrow)


def spark_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` as the Validator's casts take it: every nanosecond timestamp (at any depth)
    cut to the microsecond at or before it (as ISO text cut after six digits reads), an
    extension type's values its storage's, a list view a list."""
    if not any(_unread(f.type) for f in batch.schema):
        return batch
    columns = [_readable(c) if _unread(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, [f.name for f in batch.schema])


def _readable(array: pa.Array) -> pa.Array:
    """`array` (whose type :func:`_unread` names) as the Validator's casts take it."""
    arrow = array.type
    if pa.types.is_timestamp(arrow):
        floored = pc.floor_temporal(array, unit="microsecond")
        return floored.cast(pa.timestamp("us", arrow.tz))
    if isinstance(array, pa.ExtensionArray):
        return _readable_or(array.storage)
    if pa.types.is_string_view(arrow) or pa.types.is_binary_view(arrow):
        return array.cast(pa.string() if pa.types.is_string_view(arrow) else pa.binary())
    if pa.types.is_dictionary(arrow):
        return _readable(array.dictionary_decode())
    array = pa.concat_arrays([array])  # unsliced: its children and offsets as they are
    mask = array.is_null() if array.null_count else None
    if pa.types.is_map(arrow):
        return pa.MapArray.from_arrays(array.offsets, _readable_or(array.keys),
                                       _readable_or(array.items), mask=mask)
    if pa.types.is_struct(arrow):
        children = [_readable_or(array.field(i)) for i in range(arrow.num_fields)]
        return pa.StructArray.from_arrays(children, fields=[
            pa.field(f.name, c.type, f.nullable) for f, c in zip(arrow, children, strict=True)],
            mask=mask)
    if pa.types.is_list_view(arrow) or pa.types.is_large_list_view(arrow):
        lengths = pc.fill_null(pc.list_value_length(array), 0).cast(pa.int64()).to_numpy()
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())
        return pa.ListArray.from_arrays(offsets, _readable_or(pc.list_flatten(array)),
                                        mask=mask)
    if pa.types.is_fixed_size_list(arrow):
        array = array.cast(pa.list_(arrow.value_type))
    values = _readable_or(array.values)
    kind = pa.LargeListArray if pa.types.is_large_list(array.type) else pa.ListArray
    return kind.from_arrays(array.offsets, values, mask=mask)


def _readable_or(array: pa.Array) -> pa.Array:
    return _readable(array) if _unread(array.type) else array
