"""Target schemas for ingest: a DDL string or an Avro schema file, as an Arrow schema.

The DDL parser is our own (no JVM needed), so a bad schema is reported before Spark
starts and before anything is written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import fsspec
import pyarrow as pa

from markerstore.arrow_avro import arrow_schema
from markerstore.errors import SchemaError

MAX_DECIMAL_PRECISION = 38  # Spark's DecimalType.MAX_PRECISION

_PRIMITIVES: dict[str, pa.DataType] = {
    "STRING": pa.string(), "VARCHAR": pa.string(), "TEXT": pa.string(),
    "BOOLEAN": pa.bool_(), "BOOL": pa.bool_(),
    "TINYINT": pa.int8(), "BYTE": pa.int8(), "SMALLINT": pa.int16(), "SHORT": pa.int16(),
    "INT": pa.int32(), "INTEGER": pa.int32(), "BIGINT": pa.int64(), "LONG": pa.int64(),
    "FLOAT": pa.float32(), "REAL": pa.float32(), "DOUBLE": pa.float64(),
    "DATE": pa.date32(), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
    "TIMESTAMP_NTZ": pa.timestamp("us"), "BINARY": pa.binary(),
}


def _split_top_level(text: str) -> list[str]:
    """`text` cut at its commas outside brackets and backquoted names (`a,b` is one)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    quoted = False
    for char in text:
        if char == "`":
            quoted = not quoted
        if quoted or char == "`":
            current.append(char)
            continue
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
            if depth < 0:
                raise SchemaError(f"unbalanced brackets in schema {text!r}")
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if depth != 0 or quoted:
        raise SchemaError(f"unbalanced {'backquotes' if quoted else 'brackets'} in schema "
                          f"{text!r}")
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _ddl_type(text: str) -> pa.DataType:
    spec = text.strip()
    upper = spec.upper()
    if upper in _PRIMITIVES:
        return _PRIMITIVES[upper]
    decimal = re.fullmatch(r"DECIMAL\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", upper)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2) or 0)
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise SchemaError(f"bad decimal {spec!r}: precision 1..{MAX_DECIMAL_PRECISION}, "
                              "scale <= precision")
        return pa.decimal128(precision, scale)
    if upper == "DECIMAL":
        return pa.decimal128(10, 0)
    array = re.fullmatch(r"ARRAY\s*<(.*)>", spec, re.IGNORECASE | re.DOTALL)
    if array:
        return pa.list_(_ddl_type(array.group(1)))
    struct = re.fullmatch(r"STRUCT\s*<(.*)>", spec, re.IGNORECASE | re.DOTALL)
    if struct:
        return pa.struct([_ddl_field(part, ":") for part in _split_top_level(struct.group(1))])
    raise SchemaError(f"unknown type {spec!r}; expected one of "
                      f"{', '.join(sorted(_PRIMITIVES))}, DECIMAL(p,s), ARRAY<..>, STRUCT<..>")


def _ddl_field(text: str, separator: str = " ") -> pa.Field:
    text = text.strip()
    not_null = False
    if re.search(r"\s+NOT\s+NULL$", text, re.IGNORECASE):
        not_null = True
        text = re.sub(r"\s+NOT\s+NULL$", "", text, flags=re.IGNORECASE)
    match = re.fullmatch(r"`([^`]+)`(?:\s+|\s*:\s*)(.+)|"
                         r"([A-Za-z_][A-Za-z0-9_]*)(?:\s+|\s*:\s*)(.+)", text, re.DOTALL)
    if not match:
        raise SchemaError(f"cannot read the column {text!r}; expected 'name TYPE'")
    name = match.group(1) or match.group(3)
    type_text = match.group(2) or match.group(4)
    return pa.field(name, _ddl_type(type_text), nullable=not not_null)


def ddl_to_arrow(ddl: str) -> pa.Schema:
    """'id BIGINT, name STRING, amount DECIMAL(10,2)' as an Arrow schema."""
    if not ddl or not ddl.strip():
        raise SchemaError("the schema is empty")
    fields = [_ddl_field(part) for part in _split_top_level(ddl)]
    counts = Counter(f.name for f in fields)  # linear in the columns
    duplicates = sorted(n for n, k in counts.items() if k > 1)
    if duplicates:
        raise SchemaError(f"column(s) {', '.join(duplicates)} appear twice in the schema")
    return pa.schema(fields)


def avro_to_arrow(schema: dict[str, Any] | str) -> pa.Schema:
    """An Avro record schema (dict or JSON text) as an Arrow schema."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise SchemaError(f"the Avro schema is not valid JSON: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise SchemaError("an Avro schema for ingest must be a record")
    import fastavro

    try:
        fastavro.parse_schema(schema)
    except Exception as exc:
        raise SchemaError(f"invalid Avro schema: {exc}") from None
    return arrow_schema(schema)


def load_schema(spec: str, storage_options: dict[str, Any] | None = None) -> pa.Schema:
    """A DDL string, or the path/URL of an Avro schema file (.avsc)."""
    if spec.strip().endswith(".avsc") or spec.strip().startswith("{"):
        if spec.strip().startswith("{"):
            return avro_to_arrow(spec)
        try:
            with fsspec.open(spec.strip(), "rt", **(storage_options or {})) as handle:
                text = handle.read()
        except (OSError, ValueError) as exc:
            raise SchemaError(f"cannot read the schema file {spec}: {exc}") from None
        return avro_to_arrow(text)
    return ddl_to_arrow(spec)
