"""Another tool commits to a table's Delta log or Iceberg table (delta-rs's
``write_deltalake``, pyiceberg's ``append`` and ``overwrite``): the formats no longer hold
the timeline's files. ``verify`` names the foreign version or snapshot, the next write
refuses to publish over it in one line, and ``verify --repair`` publishes one that holds
the timeline's files again; read back with delta-rs and pyiceberg, never with markerstore.

Delta's VACUUM deletes a file a ``remove`` action tombstoned once the tombstone is older
than the retention (PROTOCOL.md; 7 days by default): after another tool's overwrite, the
timeline's files are tombstoned, and only a version that adds them again keeps VACUUM
from ever deleting them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from markerstore import ForeignCommitError, Table
from markerstore.commit.verify import verify
from tests.support.commit_checks import commit_all, split
from tests.support.formats import (
    BOTH,
    assert_delta_matches,
    assert_iceberg_matches,
    delta_table,
    iceberg_table,
    snapshot_rows,
)

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

FOREIGN = {"id": pa.array([90_000, 90_001], pa.int64()),
           "payload": pa.array(["other", "tool"]), "day": pa.array([0, 1], pa.int64())}


def _table(tmp_path: Path) -> Table:
    table = Table(str(tmp_path / "t"), None, BOTH)
    commit_all(table, split(60, 2), partition_by=["day"], conflict_mode="append")
    commit_all(table, split(10, 1, start=1000, days=1), partition_by=["day"],
               conflict_mode="replace")
    return table


def _refused(table: Table, name: str, what: str) -> None:
    """The next write fails before it starts, in one line naming the foreign commit."""
    before = [i.instant for i in table.timeline()]
    with pytest.raises(ForeignCommitError, match=rf"^{name}: .*{what}.* was not written by "
                                                 r"markerstore[^\n]*verify --repair[^\n]*$"):
        commit_all(table, split(5, 1, start=5000), partition_by=["day"],
                   conflict_mode="append")
    assert [i.instant for i in table.timeline()] == before


def _found(table: Table, kind_path: tuple[str, str], words: str) -> None:
    report = verify(table)
    foreign = [f for f in report.findings if f.kind == "format_foreign_commit"]
    assert [(f.kind, f.path) for f in foreign] == [kind_path]
    assert words in foreign[0].action and not report.consistent


def _repaired(table: Table) -> None:
    """Repair restores the timeline's files; the other tool's files stay, unreferenced
    (reported, never deleted); the next write publishes to both formats."""
    repaired = verify(table, repair=True, grace="0")
    assert "not written by markerstore" in next(
        f.action for f in repaired.findings if f.kind == "format_foreign_commit")
    left = verify(table, grace="0").findings   # Iceberg's older snapshot still has them
    assert {(f.kind, f.action) for f in left} <= {
        ("orphan_file", "kept: not a markerstore file name")}
    commit_all(table, split(5, 1, start=5000), partition_by=["day"], conflict_mode="append")
    _formats_read_the_snapshot(table)


def _formats_read_the_snapshot(table: Table) -> None:
    """delta-rs and pyiceberg read the snapshot, and each format holds every completed
    instant (the other tool's commit and the restore are in their histories too)."""
    from markerstore.formats import drift

    columns, expected = snapshot_rows(table)
    for data in (delta_table(table).to_pyarrow_table(), iceberg_table(table).scan().to_arrow()):
        got = pa.table(data).to_pylist()
        assert sorted(tuple(r[c] for c in columns) for r in got) == sorted(expected)
    assert drift(table) == []


def test_a_foreign_delta_append(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    table = _table(tmp_path)
    version = delta_table(table).version() + 1
    write_deltalake(str(tmp_path / "t"), pa.table(FOREIGN), mode="append",
                    partition_by=["day"])
    assert delta_table(table).to_pyarrow_table().num_rows == 60 - 20 + 10 + 2
    _found(table, ("format_foreign_commit", f"delta version {version}"), "WRITE (Append)")
    _refused(table, "delta", f"version {version}")
    _repaired(table)


def test_a_foreign_delta_overwrite_never_lets_vacuum_delete_the_snapshot(tmp_path: Path
                                                                          ) -> None:
    from deltalake import write_deltalake

    table = _table(tmp_path)
    ours = set(table.snapshot().paths)
    write_deltalake(str(tmp_path / "t"), pa.table(FOREIGN), mode="overwrite",
                    partition_by=["day"])
    # Delta's VACUUM with its own retention keeps the tombstoned files for now ...
    assert ours.isdisjoint(delta_table(table).vacuum(dry_run=True))
    _found(table, ("format_foreign_commit", f"delta version {delta_table(table).version()}"),
           "WRITE (Overwrite)")
    _refused(table, "delta", "Overwrite")
    verify(table, repair=True, grace="0")
    # ... and once the timeline's files are added again, not even a VACUUM without any
    # retention deletes one of them
    vacuum = delta_table(table).vacuum(retention_hours=0, enforce_retention_duration=False,
                                       dry_run=True)
    assert ours.isdisjoint(vacuum) and vacuum
    _formats_read_the_snapshot(table)
    assert_iceberg_matches(table)


@pytest.mark.parametrize("operation", ["append", "overwrite"])
def test_a_foreign_iceberg_commit(tmp_path: Path, operation: str) -> None:
    table = _table(tmp_path)
    iceberg = iceberg_table(table)
    data = pa.Table.from_pydict(FOREIGN).select([f.name for f in iceberg.schema().fields])
    getattr(iceberg, operation)(data.cast(iceberg.schema().as_arrow()))
    snapshot = iceberg_table(table).current_snapshot()
    assert snapshot is not None
    _found(table, ("format_foreign_commit", f"iceberg snapshot {snapshot.snapshot_id}"),
           "(append)" if operation == "append" else "(delete)")  # pyiceberg: delete + append
    _refused(table, "iceberg", f"snapshot {snapshot.snapshot_id}")
    _repaired(table)
    assert_delta_matches(table)


@pytest.mark.parametrize("where", [pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
def test_a_foreign_delta_append_on_s3(where: Any) -> None:
    """The same on S3 (moto over HTTP): the log read through the table's storage, the
    restore version published with S3's conditional writes."""
    from deltalake import write_deltalake

    from markerstore.formats.delta import delta_storage_options, delta_uri
    from tests.support.commit_checks import open_table
    from tests.support.formats import DELTA

    table = open_table(where, **{k.replace(".", "__"): v for k, v in DELTA.items()})
    commit_all(table, split(40, 2), partition_by=["day"], conflict_mode="append")
    write_deltalake(delta_uri(table), pa.table(FOREIGN), mode="append", partition_by=["day"],
                    storage_options=delta_storage_options(table))
    version = delta_table(table).version()
    _found(table, ("format_foreign_commit", f"delta version {version}"), "WRITE (Append)")
    _refused(table, "delta", f"version {version}")
    verify(table, repair=True, grace="0")
    commit_all(table, split(5, 1, start=5000), partition_by=["day"], conflict_mode="append")
    columns, expected = snapshot_rows(table)
    got = pa.table(delta_table(table).to_pyarrow_table()).to_pylist()
    assert sorted(tuple(r[c] for c in columns) for r in got) == sorted(expected)
