"""Per-file statistics for a format's log, from the Parquet footers of a commit's files:
the row count always, and a column's min, max and null count where the footer has them
for every row group and the value has a plain JSON form (numbers, short strings, dates)."""

from __future__ import annotations

import datetime as _dt
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.parquet as pq

from markerstore.formats.base import CommitToPublish
from markerstore.table import Table

STRING_STATS_MAX = 32  # longer strings get no min/max (a truncated max would be wrong)
FOOTER_THREADS = 16


def _plain(value: Any) -> Any:
    """`value` as a JSON statistic, or None where it has no safe plain form."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= STRING_STATS_MAX else None
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value.isoformat()
    return None


def footer_stats(metadata: pq.FileMetaData) -> dict[str, Any]:
    """Delta-style statistics of one file: numRecords, minValues, maxValues, nullCount
    (top-level columns only)."""
    result: dict[str, Any] = {"numRecords": metadata.num_rows}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    schema = metadata.schema
    for index in range(metadata.num_columns):
        column = schema.column(index)
        if "." in column.path:
            continue  # nested: no statistics
        lows, highs, count, complete = [], [], 0, metadata.num_row_groups > 0
        for group in range(metadata.num_row_groups):
            stats = metadata.row_group(group).column(index).statistics
            if stats is None or not stats.has_null_count:
                complete = False
                break
            count += stats.null_count
            if stats.has_min_max:
                lows.append(_plain(stats.min))
                highs.append(_plain(stats.max))
        if not complete:
            continue
        nulls[column.name] = count
        if lows and None not in lows and None not in highs:
            mins[column.name] = min(lows)
            maxs[column.name] = max(highs)
    if mins:
        result["minValues"] = mins
        result["maxValues"] = maxs
    if nulls:
        result["nullCount"] = nulls
    return result


def file_stats(table: Table, commit: CommitToPublish) -> dict[str, dict[str, Any]]:
    """Statistics of every file the commit adds, by path (footers read in parallel)."""
    def read(path: str) -> tuple[str, dict[str, Any]]:
        with table.storage.fs.open(table.storage.path(path), "rb") as handle:
            return path, footer_stats(pq.ParquetFile(handle).metadata)

    paths = [f.path for f in commit.added]
    if not paths:
        return {}
    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(paths))) as pool:
        return dict(pool.map(read, paths))
