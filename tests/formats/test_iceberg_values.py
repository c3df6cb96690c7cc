"""Partition values arrive as the text of Hive-style folders, unescaped once; the Iceberg
partition record needs them typed by the column: every value markerstore writes in a
folder name reads back as itself, a null folder as None, and a value that does not fit
is an error."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

from markerstore.commit.names import format_value, partition_path
from markerstore.formats.base import PublishedFile
from markerstore.formats.commits import hive_partition
from markerstore.formats.iceberg_files import (
    IcebergPublishError,
    iceberg_schema,
    identity_spec,
    partition_record,
    partition_value,
)
from markerstore.formats.values import unescape
from markerstore.paths import HIVE_DEFAULT_PARTITION

UTC = dt.timezone.utc
ROUND_TRIPS: list[tuple[IcebergType, Any]] = [
    (StringType(), "plain"),
    (StringType(), "a/b=c %d #?: é"),
    (IntegerType(), -42),
    (LongType(), 2 ** 40),
    (DoubleType(), 2.5),
    (BooleanType(), True),
    (BooleanType(), False),
    (DateType(), dt.date(2026, 11, 27)),
    (TimestampType(), dt.datetime(2026, 11, 27, 3, 4, 5)),
    (TimestampType(), dt.datetime(2026, 11, 27, 3, 4, 5, 250000)),
    (TimestamptzType(), dt.datetime(2026, 11, 27, 3, 4, 5, 1, tzinfo=UTC)),
    (DecimalType(10, 2), decimal.Decimal("12.50")),
    (BinaryType(), b"\x00\xffab"),
    (UUIDType(), uuid.UUID("12345678-1234-5678-1234-567812345678")),
]


@pytest.mark.parametrize(("column_type", "value"), ROUND_TRIPS,
                         ids=[f"{t}-{v!r}" for t, v in ROUND_TRIPS])
def test_a_value_markerstore_writes_in_a_folder_reads_back(column_type: IcebergType,
                                                           value: Any) -> None:
    assert partition_value(unescape(format_value(value)), column_type) == value


@pytest.mark.parametrize("column_type", [StringType(), LongType(), DateType()])
def test_the_null_folder_is_null(column_type: IcebergType) -> None:
    assert format_value(None) == HIVE_DEFAULT_PARTITION
    assert partition_value(HIVE_DEFAULT_PARTITION, column_type) is None
    assert partition_value(None, column_type) is None


@pytest.mark.parametrize(("text", "column_type"), [
    ("abc", LongType()), ("2026-13-01", DateType()), ("yes", BooleanType()),
    ("1.5.5", DecimalType(10, 2)), ("zz", BinaryType()), ("x", ListType(1, LongType())),
])
def test_a_value_that_does_not_fit_its_column_is_an_error(text: str,
                                                          column_type: IcebergType) -> None:
    with pytest.raises(ValueError, match=repr(text) + "|cannot be a partition column"):
        partition_value(text, column_type)


def test_the_record_follows_the_spec_with_escaped_names_and_internal_values() -> None:
    schema = iceberg_schema(pa.schema([("v", pa.int64()), ("a=b", pa.string()),
                                       ("day", pa.date32())]))
    spec = identity_spec(schema, ("day", "a=b"))
    folder = partition_path(["a=b", "day"], ["x/y", dt.date(1970, 1, 3)])
    partition = hive_partition(f"{folder}/f.parquet")
    metadata = _metadata(schema, spec)
    record = partition_record(PublishedFile(f"{folder}/f.parquet", 1, 1, partition), metadata)
    assert (record[0], record[1]) == (2, "x/y")     # a date is days since the epoch


def test_a_file_without_a_value_for_a_partition_column_is_an_error() -> None:
    schema = iceberg_schema(pa.schema([("v", pa.int64()), ("day", pa.date32())]))
    metadata = _metadata(schema, identity_spec(schema, ("day",)))
    with pytest.raises(IcebergPublishError, match="f.parquet: no partition value for column 'day'"):
        partition_record(PublishedFile("f.parquet", 1, 1, {}), metadata)


def test_a_partition_column_missing_from_the_schema_is_an_error() -> None:
    schema = iceberg_schema(pa.schema([("v", pa.int64())]))
    with pytest.raises(IcebergPublishError, match="partition column 'day' is not in"):
        identity_spec(schema, ("day",))


def _metadata(schema: Any, spec: Any) -> Any:
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    return new_table_metadata(schema, spec, UNSORTED_SORT_ORDER, "file:///nowhere", {})
