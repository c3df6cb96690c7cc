"""Partition values as each format holds them, read back by the formats' own readers
(delta-rs: its pyarrow reader with and without ``filters=``, its DataFusion
``QueryBuilder``; pyiceberg: its scan with and without a row filter), never by markerstore.

Written from the formats' own rules: Delta stores a partition value as text
(PROTOCOL.md, "Partition Value Serialization": numbers as their text, ``true``/``false``,
dates as ``{year}-{month}-{day}``, binary as the string of its bytes, which Spark and the
Java kernel write as the bytes' UTF-8 text and delta-rs reads back as its UTF-8 bytes);
Iceberg stores it typed in the manifest's partition struct (spec: "Partition Data"), and
a column that a data file lacks reads its identity partition value (spec: "Column
Projection"). A value markerstore writes in a Hive-style folder is escaped (``%2F``, as
Spark escapes it) exactly once; every reader must see the value the writer gave.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from markerstore import Table
from markerstore.commit import TaskAttempt, WriteJob, run_task
from markerstore.errors import ConfigError
from tests.support.formats import BOTH, DELTA, delta_table, iceberg_table

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

UTC = dt.timezone.utc
D = decimal.Decimal
# Every type a partition column of both formats can have, with values whose folder text
# needs care: escapes that look like escapes, an empty string (Hive's null folder), text
# bytes outside ASCII, a NOT NULL column (as Spark's current_date() gives).
COLUMNS = pa.schema([
    pa.field("id", pa.int64()),
    pa.field("s", pa.string()),
    pa.field("i8", pa.int8()),
    pa.field("i32", pa.int32()),
    pa.field("i64", pa.int64()),
    pa.field("f32", pa.float32()),
    pa.field("flag", pa.bool_()),
    pa.field("day", pa.date32(), nullable=False),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("dec", pa.decimal128(10, 2)),
    pa.field("bin", pa.binary()),
])
ROWS: list[dict[str, Any]] = [
    {"id": 1, "s": "%2F", "i8": -8, "i32": 7, "i64": 2 ** 40, "f32": 0.5, "flag": True,
     "day": dt.date(2026, 11, 27), "at": dt.datetime(2026, 11, 27, 3, 4, 5, 250000, tzinfo=UTC),
     "dec": D("12.50"), "bin": b"abc"},
    {"id": 2, "s": "50%25", "i8": 0, "i32": -1, "i64": -(2 ** 40), "f32": -2.25,
     "flag": False, "day": dt.date(1970, 1, 1), "at": dt.datetime(1970, 1, 1, tzinfo=UTC),
     "dec": D("0.01"), "bin": "é/ü".encode()},
    {"id": 3, "s": "a/b=c %d #?: é", "i8": None, "i32": None, "i64": None, "f32": None,
     "flag": None, "day": dt.date(2026, 11, 28), "at": None, "dec": None, "bin": b"\x01\x02"},
    {"id": 4, "s": "", "i8": 1, "i32": 1, "i64": 1, "f32": 1.0, "flag": True,
     "day": dt.date(2026, 11, 28), "at": dt.datetime(2026, 11, 28, 0, 0, 0, 1, tzinfo=UTC),
     "dec": D("0.00"), "bin": None},
]
PARTITION_BY = [f.name for f in COLUMNS if f.name != "id"]


def write(table: Table, schema: pa.Schema, rows: list[dict[str, Any]],
          partition_by: list[str]) -> None:
    job = WriteJob(table, partition_by=partition_by, conflict_mode="append").start()
    batch = pa.RecordBatch.from_pylist(rows, schema=schema)
    job.commit([run_task(job.spec, [batch], TaskAttempt(0, 1, 0, 1))])


def expected(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What every reader must return: the rows as written, Hive's '' folder read as null
    (Spark's own rule: an empty string partition value is null)."""
    return [{**r, "s": r["s"] or None} for r in rows]


def by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows compared by value: timestamps as UTC instants (delta-rs names the zone
    'UTC' with zoneinfo, pyiceberg with datetime.timezone)."""
    return [{k: v.astimezone(UTC) if isinstance(v, dt.datetime) else v for k, v in r.items()}
            for r in rows]


@pytest.fixture
def written(tmp_path: Path) -> Table:
    table = Table(str(tmp_path / "values"), None, BOTH)
    write(table, COLUMNS, ROWS, PARTITION_BY)
    return table


def test_delta_reads_every_partition_value_as_written(written: Table) -> None:
    delta = delta_table(written)
    want = by_id(expected(ROWS))
    assert plain(by_id(delta.to_pyarrow_table().to_pylist())) == plain(want)
    for row in want:  # an equality filter on each partition column finds exactly its rows
        for column in PARTITION_BY:
            if row[column] is None:
                continue
            got = delta.to_pyarrow_table(filters=[(column, "=", row[column])])
            assert sorted(got.column("id").to_pylist()) == sorted(
                r["id"] for r in want if r[column] == row[column]), column


def test_delta_sql_reads_every_partition_value_as_written(written: Table) -> None:
    from deltalake import QueryBuilder

    query = QueryBuilder().register("t", delta_table(written))
    got = pa.table(query.execute("SELECT * FROM t ORDER BY id").read_all())
    assert plain(got.to_pylist()) == plain(by_id(expected(ROWS)))
    found = pa.table(query.execute(
        "SELECT id FROM t WHERE s = '%2F' OR s = '50%25' OR bin = X'C3A92FC3BC'"
        " ORDER BY id").read_all())
    assert found.column("id").to_pylist() == [1, 2]


def test_pyiceberg_reads_every_partition_value_as_written(written: Table) -> None:
    from pyiceberg.expressions import EqualTo

    iceberg = iceberg_table(written)
    want = by_id(expected(ROWS))
    assert plain(by_id(iceberg.scan().to_arrow().to_pylist())) == plain(want)
    for row in want:
        for column in ("s", "i32", "i64", "flag", "day", "dec", "bin"):
            if row[column] is None:
                continue
            got = iceberg.scan(row_filter=EqualTo(column, row[column])).to_arrow()
            assert sorted(got.column("id").to_pylist()) == sorted(
                r["id"] for r in want if r[column] == row[column]), column


def test_a_not_null_partition_column_scans(tmp_path: Path) -> None:
    """A NOT NULL partition column (Spark's current_date()) is in no data file: Iceberg's
    column projection fills it from the partition value, which pyiceberg refuses for a
    required field; the Iceberg table holds it optional, and the values read back."""
    schema = pa.schema([pa.field("id", pa.int64()),
                        pa.field("day", pa.date32(), nullable=False)])
    table = Table(str(tmp_path / "notnull"), None, BOTH)
    rows = [{"id": 1, "day": dt.date(2026, 11, 27)}]
    write(table, schema, rows, ["day"])
    assert iceberg_table(table).scan().to_arrow().to_pylist() == rows
    assert delta_table(table).to_pyarrow_table().to_pylist() == rows


def _pyiceberg_reads_doubles() -> bool:
    from markerstore.formats.values import pyiceberg_reads_doubles

    return pyiceberg_reads_doubles()


def test_a_double_partition_column_reads_back_or_is_refused(tmp_path: Path) -> None:
    """pyiceberg 0.12's Avro decoder reads a manifest's double as a float
    (apache/iceberg-python#3808): 0.1 scans back as 0.10000000149011612 and an equality
    filter finds nothing. Where the installed pyiceberg does that, a DOUBLE partition
    column with Iceberg on is refused before anything is written; Delta alone holds it
    exactly."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.float64())])
    rows = [{"id": 1, "x": 0.1}, {"id": 2, "x": 1e300}]
    delta = Table(str(tmp_path / "delta"), None, DELTA)
    write(delta, schema, rows, ["x"])
    assert by_id(delta_table(delta).to_pyarrow_table().to_pylist()) == rows
    assert delta_table(delta).to_pyarrow_table(filters=[("x", "=", 0.1)]).num_rows == 1
    both = Table(str(tmp_path / "both"), None, BOTH)
    if _pyiceberg_reads_doubles():
        write(both, schema, rows, ["x"])
        assert by_id(iceberg_table(both).scan().to_arrow().to_pylist()) == rows
        return
    with pytest.raises(ConfigError, match=r"DOUBLE partition column 'x'.*"
                                          r"apache/iceberg-python#3808"):
        write(both, schema, rows, ["x"])
    assert both.completed() == []
    assert not [p for p in (tmp_path / "both").rglob("*.parquet")]


def test_a_binary_partition_value_that_is_not_utf8_is_refused_for_delta(tmp_path: Path
                                                                         ) -> None:
    """Delta keeps a binary partition value as text: Spark and the Java kernel write the
    bytes' UTF-8 text, delta-rs reads its UTF-8 bytes; bytes that are not UTF-8 have no
    text (delta-io/delta#6480). Such a value fails the write before anything is
    committed, naming the column; UTF-8 bytes read back exactly."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("b", pa.binary())])
    table = Table(str(tmp_path / "bin"), None, DELTA)
    write(table, schema, [{"id": 1, "b": b"\x00ok\x7f"}], ["b"])
    with pytest.raises(ConfigError, match=r"BINARY partition column 'b'.*not UTF-8.*"
                                          r"delta-io/delta#6480"):
        write(table, schema, [{"id": 2, "b": b"\xff\xfe"}], ["b"])
    assert len(table.completed()) == 1
    assert delta_table(table).to_pyarrow_table().to_pylist() == [{"id": 1, "b": b"\x00ok\x7f"}]


def test_a_negative_decimal_partition_value_with_a_fraction_is_refused_for_delta(
        tmp_path: Path) -> None:
    """delta-rs 1.6's pyarrow reader turns the Delta partition value ``-0.01`` of a
    DECIMAL(10,2) column into ``0.-1`` and fails the whole read; such a value fails the
    write before anything is committed. A negative whole value reads back."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("d", pa.decimal128(10, 2))])
    whole = pa.schema([pa.field("id", pa.int64()), pa.field("d", pa.decimal128(10, 0))])
    table = Table(str(tmp_path / "dec"), None, DELTA)
    write(table, schema, [{"id": 1, "d": D("0.01")}], ["d"])
    with pytest.raises(ConfigError, match=r"DECIMAL partition column 'd': the value -0.01 "
                                          r"is negative with a fraction"):
        write(table, schema, [{"id": 2, "d": D("-0.01")}], ["d"])
    assert delta_table(table).to_pyarrow_table().to_pylist() == [{"id": 1, "d": D("0.01")}]
    other = Table(str(tmp_path / "whole"), None, DELTA)
    write(other, whole, [{"id": 3, "d": D("-12")}], ["d"])
    assert delta_table(other).to_pyarrow_table().to_pylist() == [{"id": 3, "d": D("-12")}]


@pytest.mark.parametrize(("folder", "value"), [
    ("s=50%2525/f.parquet", "50%25"), ("s=%252F/f.parquet", "%2F"), ("s=a%2Fb/f.parquet", "a/b"),
    ("s=%85/f.parquet", "\x85"), ("a%3Db=x/f.parquet", None)])
def test_a_folder_is_unescaped_once_as_spark_unescapes_it(folder: str, value: str | None
                                                           ) -> None:
    """Spark's unescapePathName: each %XX is the character with that code, undone once."""
    from markerstore.formats import hive_partition

    got = hive_partition(folder)
    assert got == ({"a=b": "x"} if value is None else {"s": value})


@pytest.mark.spark
def test_a_spark_current_date_partition_column_reads_back(spark: Any, tmp_path: Path) -> None:
    """Spark's current_date() is a NOT NULL column: written through Spark, partitioned by
    it, both formats' readers see its value."""
    from pyspark.sql import functions as F

    import markerstore.spark as ms

    url = str(tmp_path / "today")
    frame = spark.range(3).withColumn("day", F.current_date())
    assert not frame.schema["day"].nullable
    ms.write(frame, url, partition_by=["day"], options=BOTH)
    today = frame.select("day").first()[0]
    table = Table(url)
    want = [{"id": i, "day": today} for i in range(3)]
    assert by_id(iceberg_table(table).scan().to_arrow().to_pylist()) == want
    assert by_id(delta_table(table).to_pyarrow_table().to_pylist()) == want
