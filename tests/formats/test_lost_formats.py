"""A format's own state lost, or the table moved: ``_delta_log/`` deleted, Iceberg's
``metadata/`` deleted, its catalog (``catalog.db``) deleted, the table folder moved (Delta's
log holds paths relative to the table, Iceberg's metadata absolute ones). ``verify`` names
what is lost (never the formats' own files as orphans), and ``verify --repair`` rebuilds
the format from the timeline: one version/snapshot of the files as of the latest instant,
then the later instants, or registers Iceberg's metadata again. Read back with delta-rs and
pyiceberg, never with markerstore.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from markerstore import Table
from markerstore.commit.verify import verify
from markerstore.formats import drift
from tests.support.commit_checks import NO_RETENTION, commit_all, split
from tests.support.formats import BOTH, delta_table, iceberg_table, snapshot_rows

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")


def _history(url: str) -> Table:
    """An append, then a replace whose replaced files are deleted at once (a retention of
    0): the first instant's files are gone, so no format can be rebuilt by publishing
    every instant again (the first file of a replaced instant cannot be read)."""
    table = Table(url, None, {**BOTH, **NO_RETENTION})
    commit_all(table, split(60, 2), partition_by=["day"], conflict_mode="append")
    commit_all(table, split(30, 1, start=1000), partition_by=["day"], conflict_mode="replace")
    return table


def _read_the_snapshot(table: Table) -> None:
    columns, expected = snapshot_rows(table)
    for data in (delta_table(table).to_pyarrow_table(), iceberg_table(table).scan().to_arrow()):
        got = pa.table(data).to_pylist()
        assert sorted(tuple(r[c] for c in columns) for r in got) == sorted(expected)
    assert drift(table) == []


def _only(table: Table, kind: str, path: str, words: str) -> None:
    """verify finds exactly one thing: what is lost, named (no orphan, no instant)."""
    report = verify(table, grace="0")
    assert [(f.kind, f.path) for f in report.findings] == [(kind, path)], report.findings
    assert words in report.findings[0].action and not report.consistent


def _repaired_then_written(table: Table) -> None:
    repaired = verify(table, repair=True, grace="0")
    assert [f.kind for f in repaired.findings][:1] and verify(table).findings == []
    _read_the_snapshot(table)
    commit_all(table, split(6, 1, start=3000), partition_by=["day"], conflict_mode="append")
    _read_the_snapshot(table)
    assert verify(table).findings == []


def test_a_deleted_delta_log_is_rebuilt_from_the_timeline(tmp_path: Path) -> None:
    table = _history(str(tmp_path / "t"))
    shutil.rmtree(tmp_path / "t" / "_delta_log")
    _only(table, "format_lost", "_delta_log/", "would rebuild it from the timeline")
    latest = table.completed()[-1][0]
    _repaired_then_written(table)
    history = sorted(delta_table(table).history(), key=lambda h: h["version"])
    assert [h.get("markerstore.restored") for h in history] == [latest, None]


def test_deleted_iceberg_metadata_is_rebuilt_from_the_timeline(tmp_path: Path) -> None:
    table = _history(str(tmp_path / "t"))
    shutil.rmtree(tmp_path / "t" / "metadata")
    _only(table, "format_lost", "metadata/", "names metadata that is gone")
    _repaired_then_written(table)
    assert len(iceberg_table(table).snapshots()) == 2  # the rebuilt one, the next write's


def test_a_deleted_iceberg_catalog_is_registered_again(tmp_path: Path) -> None:
    table = _history(str(tmp_path / "t"))
    snapshots = len(iceberg_table(table).snapshots())
    catalog = tmp_path / "t" / ".markerstore" / "iceberg" / "catalog.db"
    catalog.unlink()
    report = verify(table, grace="0")
    assert [f.kind for f in report.findings] == ["format_catalog_lost"]
    assert not catalog.exists()  # verify changes nothing
    assert report.findings[0].path.startswith("metadata/")
    assert report.findings[0].path.endswith(".metadata.json")
    _repaired_then_written(table)
    assert len(iceberg_table(table).snapshots()) == snapshots + 1  # its history kept


@pytest.mark.parametrize("renamed", [False, True])
def test_a_moved_table_is_registered_again_where_it_is(tmp_path: Path, renamed: bool) -> None:
    _history(str(tmp_path / "old" / "t"))
    new = tmp_path / "new" / ("u" if renamed else "t")   # renamed: another identifier too
    new.parent.mkdir()
    shutil.move(tmp_path / "old" / "t", new)
    table = Table(str(new))
    assert table.formats() == ("delta", "iceberg")
    _only(table, "format_moved", "metadata/", "the table folder moved")
    _repaired_then_written(table)
    assert iceberg_table(table).location() == f"file://{new}"
