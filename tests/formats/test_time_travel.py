"""Replace and time travel, as Delta and Iceberg define them: a replace removes files from
the latest version, and the older versions keep reading them until the retention has
passed (Delta: ``remove`` actions, and VACUUM deletes a removed file only once it is older
than ``delta.deletedFileRetentionDuration``, 7 days by default; Iceberg: a snapshot reads
its files until it is expired). Read back with delta-rs (``DeltaTable(..., version=)``)
and pyiceberg (``scan(snapshot_id=)``), never with markerstore.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from markerstore import Table
from markerstore.commit.retention import RETAINED_DIR, expire, retain
from markerstore.commit.verify import verify
from tests.support.commit_checks import commit_all, data_files, split
from tests.support.formats import (
    BOTH,
    assert_delta_matches,
    assert_iceberg_matches,
    delta_table,
    iceberg_table,
)

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

RETENTION = "markerstore.table.replaced_files.retention"
DAY = 86400.0


def _ids(rows: Any) -> list[int]:
    return sorted(rows.column("id").to_pylist())


def _replaced_once(url: str, **options: str) -> tuple[Table, list[int], list[str]]:
    """A table of both formats: an append of ids 0..59 (3 days), then a replace of day 0
    with ids 1000..1009. Returns it, the first append's ids and the replaced files."""
    table = Table(url, None, {**BOTH, **options})
    commit_all(table, split(60, 2), partition_by=["day"], conflict_mode="append")
    result = commit_all(table, split(10, 1, start=1000, days=1), partition_by=["day"],
                        conflict_mode="replace")
    assert result.replaced_files
    return table, list(range(60)), list(result.replaced_files)


def test_older_versions_and_snapshots_read_the_replaced_files(tmp_path: Path) -> None:
    table, before, replaced = _replaced_once(str(tmp_path / "t"))
    first = table.completed()[0][0]
    # the replaced files stay (7 days, as Delta's default), so each format's older
    # version still reads exactly what it held
    assert all((tmp_path / "t" / p).exists() for p in replaced)
    uri = str(tmp_path / "t")
    from deltalake import DeltaTable

    assert _ids(DeltaTable(uri, version=0).to_pyarrow_table()) == before
    iceberg = iceberg_table(table)
    old = min(iceberg.snapshots(), key=lambda s: s.sequence_number)
    assert _ids(iceberg.scan(snapshot_id=old.snapshot_id).to_arrow()) == before
    assert _ids(table.snapshot(as_of=first).dataset().to_table()) == before
    # the latest versions read the replace
    assert_delta_matches(table)
    assert_iceberg_matches(table)
    # Delta's own VACUUM, with its default retention, finds nothing to delete either
    assert delta_table(table).vacuum(dry_run=True) == []
    # and verify counts the retained files as consistent
    assert verify(table).findings == []


def test_past_the_retention_a_write_deletes_them(tmp_path: Path) -> None:
    table, _, replaced = _replaced_once(str(tmp_path / "t"), **{RETENTION: "1s"})
    assert all((tmp_path / "t" / p).exists() for p in replaced)
    time.sleep(1.1)
    commit_all(table, split(5, 1, start=5000), partition_by=["day"], conflict_mode="append")
    assert not any((tmp_path / "t" / p).exists() for p in replaced)
    assert not table.storage.ls(table.storage.path(RETAINED_DIR))
    # Iceberg's snapshots from before the replace were expired first; the latest versions
    # read on, and nothing else is on storage than the snapshot's files
    assert len(iceberg_table(table).snapshots()) == 2
    assert_delta_matches(table)
    assert_iceberg_matches(table)
    assert sorted(p for p in data_files(table) if not p.startswith(("_delta_log/", "metadata/"))
                  ) == sorted(table.snapshot().paths)


def test_a_retention_of_zero_deletes_them_at_once(tmp_path: Path) -> None:
    table, _, replaced = _replaced_once(str(tmp_path / "t"), **{RETENTION: "0"})
    assert not any((tmp_path / "t" / p).exists() for p in replaced)
    assert len(iceberg_table(table).snapshots()) == 1
    assert_delta_matches(table)
    assert_iceberg_matches(table)


def test_expire_deletes_what_the_retention_no_longer_keeps(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from markerstore.cli.main import cli

    table, _, replaced = _replaced_once(str(tmp_path / "t"))
    runner = CliRunner()
    kept = runner.invoke(cli, ["expire", str(tmp_path / "t"), "--json"])
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.output)["deleted"] == []
    assert all((tmp_path / "t" / p).exists() for p in replaced)
    dry = runner.invoke(cli, ["expire", str(tmp_path / "t"), "--retention", "0", "--dry-run",
                              "--json"])
    assert sorted(json.loads(dry.output)["deleted"]) == sorted(replaced)
    assert all((tmp_path / "t" / p).exists() for p in replaced)
    done = runner.invoke(cli, ["expire", str(tmp_path / "t"), "--retention", "0"])
    assert done.exit_code == 0 and f"{len(replaced)} file(s) deleted" in done.output
    assert not any((tmp_path / "t" / p).exists() for p in replaced)
    assert len(iceberg_table(table).snapshots()) == 1
    assert_delta_matches(table)
    assert_iceberg_matches(table)
    bad = runner.invoke(cli, ["expire", str(tmp_path / "t"), "--retention", "soon"])
    assert bad.exit_code == 2 and "--retention" in bad.output


def test_verify_finds_and_repair_deletes_only_what_is_past_the_retention(tmp_path: Path
                                                                         ) -> None:
    url = str(tmp_path / "t")
    table, _, replaced = _replaced_once(url)
    assert verify(table).findings == []
    past = Table(url, None, {RETENTION: "0"})    # a verify whose retention has passed
    found = verify(past).findings
    assert sorted((f.kind, f.path) for f in found) == sorted(
        ("replaced_file", p) for p in replaced)
    assert {f.action for f in found} == {"would delete"}
    verify(past, repair=True)
    assert not any((tmp_path / "t" / p).exists() for p in replaced)
    assert verify(past).findings == []
    assert_delta_matches(past)
    assert_iceberg_matches(past)


def test_nothing_is_deleted_that_a_format_lacks(tmp_path: Path, monkeypatch: Any) -> None:
    """A replace that Delta does not hold yet (its publish failed): Delta's latest version
    still references the replaced files, so an expire keeps them whatever the retention."""
    from markerstore.formats.delta import DeltaPublisher

    table = Table(str(tmp_path / "t"), None, {**BOTH, RETENTION: "0"})
    commit_all(table, split(60, 2), partition_by=["day"], conflict_mode="append")
    real = DeltaPublisher.publish
    monkeypatch.setattr(DeltaPublisher, "publish", lambda self, commit: (_ for _ in ()).throw(
        OSError("the Delta log cannot be reached")))
    result = commit_all(table, split(10, 1, start=1000, days=1), partition_by=["day"],
                        conflict_mode="replace")
    retain(table, result.instant)   # as a cleanup that got further would have recorded it
    report = expire(table, retention="0", now=time.time() + DAY)
    assert report.deleted == [] and report.unpublished == [result.instant]
    assert all((tmp_path / "t" / p).exists() for p in result.replaced_files)
    assert _ids(delta_table(table).to_pyarrow_table()) == list(range(60))
    monkeypatch.setattr(DeltaPublisher, "publish", real)
    commit_all(table, split(5, 1, start=5000), partition_by=["day"], conflict_mode="append")
    assert not any((tmp_path / "t" / p).exists() for p in result.replaced_files)
    assert_delta_matches(table)


def test_a_delta_table_keeps_tombstones_for_the_retention(tmp_path: Path) -> None:
    """Delta's ``delta.deletedFileRetentionDuration`` of a table markerstore creates is
    the table's retention: with 0, a checkpoint holds no tombstone of a removed file (its
    file is gone); with 7d, each one, as Delta's own writers keep them."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    removes = {}
    for retention, seconds in (("0", 0), ("7d", 7 * 86400)):
        uri = str(tmp_path / retention)
        table = Table(uri, None, {"markerstore.table.formats": "delta", RETENTION: retention})
        commit_all(table, split(30, 1), partition_by=["day"], conflict_mode="append")
        for n in range(10):  # replaces of day 0: version 10 is a checkpoint
            commit_all(table, split(3, 1, start=100 * n, days=1), partition_by=["day"],
                       conflict_mode="replace")
        delta = DeltaTable(uri)
        assert delta.metadata().configuration[
            "delta.deletedFileRetentionDuration"] == f"interval {seconds} seconds"
        checkpoint = tmp_path / retention / "_delta_log" / f"{10:020d}.checkpoint.parquet"
        column = pq.read_table(checkpoint, columns=["remove"]).column("remove")
        removes[retention] = len(column.drop_null())
        assert _ids(delta.to_pyarrow_table()) == _ids(table.snapshot().dataset().to_table())
    assert removes == {"0": 0, "7d": 10}


def test_appends_snapshots_past_the_retention_are_expired_in_batches(tmp_path: Path) -> None:
    """With a retention of 0, a write expires Iceberg's superseded snapshots once 16 are
    due (appends replace nothing, yet each snapshot stays in the metadata every commit
    reads and writes); with 7d every one stays for time travel. Every row reads the same."""
    from markerstore.formats.iceberg import EXPIRE_BATCH

    counts = {}
    for retention in ("0", "7d"):
        uri = str(tmp_path / retention)
        table = Table(uri, None, {"markerstore.table.formats": "iceberg",
                                  RETENTION: retention})
        for n in range(EXPIRE_BATCH + 4):
            commit_all(table, split(2, 1, start=10 * n), partition_by=["day"],
                       conflict_mode="append")
        iceberg = iceberg_table(table)
        counts[retention] = len(iceberg.snapshots())
        assert _ids(iceberg.scan().to_arrow()) == _ids(table.snapshot().dataset().to_table())
        assert [f.kind for f in verify(table).findings] == []
    assert counts["7d"] == EXPIRE_BATCH + 4
    assert counts["0"] < EXPIRE_BATCH + 1
