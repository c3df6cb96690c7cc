"""What a table holds, read back as a reader reads it, for the invariant checks
(DESIGN.md invariants 6 and 8: rows in = rows written + error rows, one row or one error
record per source record).

The counts come from the committed files themselves: the data rows of the snapshot's
files (the timeline names them; pyarrow reads them) and the error rows of the committed
error files (errortable's `errors` view: DuckDB over the committed error instants' files,
``strict`` so an unreadable file fails the check instead of being skipped). Never from
what the writers say they wrote (task stats, ``CommitResult``, commit metadata): a writer
that drops a record and counts it anyway must fail these checks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

import errortable
from markerstore import Table
from markerstore.errors import NotAnErrorTableError


@dataclass(frozen=True)
class Committed:
    """Rows of the committed data files and error rows (by reason) of the committed error
    files, of one instant or of the whole table."""

    rows: int
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def error_rows(self) -> int:
        return sum(self.errors.values())

    @property
    def records(self) -> int:
        """Source records accounted for: one row or one error record each."""
        return self.rows + self.error_rows


def _table(table: Table | str, storage_options: Mapping[str, Any] | None) -> Table:
    return table if isinstance(table, Table) else Table(table, storage_options)


def data_rows(table: Table | str, storage_options: Mapping[str, Any] | None = None,
              instant: str | None = None) -> pa.Table:
    """The rows of the committed data files (of `instant`'s commit, if given), read with
    pyarrow from the files the snapshot names."""
    table = _table(table, storage_options)
    snapshot = table.snapshot()
    storage = snapshot.storage
    paths = [storage.path(f.path) for f in snapshot.files
             if instant is None or f.instant == instant]
    if not paths:
        return pa.table({})
    dataset = ds.dataset(paths, filesystem=storage.fs, format="parquet",
                         partitioning="hive", partition_base_dir=storage.root)
    return dataset.to_table()


def error_rows(table: Table | str, storage_options: Mapping[str, Any] | None = None,
               instant: str | None = None, columns: str = "*") -> pa.Table:
    """The committed error rows of the table's error tables (of the write at `instant`, if
    given), as errortable's `errors` view reads them; no error table: no rows."""
    table = _table(table, storage_options)
    try:
        con = errortable.connect(table, strict=True)
    except NotAnErrorTableError:
        return pa.table({"reason": pa.array([], pa.string())})
    where = "" if instant is None else " WHERE source_instant = ?"
    params = [] if instant is None else [instant]
    return con.sql(f"SELECT {columns} FROM errors{where}", params=params).to_arrow_table()


def committed(table: Table | str, storage_options: Mapping[str, Any] | None = None,
              instant: str | None = None) -> Committed:
    """Rows and error rows by reason, counted in the committed files."""
    table = _table(table, storage_options)
    reasons = error_rows(table, instant=instant, columns="reason").column("reason")
    errors: dict[str, int] = {}
    for reason in reasons.to_pylist():
        errors[reason or "unknown"] = errors.get(reason or "unknown", 0) + 1
    return Committed(data_rows(table, instant=instant).num_rows, errors)


def assert_records(table: Table | str, source_records: int, *,
                   storage_options: Mapping[str, Any] | None = None,
                   instant: str | None = None, rows: int | None = None,
                   errors: Mapping[str, int] | None = None) -> Committed:
    """Every source record is one committed row or one committed error record:
    `source_records` (counted from the source by the caller, never by the writers) equals
    the rows plus the error rows read back; `rows` and `errors` (by reason), when given,
    are what the read-back must find."""
    found = committed(table, storage_options, instant)
    assert found.records == source_records, (
        f"{source_records} source records, but the committed files hold {found.rows} rows "
        f"and {found.error_rows} error rows {found.errors}")
    if rows is not None:
        assert found.rows == rows, f"{found.rows} rows committed, expected {rows}"
    if errors is not None:
        assert found.errors == {k: v for k, v in errors.items() if v}, (
            f"committed error rows by reason {found.errors}, expected {dict(errors)}")
    return found
