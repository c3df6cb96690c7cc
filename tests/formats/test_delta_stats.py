"""Delta's per-file statistics, read the way readers use them: a filtered read skips a file
whose statistics say it holds no matching row (PROTOCOL.md, "Per-file Statistics":
``minValues`` at most, ``maxValues`` at least every value of the column in the file,
``nullCount``). So every filter, on every column type, must return exactly the rows an
unfiltered read finds matching, through delta-rs's pyarrow reader (``filters=``) and its
DataFusion ``QueryBuilder``, never through markerstore.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from markerstore import Table
from markerstore.commit import TaskAttempt, WriteJob, run_task
from markerstore.formats.stats import footer_stats
from tests.support.formats import DELTA, delta_table

pytest.importorskip("deltalake")

UTC = dt.timezone.utc
D = decimal.Decimal
STRING_PREFIX = 32      # Delta's dataSkippingStringPrefixLength: strings longer are cut
TIE_BREAKER = "\ufffd"  # what Delta's writers append to a cut max
LONG = "x" * 40
SCHEMA = pa.schema([
    ("id", pa.int64()), ("flag", pa.bool_()), ("i8", pa.int8()), ("i32", pa.int32()),
    ("f64", pa.float64()), ("dec", pa.decimal128(38, 10)), ("day", pa.date32()),
    ("at", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us")), ("s", pa.string()),
    ("bin", pa.binary()), ("none", pa.int64()),
])
BIG = D("1234567890123456789012345678.1234567891")


def _file(task: int) -> list[dict[str, Any]]:
    """The rows of one task (one data file): each file's values in a range of its own,
    so a bound that is wrong skips a file that holds the value."""
    base = task * 10
    return [{
        "id": base + i,
        "flag": task % 2 == 0 if i else None,
        "i8": base + i - 20,
        "i32": -(base + i) * 1000,
        "f64": [float("nan") if task == 3 else 2.5 * task, 0.1 * base, -1e300][i % 3],
        "dec": [BIG - task, (D(task) / 3).quantize(D("1e-10")), D("-0.0000000001")][i % 3],
        "day": dt.date(2026, 1, 1) + dt.timedelta(days=base + i),
        "at": dt.datetime(2026, 1, 1, 0, 0, 0, 123456 + task, tzinfo=UTC)
        + dt.timedelta(milliseconds=base + i),
        "ntz": dt.datetime(2026, 1, 1, 0, 0, 0, 999) + dt.timedelta(microseconds=task + 3 * i),
        "s": [LONG + chr(0x61 + task), LONG + "\U0001F600" * (task + 1),
              "x" * STRING_PREFIX + "\uffff" + str(task)][i % 3],
        "bin": bytes([task, i]),
        "none": None,
    } for i in range(3)]


ROWS = [row for task in range(4) for row in _file(task)]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    folder: Path = tmp_path_factory.mktemp("stats")
    table = Table(str(folder / "t"), None, DELTA)
    job = WriteJob(table, conflict_mode="append").start()
    results = [run_task(job.spec, [pa.RecordBatch.from_pylist(_file(task), schema=SCHEMA)],
                        TaskAttempt(task, 1, 0, task)) for task in range(4)]
    job.commit(results)
    return table


def _log_stats(table: Table) -> list[dict[str, Any]]:
    """The ``stats`` of every add action, as the log's JSON holds them."""
    found = []
    for path in sorted(Path(table.storage.root, "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                found.append(json.loads(action["add"]["stats"]))
    return found


@pytest.fixture(scope="module")
def without_stats(table: Table, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same files in a Delta table whose adds carry numRecords alone: what a reader
    returns when no statistics prune anything."""
    import shutil

    copy = tmp_path_factory.mktemp("nostats") / "t"
    shutil.copytree(table.storage.root, copy)
    for path in (copy / "_delta_log").glob("*.json"):
        lines = []
        for line in path.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                stats = json.loads(action["add"]["stats"])
                action["add"]["stats"] = json.dumps({"numRecords": stats["numRecords"]})
            lines.append(json.dumps(action))
        path.write_text("\n".join(lines) + "\n")
    from deltalake import DeltaTable

    return DeltaTable(str(copy))


def _matching(column: str, op: str, value: Any) -> list[int]:
    """The ids an unfiltered reader finds for `column op value` (nulls never match)."""
    data = pa.Table.from_pylist(ROWS, schema=SCHEMA)
    ops = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater,
           ">=": pc.greater_equal}
    scalar = pa.scalar(value, SCHEMA.field(column).type)
    mask = pc.fill_null(ops[op](data.column(column), scalar), False)
    return sorted(data.filter(mask).column("id").to_pylist())


FILTERED = ["flag", "i8", "i32", "f64", "dec", "day", "at", "ntz", "s"]


def _literal(column: str, value: Any) -> str:
    """`value` as a SQL literal of `column`'s type (DataFusion's syntax)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, decimal.Decimal):
        return f"CAST('{value:f}' AS DECIMAL(38, 10))"
    if isinstance(value, dt.datetime):
        zone = "Z" if value.tzinfo else ""
        return f"TIMESTAMP '{value.replace(tzinfo=None).isoformat()}{zone}'"
    if isinstance(value, (dt.date, str)):
        text = str(value).replace("'", "''")
        return f"DATE '{text}'" if isinstance(value, dt.date) else f"'{text}'"
    return str(value)


@pytest.mark.parametrize("column", FILTERED)
def test_every_filter_returns_every_matching_row(table: Table, without_stats: Any,
                                                 column: str) -> None:
    """Each comparison with each value of the column returns what the same reader returns
    with no statistics to prune by, and what an unfiltered read finds: through the pyarrow
    reader's ``filters=`` and through SQL (DataFusion, whose comparisons order NaN above
    every number)."""
    from deltalake import QueryBuilder

    delta = delta_table(table)
    query = QueryBuilder().register("t", delta).register("u", without_stats)
    values = {r[column] for r in ROWS if r[column] is not None}
    for value in sorted(values, key=repr):
        for op in ("=", "<", "<=", ">", ">="):
            if isinstance(value, float) and value != value:
                continue  # NaN: no comparison filter holds it
            flt = [(column, op, value)]
            got = sorted(delta.to_pyarrow_table(filters=flt).column("id").to_pylist())
            assert got == sorted(without_stats.to_pyarrow_table(filters=flt)
                                 .column("id").to_pylist()), flt
            assert got == _matching(column, op, value), flt
            where = f"WHERE {column} {op} {_literal(column, value)}"
            found, unpruned = (sorted(pa.table(query.execute(
                f"SELECT id FROM {name} {where}").read_all()).column("id").to_pylist())
                for name in "tu")
            assert found == unpruned, where  # DataFusion orders NaN above every number
            if column != "f64":
                assert found == got, where


def test_each_column_has_all_its_statistics_or_none(table: Table) -> None:
    """A column is in minValues, maxValues and nullCount together, or only in nullCount
    when every value is null, or in none; a file with a NaN in a double column has none."""
    found = _log_stats(table)
    assert len(found) == 4
    assert sorted(len(s) for s in found) == [1, 4, 4, 4]
    for stats in found:
        if len(stats) == 1:
            assert stats == {"numRecords": 3}              # the file with a NaN
            continue
        mins, maxs = stats.get("minValues", {}), stats.get("maxValues", {})
        nulls = stats.get("nullCount", {})
        assert set(mins) == set(maxs) and set(mins) <= set(nulls)
        assert set(nulls) - set(mins) == {"none"}          # the all-null column
        assert nulls["none"] == stats["numRecords"] == 3
        assert "bin" not in nulls                          # binary: no statistics
        # strings over 32 characters: a 32-character prefix, a max past it
        assert len(mins["s"]) == STRING_PREFIX and maxs["s"].endswith(TIE_BREAKER)
        assert len(maxs["s"]) <= STRING_PREFIX + 2


def test_a_column_without_sure_bounds_leaves_the_file_without_column_statistics(
        tmp_path: Path) -> None:
    """A row group with values but no bounds (statistics off for the column, or a group
    of NaN only): the file gets numRecords alone, never bounds for some columns."""
    data = pa.table({"a": pa.array([1, 2, 3, 4], pa.int64()),
                     "b": pa.array(["x", "y", "z", "w"]),
                     "f": pa.array([float("nan")] * 2 + [1.0, 2.0])})
    pq.write_table(data, tmp_path / "off.parquet", row_group_size=2,
                   write_statistics=["a", "f"])
    assert footer_stats(pq.read_metadata(tmp_path / "off.parquet")) == {"numRecords": 4}
    pq.write_table(data.drop_columns(["b"]), tmp_path / "nan.parquet", row_group_size=2)
    assert footer_stats(pq.read_metadata(tmp_path / "nan.parquet")) == {"numRecords": 4}
    pq.write_table(data.drop_columns(["f"]), tmp_path / "ok.parquet", row_group_size=2)
    assert footer_stats(pq.read_metadata(tmp_path / "ok.parquet")) == {
        "numRecords": 4, "minValues": {"a": 1, "b": "w"}, "maxValues": {"a": 4, "b": "z"},
        "nullCount": {"a": 0, "b": 0}}
