"""Iceberg publishing through markerstore's own commits: appends and an overwrite, on local
disk and S3 (moto, with the catalog in a local SQLite file), read back by pyiceberg's scan
row for row equal to markerstore's snapshot, alone and beside Delta; a writer killed
between its completed instant and the publish, then the next write; drift as a verify
finding, Iceberg's metadata/ no orphan; the error table publishes to Iceberg too."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import errortable
from markerstore import Table
from markerstore.commit.verify import verify
from markerstore.formats import drift
from tests.formats.test_delta_error_table import _write as write_with_errors
from tests.support.commit_checks import commit_all, data_files, open_table, split
from tests.support.crash_writer import crash_write
from tests.support.formats import (
    assert_delta_matches,
    assert_iceberg_matches,
    iceberg_publisher,
    iceberg_table,
)

pytest.importorskip("pyiceberg")
pytest.importorskip("deltalake")

FORMAT_FOLDERS = ("_delta_log/", "metadata/")


def _open(where: Any, tmp_path: Path, formats: str, **options: Any) -> Table:
    """A table publishing `formats`; on S3 its Iceberg catalog is a local SQLite file."""
    if where.kind == "s3":
        options["markerstore__table__iceberg__catalog__uri"] = \
            f"sqlite:///{tmp_path}/catalog.db"
    return open_table(where, markerstore__table__formats=formats, **options)


def _assert_formats_match(table: Table) -> None:
    assert_iceberg_matches(table)
    if "delta" in table.formats():
        assert_delta_matches(table)
    assert drift(table) == []
    # Nothing but the snapshot's files beside the formats' own folders.
    # (S3 also lists the folder marker object pyarrow's filesystem writes for metadata/)
    assert [p for p in data_files(table) if not p.startswith(FORMAT_FOLDERS)
            and p != "metadata"] == sorted(
        table.snapshot().paths)


@pytest.mark.parametrize("formats", ["iceberg", "delta,iceberg"])
def test_appends_and_an_overwrite_are_iceberg_snapshots(where: Any, tmp_path: Path,
                                                        formats: str) -> None:
    table = _open(where, tmp_path, formats)
    commit_all(table, split(300, 2), partition_by=["day"], conflict_mode="append")
    commit_all(table, split(90, 1, start=5000), partition_by=["day"],
               conflict_mode="append")
    assert len(iceberg_table(table).snapshots()) == len(table.completed()) == 2
    _assert_formats_match(table)
    old = sorted(table.snapshot().paths)
    commit_all(table, split(60, 1, start=9000, days=1), partition_by=["day"],
               conflict_mode="replace")
    _assert_formats_match(table)
    assert iceberg_table(table).scan().to_arrow().num_rows == 300 - 100 + 90 - 30 + 60
    # The files the overwrite replaced are gone: no retained snapshot references them.
    replaced = [p for p in old if p.startswith("day=0/")]
    assert replaced and not any(table.storage.exists(table.storage.path(p))
                                for p in replaced)


@pytest.mark.parametrize("mode", ["append", "replace"])
def test_a_writer_killed_before_publishing_is_published_by_the_next(
        where: Any, tmp_path: Path, mode: str) -> None:
    table = _open(where, tmp_path, "delta,iceberg")
    commit_all(table, split(600, 2), partition_by=["day"], conflict_mode="append")
    crashed = crash_write(table, "after_complete", partition_by=["day"], mode=mode)
    assert table.state(crashed["instant"]) == "completed"
    assert sorted(f["format"] for f in drift(table)) == ["delta", "iceberg"]
    if mode == "replace":  # the replaced files wait for the publish: Iceberg reads them
        assert iceberg_table(table).scan().to_arrow().num_rows == 600
    commit_all(table, split(30, 1, start=50_000), partition_by=["day"],
               conflict_mode="append")
    _assert_formats_match(table)  # every commit once, in the instants' order
    if mode == "append":
        assert len(iceberg_table(table).snapshots()) == len(table.completed()) == 3


def test_drift_is_a_verify_finding_and_metadata_no_orphan(where: Any, tmp_path: Path
                                                           ) -> None:
    table = _open(where, tmp_path, "delta,iceberg")
    commit_all(table, split(100, 1), partition_by=["day"], conflict_mode="append")
    core = table.start_commit()
    table.commit(core, [])  # the core's commit: nothing publishes it yet
    report = verify(table, grace="0")
    assert sorted((f.kind, f.path, f.instant, f.action) for f in report.findings) == [
        ("format_missing_instant", name, core, "would publish")
        for name in ("delta", "iceberg")]
    assert table.storage.fs.ls(table.storage.path("metadata"))  # Iceberg's own files
    repaired = verify(table, repair=True, grace="0")
    assert [f.action for f in repaired.findings] == ["published", "published"]
    assert verify(table, grace="0").findings == []
    _assert_formats_match(table)


def test_the_error_table_is_an_iceberg_table_too(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="iceberg",
                       markerstore__table__iceberg__identifier="lake.events",
                       markerstore__write__error__table__enabled="true")
    write_with_errors(table, 0)
    write_with_errors(table, 1000)
    errors = Table(table.storage.url() + "_errors", table.storage.storage_options,
                   {"markerstore.table.iceberg.identifier": "lake.table_errors"})
    assert errors.formats() == ("iceberg",)
    assert str(iceberg_table(table).name()) == str(("lake", "events"))
    assert_iceberg_matches(table)
    assert_iceberg_matches(errors)
    view = errortable.query(table.storage.url(), "SELECT count(*) FROM errors",
                            table.storage.storage_options).fetchall()[0][0]
    assert iceberg_table(errors).scan().to_arrow().num_rows == view == 40
    later = datetime.now(timezone.utc) + timedelta(days=2)
    result = errortable.expire(errors, "1d", now=later)
    assert len(result.expired) == 2 and result.files_deleted
    completed = [i for i, _ in errors.completed()]
    assert iceberg_publisher(errors).held_among(completed) == set(completed)
    assert iceberg_table(errors).scan().to_arrow().num_rows == 0
    assert [p for p in data_files(errors) if p.endswith(".parquet")
            and not p.startswith("metadata/")] == []


@pytest.mark.s3
def test_a_table_on_s3_without_a_catalog_fails_before_writing(moto_apart: Any) -> None:
    from markerstore.errors import ConfigError
    from tests.support.locations import Location

    bucket = moto_apart.create_bucket("fmt-no-catalog")
    table = open_table(Location("s3", f"s3://{bucket}/table", moto_apart.storage_options()),
                       markerstore__table__formats="iceberg")
    with pytest.raises(ConfigError, match="markerstore.table.iceberg.catalog.uri"):
        commit_all(table, split(10, 1), partition_by=["day"], conflict_mode="append")
    assert table.timeline() == [] and data_files(table) == []
