"""Reading a table back through the formats' own readers (delta-rs), not markerstore's,
and comparing row for row with markerstore's snapshot."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from markerstore import Table
from markerstore.formats.delta import delta_storage_options, delta_uri

DELTA = {"markerstore.table.formats": "delta"}


def delta_table(table: Table) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(delta_uri(table), storage_options=delta_storage_options(table))


def _sorted_rows(data: pa.Table, columns: list[str]) -> list[tuple[Any, ...]]:
    rows = data.select(columns).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in rows), key=repr)


def snapshot_rows(table: Table) -> tuple[list[str], list[tuple[Any, ...]]]:
    data = table.snapshot().dataset().to_table()
    columns = sorted(data.column_names)
    return columns, _sorted_rows(data, columns)


def assert_delta_matches(table: Table) -> None:
    """Delta's reader sees exactly markerstore's snapshot (row for row, each column with
    the same values), one version per completed commit, each naming its instant."""
    delta = delta_table(table)
    columns, expected = snapshot_rows(table)
    got = delta.to_pyarrow_table()
    assert sorted(got.column_names) == columns
    assert _sorted_rows(got, columns) == expected
    completed = [i for i, _ in table.completed()]
    assert delta.version() + 1 == len(completed)
    history = sorted(delta.history(), key=lambda h: h["version"])
    assert [h.get("markerstore.instant") for h in history] == completed


def vacuum_candidates(table: Table) -> list[str]:
    """What Delta's own cleanup would delete now, with no retention."""
    return list(delta_table(table).vacuum(retention_hours=0, dry_run=True,
                                          enforce_retention_duration=False))
