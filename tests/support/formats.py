"""Reading a table back through the formats' own readers (delta-rs), not markerstore's,
and comparing row for row with markerstore's snapshot."""

from __future__ import annotations

from pathlib import Path
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


ICEBERG = {"markerstore.table.formats": "iceberg"}
BOTH = {"markerstore.table.formats": "delta,iceberg"}


def iceberg_publisher(table: Table) -> Any:
    from markerstore.formats.publish import open_publisher

    return open_publisher("iceberg", table)


def iceberg_table(table: Table) -> Any:
    """The Iceberg table of `table`, loaded from its catalog by pyiceberg."""
    found = iceberg_publisher(table).table()
    assert found is not None, f"{table} has no Iceberg table"
    return found


def assert_iceberg_matches(table: Table) -> None:
    """pyiceberg's scan sees exactly markerstore's snapshot (row for row), every completed
    commit is held, and the retained snapshots are one per commit since the snapshots were
    last expired (a replace expires those before it), in the instants' order."""
    publisher = iceberg_publisher(table)
    iceberg = iceberg_table(table)
    columns, expected = snapshot_rows(table)
    got = iceberg.scan().to_arrow()
    assert sorted(got.column_names) == columns
    assert _sorted_rows(got, columns) == expected
    completed = [i for i, _ in table.completed()]
    assert publisher.held_among(completed) == set(completed)
    since = publisher.expired_before() or ""
    snapshots = sorted(iceberg.snapshots(), key=lambda s: s.sequence_number)
    assert [s.summary.get("markerstore.instant") for s in snapshots] == [
        i for i in completed if i >= since]


def ingest_sample(spark: Any, folder: Path, options: dict[str, str]) -> tuple[Any, str]:
    """The demo's sample (3,000 rows in 2 files, some bad) ingested into a table of
    `folder` with `options` (its formats): (what the sample holds, the table's URL)."""
    from markerstore.cli import sample
    from markerstore.ingest.pipeline import ingest

    info = sample.generate(str(folder / "src"), rows=3000, files=2)
    url = str(folder / "events")
    ingest(str(folder / "src"), url, schema=sample.SCHEMA_DDL, checks=sample.CHECKS,
           key=sample.KEY, partition_by=sample.PARTITION_BY, spark=spark, markers="direct",
           progress=False, options=options)
    return info, url
