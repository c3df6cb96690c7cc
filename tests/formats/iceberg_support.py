"""Commits to publish, made of real Parquet files laid out as markerstore lays them out:
``<col>=<value>/.../<fileId>_<token>_<instant>.parquet``, Hive-style, the partition
columns in the folder names only."""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.commit.names import FileName, partition_path, relative_path
from markerstore.formats.base import APPEND, OVERWRITE, CommitToPublish, PublishedFile
from markerstore.formats.commits import hive_partition

_seq = itertools.count(1)
_clock = itertools.count(1)


def new_instant() -> str:
    """Instants in increasing order (yyyyMMddHHmmssSSS)."""
    when = dt.datetime(2026, 11, 27, 12, 0, 0) + dt.timedelta(seconds=next(_clock))
    return when.strftime("%Y%m%d%H%M%S") + "000"


@dataclass
class Lake:
    """A table folder on local disk or S3, and every row its commits hold (for checks)."""

    url: str
    storage_options: dict[str, Any]
    schema: pa.Schema
    partition_by: tuple[str, ...]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by path

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        fs, _ = fsspec.core.url_to_fs(self.url, **self.storage_options)
        return fs

    def root(self) -> str:
        return fsspec.core.url_to_fs(self.url, **self.storage_options)[1].rstrip("/")

    def write(self, instant: str, rows: Sequence[dict[str, Any]]) -> list[PublishedFile]:
        """One file per partition of `rows`, without the partition columns."""
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in rows:
            groups.setdefault(tuple(row[c] for c in self.partition_by), []).append(row)
        files = []
        data_schema = pa.schema([f for f in self.schema if f.name not in self.partition_by])
        for values, group in groups.items():
            folder = partition_path(self.partition_by, values)
            name = FileName(uuid.uuid4().hex[:8] + "-w", next(_seq), 0, 0, next(_seq),
                            instant).name
            path = relative_path(folder, name)
            table = pa.Table.from_pylist(
                [{k: v for k, v in r.items() if k not in self.partition_by} for r in group],
                schema=data_schema)
            full = f"{self.root()}/{path}"
            self.fs.makedirs(full.rpartition("/")[0], exist_ok=True)
            with self.fs.open(full, "wb") as out:
                pq.write_table(table, out)
            files.append(PublishedFile(path, self.fs.size(full), len(group),
                                       hive_partition(path)))
            self.rows[path] = list(group)
        return files

    def commit(self, rows: Sequence[dict[str, Any]], mode: str = APPEND,
               removed: Iterable[str] = ()) -> CommitToPublish:
        instant = new_instant()
        added = tuple(self.write(instant, rows))
        return CommitToPublish(instant, mode, added, tuple(removed), self.partition_by,
                               self.schema)

    def replace(self, rows: Sequence[dict[str, Any]], removed: Iterable[str]
                ) -> CommitToPublish:
        return self.commit(rows, OVERWRITE, removed)

    def expected(self, paths: Iterable[str]) -> list[dict[str, Any]]:
        """The rows of the files at `paths`, partition columns included, sorted."""
        return sort_rows(row for path in paths for row in self.rows[path])


def sort_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: repr(sorted(r.items())))


def scanned(table: Any) -> list[dict[str, Any]]:
    """Every row pyiceberg's own scan returns, sorted."""
    return sort_rows(table.scan().to_arrow().to_pylist())
