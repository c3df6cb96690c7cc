"""The one Avro -> Arrow type mapping (markerstore.arrow_avro) and its three users."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from errortable import schema as error_schema
from markerstore import arrow_avro
from markerstore.errors import ConfigError, SchemaError
from markerstore.ingest import schema as ingest_schema
from markerstore.markers import segments

_RECORD: dict[str, Any] = {
    "type": "record", "name": "r", "fields": [
        {"name": "s", "type": "string"},
        {"name": "b", "type": "bytes"},
        {"name": "flag", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "n", "type": ["null", "long"]},
        {"name": "f", "type": "float"},
        {"name": "d", "type": {"type": "double"}},
        {"name": "ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 10, "scale": 2}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "ctx", "type": ["null", {"type": "map", "values": "string"}]},
        {"name": "colour", "type": {"type": "enum", "name": "c", "symbols": ["R", "G"]}},
        {"name": "pos", "type": {"type": "record", "name": "P", "fields": [
            {"name": "x", "type": "double"}]}},
        {"name": "pos2", "type": "P"},
    ]}

_EXPECTED = pa.schema([
    pa.field("s", pa.string(), nullable=False),
    pa.field("b", pa.binary(), nullable=False),
    pa.field("flag", pa.bool_(), nullable=False),
    pa.field("i", pa.int32(), nullable=False),
    pa.field("n", pa.int64(), nullable=True),
    pa.field("f", pa.float32(), nullable=False),
    pa.field("d", pa.float64(), nullable=False),
    pa.field("ms", pa.timestamp("ms", tz="UTC"), nullable=False),
    pa.field("us", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("day", pa.date32(), nullable=False),
    pa.field("amount", pa.decimal128(10, 2), nullable=False),
    pa.field("tags", pa.list_(pa.string()), nullable=False),
    pa.field("ctx", pa.map_(pa.string(), pa.string()), nullable=True),
    pa.field("colour", pa.string(), nullable=False),
    pa.field("pos", pa.struct([pa.field("x", pa.float64(), nullable=False)]), nullable=False),
    pa.field("pos2", pa.struct([pa.field("x", pa.float64(), nullable=False)]), nullable=False),
])


def test_every_avro_type_maps_to_one_arrow_type() -> None:
    assert arrow_avro.arrow_schema(_RECORD).equals(_EXPECTED, check_metadata=True)


def test_the_three_users_share_the_mapping() -> None:
    # ingest's user-given schemas, the marker segment schema and the ErrorRecord schema
    assert ingest_schema.avro_to_arrow(json.dumps(_RECORD)).equals(_EXPECTED)
    assert segments.arrow_schema_from_avro(_RECORD).equals(_EXPECTED)
    assert segments.arrow_schema_from_avro().equals(
        arrow_avro.arrow_schema(segments.avro_schema()))
    assert error_schema.arrow_schema().equals(
        arrow_avro.arrow_schema(error_schema.avro_schema()))
    assert error_schema.arrow_schema().field("context").type == pa.map_(pa.string(),
                                                                        pa.string())


@pytest.mark.parametrize(("avro_type", "fragment"), [
    (["null", "string", "long"], "Avro union"),
    ("nah", "unknown Avro type 'nah'"),
    (42, "cannot read Avro type 42"),
    ({"type": "array", "items": ["int", "string"]}, "Avro union"),
])
def test_an_unmappable_type_is_a_schema_error_naming_it(avro_type: Any, fragment: str) -> None:
    record = {"type": "record", "name": "r", "fields": [{"name": "a", "type": avro_type}]}
    with pytest.raises(SchemaError, match=fragment) as caught:
        arrow_avro.arrow_schema(record)
    # still a ConfigError and a ValueError, as each of the three users raised before
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, ValueError)
    with pytest.raises(SchemaError, match=fragment):
        segments.arrow_schema_from_avro(record)
    assert ingest_schema.SchemaError is SchemaError
