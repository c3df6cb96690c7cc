"""Each completed instant becomes one Iceberg snapshot, read back with pyiceberg's own scan
(not with markerstore): appends, a replace, a publish twice, partition values from the
folders (never null), on local disk and on S3 (moto over HTTP, the catalog on local
SQLite)."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from markerstore.errors import ConfigError, IcebergPublishError
from markerstore.formats.base import FormatPublisher
from markerstore.formats.iceberg import (
    CATALOG_PREFIX,
    DEFAULT_CATALOG_FILE,
    IDENTIFIER,
    INSTANT_PROPERTY,
    IcebergPublisher,
    publisher_from_options,
)
from tests.formats.iceberg_support import Lake, scanned

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32()),
                    ("region", pa.string())])
PARTITION_BY = ("day", "region")
D1, D2 = dt.date(2026, 11, 26), dt.date(2026, 11, 27)


def rows(ids: range, day: dt.date | None, region: str | None) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"n{i}", "day": day, "region": region} for i in ids]


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return Lake(str(tmp_path / "table"), {}, SCHEMA, PARTITION_BY)


def s3_lake(moto_s3: Any) -> Lake:
    bucket = moto_s3.create_bucket(f"iceberg-{uuid.uuid4().hex[:12]}")
    return Lake(f"s3://{bucket}/table", moto_s3.storage_options(), SCHEMA, PARTITION_BY)


def history(publisher: IcebergPublisher) -> list[str]:
    """The instant of each snapshot, oldest first."""
    table = publisher.table()
    assert table is not None
    return [str(s.summary and s.summary.get(INSTANT_PROPERTY)) for s in table.snapshots()]


def check_history(lake: Lake, publisher: IcebergPublisher, catalog: dict[str, str]) -> None:
    """Two appends, a replace, and each published twice: one snapshot per instant, and
    pyiceberg scans back exactly the rows of the live files, partition columns typed."""
    first = lake.commit(rows(range(0, 3), D1, "eu") + rows(range(3, 5), D2, "us"))
    second = lake.commit(rows(range(5, 7), D2, "eu"))
    d2_us = [f.path for f in first.added if f.partition["day"] == D2.isoformat()]
    replace = lake.replace(rows(range(7, 9), D2, "us"), removed=d2_us)
    commits = [first, second, replace]
    for commit in commits:
        publisher.publish(commit)
    again = IcebergPublisher(lake.url, lake.storage_options, catalog)
    for commit in commits:
        again.publish(commit)                       # no-op: already published
    assert history(publisher) == [c.instant for c in commits]
    assert publisher.published_instants() == {c.instant for c in commits}
    table = publisher.table()
    assert table is not None
    live = [f.path for c in commits for f in c.added if f.path not in d2_us]
    assert scanned(table) == lake.expected(live)
    operations = [s.summary and s.summary.operation.value for s in table.snapshots()]
    assert operations == ["append", "append", "overwrite"]
    all_paths = {f.path for c in commits for f in c.added}
    assert publisher.referenced_paths() == all_paths     # the replaced file: an old snapshot
    files = table.inspect.files().column("file_path").to_pylist()
    assert sorted(files) == sorted(f"{publisher.location}/{p}" for p in live)


def test_appends_and_a_replace_are_one_snapshot_each(lake: Lake) -> None:
    publisher = IcebergPublisher(lake.url)
    as_format: FormatPublisher = publisher          # mypy checks the protocol
    assert as_format.name == "iceberg"
    assert publisher.published_instants() == set()
    assert publisher.referenced_paths() == set()
    assert not Path(lake.url).exists()              # asking created nothing
    check_history(lake, publisher, {})
    assert (Path(lake.url) / DEFAULT_CATALOG_FILE).is_file()
    created = {p.relative_to(lake.url).parts[0] for p in Path(lake.url).iterdir()}
    assert created == {".markerstore", "metadata", "day=2026-11-26", "day=2026-11-27"}


@pytest.mark.s3
def test_appends_and_a_replace_on_s3(moto_s3: Any, tmp_path: Path) -> None:
    lake = s3_lake(moto_s3)
    catalog = {"uri": f"sqlite:///{tmp_path}/catalog.db"}
    publisher = IcebergPublisher(lake.url, lake.storage_options, catalog)
    check_history(lake, publisher, catalog)
    metadata = lake.fs.ls(f"{lake.root()}/metadata")
    assert any(name.endswith(".metadata.json") for name in metadata)


@pytest.mark.s3
def test_a_table_on_s3_must_name_its_catalog(moto_s3: Any) -> None:
    lake = s3_lake(moto_s3)
    with pytest.raises(ConfigError, match=f"{CATALOG_PREFIX}uri"):
        IcebergPublisher(lake.url, lake.storage_options)


def test_a_table_iceberg_cannot_reach_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot publish a table on memory://"):
        IcebergPublisher("memory://bucket/table")


def test_partition_columns_come_from_the_folders_never_null(lake: Lake) -> None:
    """The files hold no partition column; pyiceberg's scan fills them from the manifest
    entries' partition records, which the commit's folders typed."""
    commit = lake.commit(rows(range(0, 4), D1, "eu") + rows(range(4, 6), D2, "a/b=c d%"))
    publisher = IcebergPublisher(lake.url)
    publisher.publish(commit)
    table = publisher.table()
    assert table is not None
    read = scanned(table)
    assert read == lake.expected(f.path for f in commit.added)
    assert all(r["day"] is not None and r["region"] is not None for r in read)
    assert table.schema().find_field("day").field_type.__class__.__name__ == "DateType"


def test_pyiceberg_add_files_leaves_hive_partition_columns_null(lake: Lake) -> None:
    """Why the publisher builds manifest entries itself: pyiceberg's add_files reads
    identity partitions from the file statistics, and these files have no such column."""
    commit = lake.commit(rows(range(0, 2), D1, "eu"))
    publisher = IcebergPublisher(lake.url)
    publisher.publish(lake.commit(rows(range(2, 3), D2, "us")))
    table = publisher.table()
    assert table is not None
    table.add_files([f"{publisher.location}/{f.path}" for f in commit.added])
    read = table.refresh().scan().to_arrow().to_pylist()
    assert [r["day"] for r in read if r["id"] < 2] == [None, None]
    assert [r["day"] for r in read if r["id"] == 2] == [D2]


def test_null_and_typed_partition_values(tmp_path: Path) -> None:
    schema = pa.schema([("v", pa.int32()), ("n", pa.int64()), ("flag", pa.bool_()),
                        ("at", pa.timestamp("us")), ("s", pa.string())])
    lake = Lake(str(tmp_path / "typed"), {}, schema, ("n", "flag", "at", "s"))
    at = dt.datetime(2026, 11, 27, 3, 4, 5, 250000)
    data: list[dict[str, Any]] = [{"v": 1, "n": -7, "flag": True, "at": at, "s": ""},
            {"v": 2, "n": None, "flag": False, "at": None, "s": "x"}]
    commit = lake.commit(data)
    assert any("__HIVE_DEFAULT_PARTITION__" in f.path for f in commit.added)
    publisher = IcebergPublisher(lake.url)
    publisher.publish(commit)
    table = publisher.table()
    assert table is not None
    expected = [dict(r, s=r["s"] or None) for r in data]    # Hive: '' is the null folder
    assert scanned(table) == sorted(expected, key=lambda r: repr(sorted(r.items())))


def test_a_partition_value_that_does_not_fit_commits_nothing(tmp_path: Path) -> None:
    longs = Lake(str(tmp_path / "bad"), {}, pa.schema([("v", pa.int64()), ("n", pa.int64())]),
                 ("n",))
    publisher = IcebergPublisher(longs.url)
    publisher.publish(longs.commit([{"v": 1, "n": 1}]))
    texts = Lake(longs.url, {}, pa.schema([("v", pa.int64()), ("n", pa.string())]), ("n",))
    bad = replace(texts.commit([{"v": 2, "n": "abc"}]), schema=longs.schema)
    with pytest.raises(IcebergPublishError, match=r"n=abc/.*'n'.*'abc' is not a long"):
        publisher.publish(bad)
    assert history(publisher) != [] and bad.instant not in publisher.published_instants()
    assert len(history(publisher)) == 1


def test_a_replace_of_a_file_iceberg_does_not_hold_is_drift(lake: Lake) -> None:
    publisher = IcebergPublisher(lake.url)
    publisher.publish(lake.commit(rows(range(0, 2), D1, "eu")))
    replace = lake.replace(rows(range(2, 3), D1, "eu"), removed=["day=x/not-published.parquet"])
    with pytest.raises(IcebergPublishError, match="does not hold.*drifted"):
        publisher.publish(replace)
    assert len(history(publisher)) == 1


def test_options_name_the_catalog_and_the_identifier(lake: Lake, tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "cat.db"
    options = {f"{CATALOG_PREFIX}uri": f"sqlite:///{db}", IDENTIFIER: "lake.events"}
    publisher = publisher_from_options(lake.url, {}, options)
    publisher.publish(lake.commit(rows(range(0, 2), D1, "eu")))
    assert db.is_file() and not (Path(lake.url) / DEFAULT_CATALOG_FILE).exists()
    assert publisher.catalog.list_tables("lake") == [("lake", "events")]


def test_another_table_under_the_same_name_is_refused(tmp_path: Path) -> None:
    catalog = {"uri": f"sqlite:///{tmp_path}/shared.db"}
    one = Lake(str(tmp_path / "a" / "events"), {}, SCHEMA, PARTITION_BY)
    two = Lake(str(tmp_path / "b" / "events"), {}, SCHEMA, PARTITION_BY)
    IcebergPublisher(one.url, {}, catalog).publish(one.commit(rows(range(1), D1, "eu")))
    with pytest.raises(IcebergPublishError, match=f"set {IDENTIFIER}"):
        IcebergPublisher(two.url, {}, catalog).publish(two.commit(rows(range(1), D1, "eu")))


def _race(publish: Any, count: int) -> None:
    """`publish(i)` for i in range(count), on `count` threads started together."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            publish(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_writers_racing_publish_each_instant_once(lake: Lake) -> None:
    """Writers racing on the same instant make one snapshot of it (a writer whose catalog
    commit lost reads the instants again instead of appending the files a second time);
    writers racing on different instants all land."""
    first = IcebergPublisher(lake.url)
    first.publish(lake.commit(rows(range(0, 1), D1, "eu")))
    same = lake.commit(rows(range(1, 3), D2, "eu"))
    _race(lambda i: IcebergPublisher(lake.url).publish(same), 4)
    others = [lake.commit(rows(range(10 * i, 10 * i + 2), D1, "us")) for i in range(1, 4)]
    _race(lambda i: IcebergPublisher(lake.url).publish(others[i]), 3)
    instants = history(first)
    assert len(instants) == len(set(instants)) == 5
    table = first.table()
    assert table is not None
    assert scanned(table) == lake.expected(lake.rows)


def test_a_commit_with_a_new_column_adds_it_to_the_schema(tmp_path: Path) -> None:
    old = Lake(str(tmp_path / "grow"), {}, pa.schema([("id", pa.int64()),
                                                      ("day", pa.date32())]), ("day",))
    publisher = IcebergPublisher(old.url)
    publisher.publish(old.commit([{"id": 1, "day": D1}]))
    new = Lake(old.url, {}, pa.schema([("id", pa.int64()), ("note", pa.string()),
                                       ("day", pa.date32())]), ("day",))
    publisher.publish(new.commit([{"id": 2, "note": "x", "day": D2}]))
    table = publisher.table()
    assert table is not None
    assert table.schema().column_names == ["id", "day", "note"]
    mapping = table.metadata.name_mapping()
    assert mapping is not None and "note" in {f.names[0] for f in mapping}
    assert scanned(table) == [{"id": 1, "day": D1, "note": None},
                              {"id": 2, "day": D2, "note": "x"}]


def test_a_commit_without_files_is_a_snapshot_too(lake: Lake) -> None:
    """Every completed instant is one snapshot, so the counts match the timeline."""
    publisher = IcebergPublisher(lake.url)
    first = lake.commit(rows(range(0, 2), D1, "eu"))
    empty = lake.commit([])
    drop = lake.replace([], removed=[f.path for f in first.added])
    for commit in (first, empty, drop):
        publisher.publish(commit)
    assert history(publisher) == [first.instant, empty.instant, drop.instant]
    table = publisher.table()
    assert table is not None and scanned(table) == []


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_an_instant_whose_files_a_later_replace_deleted_is_published_late(
        where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A crash between an instant and its publish, then another writer's replace deleted
    that instant's files: both are published in order, and the table reads right."""
    if where == "s3":
        lake = s3_lake(request.getfixturevalue("moto_s3"))
        catalog = {"uri": f"sqlite:///{tmp_path}/catalog.db"}
    else:
        lake, catalog = Lake(str(tmp_path / "table"), {}, SCHEMA, PARTITION_BY), {}
    first = lake.commit(rows(range(0, 2), D1, "eu") + rows(range(2, 4), D2, "eu"))
    gone = [f.path for f in first.added if f.partition["day"] == D1.isoformat()]
    replace = lake.replace(rows(range(4, 5), D1, "eu"), removed=gone)
    lake.fs.rm(f"{lake.root()}/{gone[0]}")
    publisher = IcebergPublisher(lake.url, lake.storage_options, catalog)
    publisher.publish(first)
    publisher.publish(replace)
    assert history(publisher) == [first.instant, replace.instant]
    table = publisher.table()
    assert table is not None
    live = [f.path for f in first.added + replace.added if f.path not in gone]
    assert scanned(table) == lake.expected(live)
    old = table.scan(snapshot_id=table.snapshots()[0].snapshot_id).plan_files()
    assert sorted(t.file.record_count for t in old) == [2, 2]


def test_nested_and_timestamp_columns_read_back(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string())),
                        ("kv", pa.map_(pa.string(), pa.int64())),
                        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
                        ("at", pa.timestamp("us", tz="UTC")), ("day", pa.date32())])
    lake = Lake(str(tmp_path / "nested"), {}, schema, ("day",))
    at = dt.datetime(2026, 11, 27, 1, 2, 3, tzinfo=dt.timezone.utc)
    data = [{"id": 1, "tags": ["x", "y"], "kv": [("k", 1)], "s": {"a": 1, "b": "q"},
             "at": at, "day": D1},
            {"id": 2, "tags": [], "kv": None, "s": None, "at": None, "day": D2}]
    commit = lake.commit(data)
    publisher = IcebergPublisher(lake.url)
    publisher.publish(commit)
    table = publisher.table()
    assert table is not None
    read = table.scan().to_arrow().sort_by("id").to_pylist()
    assert [dict(r, at=r["at"] and r["at"].astimezone(dt.timezone.utc)) for r in read] == data


def test_expiring_old_snapshots_releases_the_replaced_files(lake: Lake) -> None:
    publisher = IcebergPublisher(lake.url)
    first = lake.commit(rows(range(0, 2), D1, "eu") + rows(range(2, 4), D2, "eu"))
    replaced = [f.path for f in first.added if f.partition["day"] == D1.isoformat()]
    replace = lake.replace(rows(range(4, 5), D1, "eu"), removed=replaced)
    last = lake.commit(rows(range(5, 6), D2, "us"))
    for commit in (first, replace, last):
        publisher.publish(commit)
    assert publisher.expired_before() is None
    assert publisher.expire_before(last.instant) == set(replaced)
    assert publisher.published_instants() == {last.instant}
    assert publisher.expired_before() == last.instant
    live = [f.path for c in (first, replace, last) for f in c.added if f.path not in replaced]
    assert publisher.referenced_paths() == set(live)
    table = publisher.table()
    assert table is not None and scanned(table) == lake.expected(live)
    assert publisher.expire_before(first.instant) == set()           # never backwards
    assert publisher.expired_before() == last.instant
    assert publisher.holds(first.instant) and not publisher.holds("29991231000000000")
    publisher.publish(first)                                         # no-op: expired
    assert len(history(publisher)) == 1


def power(n: int, base: int) -> int:
    """The largest power of `base` dividing `n`."""
    found = 1
    while n % base == 0:
        n, found = n // base, found * base
    return found


def digits(n: int, base: int) -> list[int]:
    found = []
    while n:
        n, digit = divmod(n, base)
        found.append(digit)
    return found


def test_a_table_that_merges_manifests_merges_them_in_tiers(lake: Lake) -> None:
    """Many small commits (a stream's micro-batches): with the table's
    commit.manifest-merge.enabled and min-count-to-merge 3, every 3 manifests of a tier
    (under 3, 9, 27 ... files) are merged into one of the next. So after n commits of one
    file the snapshot has as many manifests as n has base-3 digits' sum (n = 14 = 112 in
    base 3: 1 + 1 + 2 = 4 manifests), a merge rewrites 3^k files every 3^k commits (where
    merging the table's one large manifest with the new ones, as pyiceberg's merge does,
    rewrites every file every 2 commits), and pyiceberg's scan reads every row back."""
    publisher = IcebergPublisher(lake.url)
    commits = [lake.commit(rows(range(0, 1), D1, "eu"))]
    publisher.publish(commits[0])
    table = publisher.table()
    assert table is not None
    with table.transaction() as tx:
        tx.set_properties({"commit.manifest-merge.enabled": "true",
                           "commit.manifest.min-count-to-merge": "3"})
    rewritten = []
    for i in range(1, 27):
        commits.append(lake.commit(rows(range(i, i + 1), D2, "us")))
        publisher.publish(commits[-1])
        table = publisher.table()
        current = table.current_snapshot() if table is not None else None
        assert table is not None and current is not None
        manifests = current.manifests(table.io)
        assert len(manifests) == sum(digits(len(commits), 3)), len(commits)
        assert sum(m.added_files_count or 0 for m in manifests) + sum(
            m.existing_files_count or 0 for m in manifests) == len(commits)
        rewritten.append(sum(m.existing_files_count or 0 for m in manifests
                             if m.added_snapshot_id == current.snapshot_id))
    # the n-th commit merges 3^k files, 3^k the largest power of 3 dividing n (so each
    # file is rewritten once a tier): the new file among them, the others existing
    assert rewritten == [power(n, 3) - 1 for n in range(2, 28)]
    assert history(publisher) == [c.instant for c in commits]
    assert scanned(table) == lake.expected(lake.rows)


def test_an_unpartitioned_table_appends_and_replaces(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "flat"), {}, pa.schema([("id", pa.int64()),
                                                      ("name", pa.string())]), ())
    publisher = IcebergPublisher(lake.url)
    first = lake.commit([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
    second = lake.commit([{"id": 3, "name": "c"}])
    replace = lake.replace([{"id": 4, "name": "d"}], removed=[first.added[0].path])
    for commit in (first, second, replace):
        publisher.publish(commit)
    table = publisher.table()
    assert table is not None and table.spec().is_unpartitioned()
    assert scanned(table) == [{"id": 3, "name": "c"}, {"id": 4, "name": "d"}]
    assert len(history(publisher)) == 3


def test_the_metadata_log_a_load_parses_names_16_files(lake: Lake) -> None:
    """Tables markerstore creates set write.metadata.previous-versions-max to 16 (not
    Iceberg's default 100, half of a small table's metadata, parsed by every load): after
    20 commits the metadata log names 16 earlier files, the older ones are deleted, and
    every snapshot is still read back."""
    publisher = IcebergPublisher(lake.url)
    commits = [lake.commit(rows(range(i, i + 1), D1, "eu")) for i in range(20)]
    for commit in commits:
        publisher.publish(commit)
    table = publisher.table()
    assert table is not None
    assert table.properties["write.metadata.previous-versions-max"] == "16"
    assert len(table.metadata.metadata_log) == 16
    names = lake.fs.ls(f"{lake.root()}/metadata", detail=False)
    assert len([n for n in names if n.endswith(".metadata.json")]) == 17
    assert history(publisher) == [c.instant for c in commits]
    assert scanned(table) == lake.expected(lake.rows)
