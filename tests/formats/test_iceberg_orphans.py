"""Nothing for Iceberg's orphan cleanup to find: after appends, a replace and writers racing,
every file in the table folder is a data file a retained snapshot references, a metadata
file the table's metadata references, or markerstore's own (``.markerstore/``)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from markerstore.errors import IcebergPublishError
from markerstore.formats.base import OVERWRITE
from markerstore.formats.iceberg import METADATA_FOLDER, IcebergPublisher
from tests.formats.iceberg_support import Lake, scanned
from tests.formats.test_iceberg import D1, D2, PARTITION_BY, SCHEMA, _race, rows

ROOT = Path(__file__).resolve().parents[2]


def metadata_files(publisher: IcebergPublisher) -> set[str]:
    """Table-relative paths of every metadata file the table's metadata references."""
    table = publisher.table()
    assert table is not None
    metadata = table.metadata
    paths = {table.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    for snapshot in metadata.snapshots:
        paths.add(snapshot.manifest_list)
        paths.update(m.manifest_path for m in snapshot.manifests(table.io))
    prefix = publisher.location + "/"
    return {p[len(prefix):] for p in paths}


def listing(lake: Lake) -> set[str]:
    """Every file under the table folder, table-relative, but markerstore's own (and the
    empty folder object S3 clients put for a folder)."""
    root = lake.root()
    found = {path[len(root) + 1:] for path in lake.fs.find(root)}
    return {p for p in found if not p.startswith(".markerstore/") and not p.endswith("/")}


def history_with_a_race(lake: Lake, catalog: dict[str, str]) -> IcebergPublisher:
    publisher = IcebergPublisher(lake.url, lake.storage_options, catalog)
    first = lake.commit(rows(range(0, 3), D1, "eu") + rows(range(3, 5), D2, "us"))
    second = lake.commit(rows(range(5, 7), D2, "eu"))
    for racing in (first, second):          # the first race creates the table too
        _race(lambda i, c=racing: IcebergPublisher(lake.url, lake.storage_options, catalog
                                                   ).publish(c), 3)
    publisher.publish(lake.replace(rows(range(7, 9), D1, "eu"),
                                   removed=[f.path for f in first.added
                                            if f.partition["day"] == D1.isoformat()]))
    return publisher


def check_no_orphans(lake: Lake, publisher: IcebergPublisher) -> None:
    files = listing(lake)
    metadata = {p for p in files if p.startswith(METADATA_FOLDER + "/")}
    assert metadata == metadata_files(publisher)
    assert files - metadata == publisher.referenced_paths() == set(lake.rows)


def test_a_local_table_holds_no_orphan(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "table"), {}, SCHEMA, PARTITION_BY)
    publisher = history_with_a_race(lake, {})
    assert len(publisher.published_instants()) == 3
    check_no_orphans(lake, publisher)


@pytest.mark.s3
def test_a_table_on_s3_holds_no_orphan(moto_s3: Any, tmp_path: Path) -> None:
    bucket = moto_s3.create_bucket(f"iceberg-{uuid.uuid4().hex[:12]}")
    lake = Lake(f"s3://{bucket}/table", moto_s3.storage_options(), SCHEMA, PARTITION_BY)
    catalog = {"uri": f"sqlite:///{tmp_path}/catalog.db"}
    check_no_orphans(lake, history_with_a_race(lake, catalog))


def test_a_commit_that_cannot_be_published_writes_no_metadata(tmp_path: Path) -> None:
    """A commit that cannot be published (here: it replaces a file Iceberg never held)
    leaves nothing behind in metadata/."""
    lake = Lake(str(tmp_path / "table"), {}, pa.schema([("v", pa.int64()),
                                                        ("n", pa.int64())]), ("n",))
    publisher = IcebergPublisher(lake.url)
    publisher.publish(lake.commit([{"v": 1, "n": 1}]))
    before = listing(lake)
    bad = lake.commit([{"v": 2, "n": 2}])
    wrong = replace(bad, mode=OVERWRITE, removed=("n=9/none.parquet",))
    with pytest.raises(IcebergPublishError, match="drifted"):
        publisher.publish(wrong)
    assert listing(lake) - before == {f.path for f in bad.added}


def test_no_orphan_after_a_long_history_and_an_expiry(tmp_path: Path) -> None:
    """Metadata files beyond the kept history (here 3) are deleted by the commit that
    drops them, and an expiry deletes the manifests only expired snapshots held."""
    lake = Lake(str(tmp_path / "table"), {}, SCHEMA, PARTITION_BY)
    publisher = history_with_a_race(lake, {})
    table = publisher.table()
    assert table is not None
    with table.transaction() as tx:
        tx.set_properties({"write.metadata.previous-versions-max": "3"})
    commits = [lake.commit(rows(range(100 + i, 101 + i), D2, "us")) for i in range(6)]
    for commit in commits:
        publisher.publish(commit)
    check_no_orphans(lake, publisher)
    released = publisher.expire_before(commits[-1].instant)
    for path in released:
        lake.fs.rm(f"{lake.root()}/{path}")
        del lake.rows[path]
    assert released and len(publisher.published_instants()) == 1
    check_no_orphans(lake, publisher)


def test_a_publish_killed_mid_commit_is_published_once_by_the_next(tmp_path: Path) -> None:
    """The process dies after the catalog wrote the new metadata, before it took it: the
    Iceberg table still shows the instants before, and the next publish of the instant
    makes it one snapshot. What the dead commit wrote stays in metadata/ only."""
    lake = Lake(str(tmp_path / "table"), {}, SCHEMA, PARTITION_BY)
    publisher = IcebergPublisher(lake.url)
    first = lake.commit(rows(range(0, 2), D1, "eu"))
    publisher.publish(first)
    second = lake.commit(rows(range(2, 4), D2, "us"))
    arguments = tmp_path / "commit.pickle"
    arguments.write_bytes(pickle.dumps((lake.url, {}, {}, second)))
    child = subprocess.run([sys.executable, "-m", "tests.formats.iceberg_crash",
                            str(arguments)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.returncode == 9, child.stderr
    assert publisher.published_instants() == {first.instant}
    publisher.publish(second)
    assert publisher.published_instants() == {first.instant, second.instant}
    table = publisher.table()
    assert table is not None and len(table.snapshots()) == 2
    assert scanned(table) == lake.expected(lake.rows)
    files = listing(lake)
    left = {p for p in files if p.startswith(METADATA_FOLDER + "/")} - metadata_files(publisher)
    assert left and all(p.startswith(METADATA_FOLDER + "/") for p in left)
    assert files - left - metadata_files(publisher) == publisher.referenced_paths()
