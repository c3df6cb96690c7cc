"""The one mapping from Avro types to Arrow types, for every Avro schema the project reads.

Marker segments (``schemas/marker_segment.avsc``), error records
(``schemas/error_record.avsc``) and ingest's target schemas (an ``.avsc`` file a user
gives) all derive their Arrow schema here, so an Avro type means the same Arrow type
everywhere:

==========================================  ==========================================
Avro                                        Arrow
==========================================  ==========================================
string, enum                                string
bytes                                       binary
boolean / int / long / float / double       bool / int32 / int64 / float32 / float64
long with logicalType timestamp-millis      timestamp("ms", tz="UTC")
long with logicalType timestamp-micros      timestamp("us", tz="UTC")
int with logicalType date                   date32
bytes with logicalType decimal (p, s)       decimal128(p, s)
array of T / map of T                       list<T> / map<string, T>
record                                      struct (named records may be referred to by name)
["null", T]                                 T, nullable
==========================================  ==========================================

Anything else (a union of two non-null types, an unknown name) is a `SchemaError` that
names the type. Part of the core: imports nothing of the project but `errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from markerstore.errors import SchemaError

PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(), "bytes": pa.binary(), "boolean": pa.bool_(), "int": pa.int32(),
    "long": pa.int64(), "float": pa.float32(), "double": pa.float64(),
}


def arrow_type(spec: Any, named: dict[str, pa.DataType] | None = None
               ) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of an Avro type. `named` collects the records met so far, so a
    later field may name one; a fresh dict is used when none is given."""
    named = {} if named is None else named
    if isinstance(spec, list):
        branches = [b for b in spec if b != "null"]
        if len(branches) != 1:
            raise SchemaError(f"Avro union {spec!r} is not supported (only [\"null\", T])")
        return arrow_type(branches[0], named)[0], "null" in spec
    if isinstance(spec, str):
        if spec in PRIMITIVES:
            return PRIMITIVES[spec], False
        if spec in named:
            return named[spec], False
        raise SchemaError(f"unknown Avro type {spec!r}")
    if isinstance(spec, dict):
        return _object_type(spec, named)
    raise SchemaError(f"cannot read Avro type {spec!r}")


def _object_type(spec: dict[str, Any], named: dict[str, pa.DataType]
                 ) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of an Avro type written as an object (logical, array, map,
    record, enum, or a plain ``{"type": T}``)."""
    base = spec.get("type")
    if "logicalType" not in spec and base not in ("array", "map", "record", "enum"):
        return arrow_type(base, named)
    return _complex_type(spec, named), False


def _complex_type(spec: dict[str, Any], named: dict[str, pa.DataType]) -> pa.DataType:
    logical = spec.get("logicalType")
    base = spec.get("type")
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("ms" if logical.endswith("millis") else "us", tz="UTC")
    if logical == "decimal":
        return pa.decimal128(int(spec["precision"]), int(spec.get("scale", 0)))
    if base == "array":
        return pa.list_(arrow_type(spec["items"], named)[0])
    if base == "map":
        return pa.map_(pa.string(), arrow_type(spec["values"], named)[0])
    if base == "record":
        struct = pa.struct(arrow_fields(spec, named))
        named[spec["name"]] = struct
        return struct
    if base == "enum":
        return pa.string()
    return arrow_type(base, named)[0]  # an unknown logical type: its underlying type


def arrow_fields(record: Mapping[str, Any], named: dict[str, pa.DataType] | None = None
                 ) -> list[pa.Field]:
    """The Arrow fields of an Avro record's fields (types and nullability)."""
    named = {} if named is None else named
    fields = []
    for field in record.get("fields", []):
        field_type, nullable = arrow_type(field["type"], named)
        fields.append(pa.field(field["name"], field_type, nullable=nullable))
    return fields


def arrow_schema(record: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema an Avro record schema describes (types and nullability)."""
    return pa.schema(arrow_fields(record))
