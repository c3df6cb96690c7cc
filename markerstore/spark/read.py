"""Snapshot reads: a DataFrame over exactly the files of one completed instant."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from markerstore.errors import SnapshotError
from markerstore.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read(spark: SparkSession, path: str, as_of: str | None = None, *,
         storage_options: Mapping[str, Any] | None = None) -> DataFrame:
    """The table as of its latest completed instant (or `as_of`): the snapshot's file list
    (from the timeline, never a listing) handed to Spark's own Parquet reader, with
    ``basePath`` so that partition columns come back. Spark reads the files with its own
    filesystem configuration (for S3: s3a and its credentials)."""
    table = Table(path, storage_options)
    snapshot = table.snapshot(as_of)
    if snapshot.instant is None:
        raise SnapshotError(f"{table.storage.url()} has no completed commit to read")
    urls = [u for u in snapshot.urls if u.endswith(".parquet")]
    if not urls:
        return spark.createDataFrame([], "_empty: string").drop("_empty")
    return spark.read.option("basePath", table.storage.url()).parquet(*urls)
