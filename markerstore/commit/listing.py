"""Streaming a table's listing in Arrow chunks, and spooling chunks to Parquet files.

For :mod:`markerstore.commit.verify`: S3 is listed with ListObjectsV2 (one request per
1,000 keys), local disk with ``os.scandir``, anything else with fsspec ``find``; each
chunk of 10,000 rows is written as a Parquet file that DuckDB reads back, so no Python
object per file outlives its chunk.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.commit import s3
from markerstore.storage import Storage

CHUNK = 10_000
LISTING = pa.schema([("path", pa.string()), ("size", pa.int64()), ("mtime", pa.float64())])


def _batches(rows: Iterator[tuple[str, int, float]]) -> Iterator[pa.RecordBatch]:
    paths: list[str] = []
    sizes: list[int] = []
    mtimes: list[float] = []
    for path, size, mtime in rows:
        paths.append(path)
        sizes.append(size)
        mtimes.append(mtime)
        if len(paths) >= CHUNK:
            yield pa.record_batch([paths, sizes, mtimes], schema=LISTING)
            paths, sizes, mtimes = [], [], []
    if paths:
        yield pa.record_batch([paths, sizes, mtimes], schema=LISTING)


def _local_rows(root: str) -> Iterator[tuple[str, int, float]]:
    stack = [""]
    while stack:
        relative = stack.pop()
        try:
            entries = os.scandir(os.path.join(root, relative) if relative else root)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                name = f"{relative}/{entry.name}" if relative else entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append(name)
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    yield name, info.st_size, info.st_mtime


def _s3_rows(storage: Storage) -> Iterator[tuple[str, int, float]]:
    bucket, prefix = s3.table_prefix(storage)
    token: dict[str, str] = {}
    while True:
        page = s3._call(storage, f"list s3://{bucket}/{prefix}", "list_objects_v2", "LIST",
                        Bucket=bucket, Prefix=prefix, **token)
        for item in page.get("Contents", []) or []:
            yield (str(item["Key"])[len(prefix):], int(item["Size"]),
                   item["LastModified"].timestamp())
        if not page.get("IsTruncated"):
            return
        token = {"ContinuationToken": str(page["NextContinuationToken"])}


def _fsspec_rows(storage: Storage) -> Iterator[tuple[str, int, float]]:
    try:
        found = storage.fs.find(storage.root, detail=True)
    except FileNotFoundError:
        return
    for path, info in found.items():
        if info.get("type") == "directory":
            continue
        when = info.get("mtime") or info.get("LastModified") or info.get("created") or 0
        stamp = when.timestamp() if hasattr(when, "timestamp") else float(when)
        yield storage.relative(path), int(info.get("size") or 0), stamp


def listing(storage: Storage) -> Iterator[pa.RecordBatch]:
    """Every file under the table (path relative to it, size, mtime), in Arrow chunks."""
    if storage.is_s3:
        return _batches(_s3_rows(storage))
    if storage.is_local:
        return _batches(_local_rows(storage.root))
    return _batches(_fsspec_rows(storage))


_SQL_TYPES = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}


class Spool:
    """A relation too large to hold: Arrow chunks written as Parquet files to a folder,
    which DuckDB then reads as a view (nothing of it stays in Python)."""

    def __init__(self, folder: str, name: str, schema: pa.Schema) -> None:
        self.folder = folder
        self.name = name
        self.schema = schema
        self.files = 0

    def add(self, data: pa.RecordBatch) -> None:
        pq.write_table(pa.Table.from_batches([data], self.schema),
                       os.path.join(self.folder, f"{self.name}-{self.files:06d}.parquet"),
                       compression="snappy")
        self.files += 1

    def view(self, con: duckdb.DuckDBPyConnection) -> None:
        if self.files:
            con.execute(f"CREATE VIEW {self.name} AS SELECT * FROM read_parquet("
                        f"'{self.folder}/{self.name}-*.parquet')")
        else:
            columns = ", ".join(f"{f.name} {_SQL_TYPES[f.type]}" for f in self.schema)
            con.execute(f"CREATE TABLE {self.name} ({columns})")
