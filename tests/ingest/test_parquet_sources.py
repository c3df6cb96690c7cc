"""Parquet sources: every table the ingest commits from one is readable by Spark with the
schema it reports, and its values are the source's, or the record is an error record that
says why (markerstore.ingest.parquet has the mapping).

A property over every Arrow type pyarrow writes to Parquet (every integer width, signed
and not; half, single and double floats; decimals of 32 to 256 bits, wider than Spark's
38 digits too; every string and binary layout; dates of days and milliseconds; times and
durations of every unit; timestamps of every unit, naive and in zones; null; dictionary,
list, large list, fixed-size list, list views, struct and map; UUID, JSON and bool8),
written with and without
`use_deprecated_int96_timestamps`: the ingest infers the schema, commits, and Spark's own
Parquet reader reads the committed files: the same rows, each value as the source's as
the mapping reads it, and every other record one `cast` error record naming its
column. `make test` runs a few examples; the `campaign` test runs many."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markerstore import Table
from markerstore.cli import cli
from markerstore.ingest.pipeline import ingest
from tests.support.readback import error_rows

pytestmark = pytest.mark.spark

ZONES = (None, "UTC", "Europe/Paris", "America/Sao_Paulo")
UNITS = ("s", "ms", "us", "ns")
EPOCH = dt.datetime(1970, 1, 1)
PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else \
        st.integers(0, 2**bits - 1)


def _stamps(unit: str) -> st.SearchStrategy[int]:
    """Counts of `unit` since 1970 from 1900 to 2100 (any sub-unit digits)."""
    low = int((dt.datetime(1900, 1, 1) - EPOCH).total_seconds()) * PER_SECOND[unit]
    high = int((dt.datetime(2100, 1, 1) - EPOCH).total_seconds()) * PER_SECOND[unit]
    return st.integers(low, high)


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    digits = st.integers(-(10**precision - 1), 10**precision - 1)
    def text(d: int) -> Decimal:
        whole, fraction = divmod(abs(d), 10**scale)
        return Decimal(f"{'-' if d < 0 else ''}{whole}.{fraction:0{scale}d}")

    return digits.map(text)


def columns() -> dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]]:
    """Every Arrow type pyarrow writes, with a strategy for its values (as pa.array
    takes them)."""
    found: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {}
    for bits in (8, 16, 32, 64):
        for signed in (True, False):
            kind = getattr(pa, f"{'' if signed else 'u'}int{bits}")()
            found[f"{'i' if signed else 'u'}{bits}"] = (kind, _ints(bits, signed))
    floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
    found.update({
        "f16": (pa.float16(), st.floats(-65504, 65504, width=16).map(
            lambda f: __import__("numpy").float16(f))),
        "f32": (pa.float32(), floats), "f64": (pa.float64(), st.floats()),
        "d32": (pa.decimal32(7, 2), _decimals(7, 2)),
        "d64": (pa.decimal64(15, 4), _decimals(15, 4)),
        "d128": (pa.decimal128(38, 10), _decimals(38, 10)),
        "d256": (pa.decimal256(40, 3), _decimals(40, 3)),
        "b": (pa.bool_(), st.booleans()),
        "s": (pa.string(), st.text(max_size=8)), "ls": (pa.large_string(), st.text(max_size=8)),
        "sv": (pa.string_view(), st.text(max_size=8)),
        "bin": (pa.binary(), st.binary(max_size=8)), "lbin": (pa.large_binary(), st.binary(
            max_size=8)), "fsb": (pa.binary(3), st.binary(min_size=3, max_size=3)),
        "date": (pa.date32(), st.dates(dt.date(1900, 1, 1), dt.date(2100, 1, 1))),
        "date64": (pa.date64(), st.integers(-2 * 10**12, 4 * 10**12)),  # ms: not whole days too
        "t_s": (pa.time32("s"), st.integers(0, 86399)),
        "t_ms": (pa.time32("ms"), st.integers(0, 86399999)),
        "t_us": (pa.time64("us"), st.integers(0, 86399999999)),
        "t_ns": (pa.time64("ns"), st.integers(0, 86399999999999)),
        "null": (pa.null(), st.none()),
        "dict": (pa.dictionary(pa.int16(), pa.string()), st.sampled_from(["a", "b", "\u00e9"])),
        "list": (pa.list_(pa.int32()), st.lists(_ints(32, True), max_size=3)),
        "llist": (pa.large_list(pa.timestamp("ns")), st.lists(_stamps("ns"), max_size=3)),
        "fsl": (pa.list_(pa.int16(), 2), st.lists(_ints(16, True), min_size=2, max_size=2)),
        "struct": (pa.struct([("u", pa.uint8()), ("t", pa.timestamp("ns", "Asia/Tokyo"))]),
                   st.fixed_dictionaries({"u": _ints(8, False), "t": _stamps("ns")})),
        "lview": (pa.list_view(pa.int64()), st.lists(_ints(64, True), max_size=3)),
        "llview": (pa.large_list_view(pa.string()), st.lists(st.text(max_size=3), max_size=3)),
        "bview": (pa.binary_view(), st.binary(max_size=8)),
        "uuid": (pa.uuid(), st.uuids().map(lambda u: u.bytes)),
        "json": (pa.json_(), st.dictionaries(st.text(max_size=3), st.integers()).map(json.dumps)),
        "bool8": (pa.bool8(), st.booleans()),
        "map": (pa.map_(pa.string(), pa.uint32()), st.dictionaries(
            st.text(max_size=3), _ints(32, False), max_size=2).map(lambda d: list(d.items()))),
    })
    for unit in UNITS:
        found[f"dur_{unit}"] = (pa.duration(unit), st.integers(-10**12, 10**12))
        for zone in ZONES:
            name = f"ts_{unit}_{(zone or 'naive').replace('/', '_').lower()}"
            found[name] = (pa.timestamp(unit, zone), _stamps(unit))
    return found


COLUMNS = columns()
ROW = "_row"  # each source row's number


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(1, 6))
    arrays = {"_row": pa.array(range(rows), pa.int64())}
    for name, (kind, values) in COLUMNS.items():
        drawn = draw(st.lists(st.one_of(st.none(), values), min_size=rows, max_size=rows))
        if pa.types.is_dictionary(kind):
            arrays[name] = pa.array(drawn, pa.string()).dictionary_encode().cast(kind)
        elif pa.types.is_decimal(kind):  # through text: pa.array infers a precision first
            arrays[name] = pa.array([None if v is None else f"{v:f}" for v in drawn]).cast(kind)
        elif isinstance(kind, pa.BaseExtensionType):
            storage = [int(v) if kind == pa.bool8() and v is not None else v for v in drawn]
            arrays[name] = pa.ExtensionArray.from_storage(kind, pa.array(storage,
                                                                         kind.storage_type))
        else:
            arrays[name] = pa.array(drawn, kind)
    return pa.table(arrays)


def expected(column: pa.ChunkedArray, name: str) -> tuple[list[Any], set[int]]:
    """The values Spark must read of a source column (as pyarrow reads it back from the
    Parquet file: a date64 is a DATE there, INT96 nanoseconds), and the rows that cannot
    keep one (a `cast` error record each)."""
    kind = column.type
    raw = column.cast(kind.value_type) if pa.types.is_dictionary(kind) else column
    if isinstance(kind, pa.BaseExtensionType):  # Spark reads its storage
        raw = pa.chunked_array([c.storage for c in raw.chunks], kind.storage_type)
    kind = raw.type
    bad: set[int] = set()
    if pa.types.is_timestamp(kind):
        values = [None if c is None else _moment(c, kind.unit)
                  for c in raw.cast(pa.int64()).to_pylist()]
    elif pa.types.is_time(kind):  # ISO 8601 text, as Arrow writes a time
        values = pc.cast(raw, pa.string()).to_pylist()
    elif pa.types.is_duration(kind):
        values = raw.cast(pa.int64()).to_pylist()
    elif name == "llist":
        values = [None if v is None else [_moment(c, "ns") for c in v]
                  for v in raw.cast(pa.large_list(pa.int64())).to_pylist()]
    elif name == "struct":
        plain = raw.cast(pa.struct([("u", pa.uint8()), ("t", pa.int64())])).to_pylist()
        values = [None if v is None else {"u": v["u"], "t": None if v["t"] is None else
                                          _moment(v["t"], "ns")} for v in plain]
    else:
        values = raw.to_pylist()
    if pa.types.is_decimal(kind) and kind.precision > 38:  # Spark holds 38 digits
        bound = Decimal(10) ** (38 - kind.scale)
        bad = {i for i, v in enumerate(values) if v is not None and abs(v) >= bound}
    elif pa.types.is_map(kind):
        values = [None if v is None else dict(v) for v in values]
    elif pa.types.is_float16(kind):
        values = [None if v is None else float(v) for v in values]
    return values, bad


def _moment(count: int, unit: str) -> dt.datetime:
    """A timestamp's count of `unit` since 1970 as the UTC wall time Spark reads, cut to
    the microsecond at or before it."""
    return EPOCH + dt.timedelta(microseconds=count * 10**6 // PER_SECOND[unit])


def _spark_value(value: Any) -> Any:
    """A value as Spark's collect gives it, made comparable: rows and maps as dicts,
    bytes as bytes."""
    if hasattr(value, "asDict"):
        return {k: _spark_value(v) for k, v in value.asDict().items()}
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, list):
        return [_spark_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _spark_value(v) for k, v in value.items()}
    return value


def _same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return (math.isnan(ours) and math.isnan(theirs)) or ours == theirs
    return bool(ours == theirs)


def check(spark: Any, tmp_path: Path, table: pa.Table, int96: bool, cli_too: bool = False
          ) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    source = tmp_path / "source.parquet"
    pq.write_table(table, source, use_deprecated_int96_timestamps=int96)
    target = tmp_path / "t"
    if cli_too:
        out = CliRunner().invoke(cli, ["ingest", str(source), str(target), "--markers",
                                       "direct", "--no-progress", "--json"])
        assert out.exit_code == 0, out.output
        rows_written = json.loads(out.stdout)["rows_written"]
    else:
        rows_written = ingest(str(source), str(target), spark=spark, markers="direct",
                              progress=False).commit.rows_written
    written = pq.read_table(source)  # what the file holds
    found = {name: expected(written.column(name), name) for name in written.column_names}
    bad = set().union(*(b for _, b in found.values()))
    errors = error_rows(str(target), columns="reason, message").to_pylist()
    assert rows_written == table.num_rows - len(bad), (sorted(bad), errors)
    snapshot = Table(str(target)).snapshot()
    files = [f"file://{snapshot.storage.path(f.path)}" for f in snapshot.files]
    theirs = {r[ROW]: r for r in spark.read.parquet(*files).collect()} if files else {}
    assert sorted(theirs) == [i for i in range(table.num_rows) if i not in bad]
    for i, row in theirs.items():
        for name, (values, _) in found.items():
            assert _same(values[i], _spark_value(row[name])), (name, values[i], row[name])
    assert len(errors) == len(bad) and all(e["reason"] == "cast" for e in errors)
    assert all("'d256' to decimal128(38, 3)" in e["message"] for e in errors)


@pytest.mark.parametrize("int96", [False, True])
@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(table=tables())
def test_every_parquet_type_reads_back_in_spark_as_the_source_says(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, table: pa.Table, int96: bool
        ) -> None:
    check(spark, tmp_path_factory.mktemp("pq"), table, int96)


@pytest.mark.campaign
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(table=tables(), int96=st.booleans())
def test_every_parquet_type_reads_back_in_spark_campaign(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, table: pa.Table, int96: bool
        ) -> None:
    check(spark, tmp_path_factory.mktemp("pq"), table, int96)


def test_int96_and_nanosecond_sources_through_the_cli(spark: Any, tmp_path: Path) -> None:
    """Spark's and Hive's old INT96 timestamps and pandas' nanoseconds: the committed table
    was unreadable by Spark (PARQUET_TYPE_ILLEGAL); through the CLI it reads, cut to the
    microsecond at or before each value; a decimal wider than Spark's 38 digits is a `cast`
    error record naming its column (its payload holding a string view too)."""
    table = pa.table({ROW: pa.array([0, 1], pa.int64()),
                      "ts_ns_naive": pa.array([-1500, 1_600_000_000_123_456_789],
                                              pa.timestamp("ns")),
                      "u64": pa.array([0, 2**64 - 1], pa.uint64()),
                      "d256": pa.array(["1.500", "1" + "0" * 36 + ".000"]).cast(
                          pa.decimal256(40, 3)),
                      "sv": pa.array(["a", "b"], pa.string_view())})
    check(spark, tmp_path / "int96", table, True, cli_too=True)
    check(spark, tmp_path / "int64", table, False, cli_too=True)
