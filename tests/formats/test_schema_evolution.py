"""A later write with other columns: schema evolution as each format defines it, or a
refusal before anything is written.

The Delta protocol evolves a table's schema with a ``metaData`` action in the version that
needs it (new columns, nullability widened; a type change only through the
``typeWidening`` feature, which delta-rs does not write); the Iceberg spec with
``union_by_name`` (new optional columns, required to optional, and the promotions int to
long, float to double, a decimal's precision growing). Neither changes a table's
partitioning here, and neither holds an interval. Each table is read back with delta-rs
(pyarrow and DataFusion) and pyiceberg, never with markerstore."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.expressions import IsNull

from markerstore import Table, TableFormatError
from markerstore.commit import TaskAttempt, WriteJob, run_task
from tests.formats.readback import delta, delta_arrow, delta_sql, iceberg, iceberg_arrow, rows
from tests.support.commit_checks import open_table

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")


def _write(table: Table, schema: pa.Schema, data: Sequence[dict[str, Any]],
           partition_by: Sequence[str] = ("day",)) -> Any:
    """One write of `data` (in `schema`), its columns checked when it starts."""
    job = WriteJob(table, partition_by=partition_by, conflict_mode="append",
                   schema=schema).start()
    batch = pa.RecordBatch.from_pylist(list(data), schema=schema)
    return job.commit([run_task(job.spec, [batch], TaskAttempt(0, 1, 0, 0))])


def _files(table: Table) -> list[str]:
    root = table.storage.root
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, _, names in os.walk(root) for f in names)


def _refused(table: Table, schema: pa.Schema, data: Sequence[dict[str, Any]],
             partition_by: Sequence[str] = ("day",)) -> str:
    """The one-line refusal of a write, having checked that it wrote nothing."""
    timeline, files = table.timeline(), _files(table)
    with pytest.raises(TableFormatError) as refused:
        _write(table, schema, data, partition_by)
    assert table.timeline() == timeline and _files(table) == files
    message = str(refused.value)
    assert "\n" not in message
    return message


V1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("day", pa.int64()),
                ("v", pa.string())])


def test_a_new_column_and_a_null_in_a_not_null_column_reach_every_reader(
        local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta,iceberg")
    url = table.storage.url()
    _write(table, V1, [{"id": i, "day": i % 2, "v": f"a{i}"} for i in range(4)])
    assert delta(url).schema().fields[0].nullable is False
    v2 = pa.schema([("id", pa.int64()), ("day", pa.int64()), ("v", pa.string()),
                    ("note", pa.float64())])
    _write(table, v2, [{"id": None, "day": 0, "v": "b", "note": 1.5},
                       {"id": 9, "day": 1, "v": "c", "note": None}])
    # a third write without `v`: its rows hold nulls there
    _write(table, pa.schema([("id", pa.int64()), ("day", pa.int64())]), [{"id": 7, "day": 0}])

    expected = sorted([(i, i % 2, f"a{i}", None) for i in range(4)]
                      + [(None, 0, "b", 1.5), (9, 1, "c", None), (7, 0, None, None)], key=repr)
    columns = ["id", "day", "v", "note"]
    assert rows(delta_arrow(url), columns) == expected
    assert rows(delta_sql(url), columns) == expected
    assert rows(iceberg_arrow(url), columns) == expected
    fields = {f.name: f for f in delta(url).schema().fields}
    assert fields["note"].type.type == "double" and fields["id"].nullable
    assert fields["v"].nullable
    nulls = delta_sql(url, "SELECT count(*) AS n FROM t WHERE id IS NULL")
    assert nulls.column("n").to_pylist() == [1]
    assert iceberg(url).scan(row_filter=IsNull("id")).to_arrow().num_rows == 1
    schema = iceberg(url).schema()
    assert not schema.find_field("id").required and schema.find_field("note")


def test_a_type_change_is_published_where_the_format_widens_it_else_refused(
        local_where: Any, tmp_path: Any) -> None:
    small = pa.schema([("n", pa.int32()), ("day", pa.int64())])
    wide = pa.schema([("n", pa.int64()), ("day", pa.int64())])
    both = open_table(local_where, markerstore__table__formats="delta,iceberg")
    _write(both, small, [{"n": 1, "day": 0}])
    message = _refused(both, wide, [{"n": 2**40, "day": 0}])
    assert "'n'" in message and "Delta" in message
    # Iceberg alone: int to long is a promotion its spec allows.
    only = Table(str(tmp_path / "only"), None, {"markerstore.table.formats": "iceberg"})
    _write(only, small, [{"n": 1, "day": 0}])
    _write(only, wide, [{"n": 2**40, "day": 1}])
    assert str(iceberg(only.storage.url()).schema().find_field("n").field_type) == "long"
    assert rows(iceberg_arrow(only.storage.url()), ["n", "day"]) == [(1, 0), (2**40, 1)]
    text = pa.schema([("n", pa.string()), ("day", pa.int64())])
    message = _refused(only, text, [{"n": "x", "day": 0}])
    assert "'n'" in message and "Iceberg" in message


def test_other_partition_columns_are_refused(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta,iceberg")
    _write(table, V1, [{"id": 1, "day": 0, "v": "a"}])
    assert "partitioned by []" in _refused(table, V1, [{"id": 2, "day": 0, "v": "b"}], ())
    assert "['v']" in _refused(table, V1, [{"id": 2, "day": 0, "v": "b"}], ("v",))


@pytest.mark.parametrize("formats", ["delta", "iceberg"])
def test_a_type_the_format_has_none_for_is_refused_on_the_first_write(
        local_where: Any, formats: str) -> None:
    table = open_table(local_where, markerstore__table__formats=formats)
    schema = pa.schema([("id", pa.int64()), ("wait", pa.duration("us")), ("day", pa.int64())])
    message = _refused(table, schema, [{"id": 1, "wait": 5, "day": 0}])
    assert "'wait'" in message and "duration" in message
    assert not any(f.startswith(("_delta_log", "metadata")) for f in _files(table))
