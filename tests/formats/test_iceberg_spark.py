"""Files a real markerstore write laid out (Spark, partitioned, then a replace of one
partition), published from what the completed instants record, and read back with
pyiceberg's scan, not with markerstore: the same rows as markerstore's own read."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import markerstore.spark as ms
from markerstore import Table
from markerstore.formats.base import APPEND, OVERWRITE, CommitToPublish, PublishedFile
from markerstore.formats.commits import hive_partition
from markerstore.formats.iceberg import IcebergPublisher
from tests.formats.iceberg_support import sort_rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("day", pa.date32()),
                    ("region", pa.string())])
PARTITION_BY = ("day", "region")


def to_publish(table: Table, instant: str) -> CommitToPublish:
    meta = table.commit_metadata(instant)
    added = tuple(PublishedFile(e["path"], int(e["size"]), e.get("rows"),
                                hive_partition(e["path"])) for e in meta["files"])
    removed = tuple(meta.get("replaced_files", []))
    return CommitToPublish(instant, OVERWRITE if removed else APPEND, added, removed,
                           PARTITION_BY, SCHEMA)


def frame(spark: Any, ids: range, days: list[dt.date], regions: list[str]) -> Any:
    data = [(i, f"n{i}", days[i % len(days)], regions[i % len(regions)]) for i in ids]
    return spark.createDataFrame(data, "id long, name string, day date, region string")


def test_a_spark_write_and_a_replace_read_back_by_pyiceberg(spark: Any, tmp_path: Path
                                                             ) -> None:
    url = str(tmp_path / "events")
    days = [dt.date(2026, 11, 26), dt.date(2026, 11, 27)]
    table, publisher = Table(url), IcebergPublisher(url)
    first = ms.write(frame(spark, range(0, 40), days, ["eu", "a/b=c d"]), url,
                     partition_by=list(PARTITION_BY))
    publisher.publish(to_publish(table, first.instant))
    second = ms.write(frame(spark, range(100, 110), days[:1], ["eu"]), url,
                      partition_by=list(PARTITION_BY), mode="overwrite")
    assert to_publish(table, second.instant).removed       # the replace replaced files
    publisher.publish(to_publish(table, second.instant))
    iceberg = publisher.table()
    assert iceberg is not None
    read = sort_rows(iceberg.scan().to_arrow().to_pylist())
    expected = sort_rows(r.asDict() for r in ms.read(spark, url).collect())
    assert read == expected and len(read) == 40 - 20 + 10   # day 26 is region eu
    assert {r["region"] for r in read} == {"eu", "a/b=c d"}
    assert [s.summary and s.summary.get("markerstore.instant")
            for s in iceberg.snapshots()] == [first.instant, second.instant]
