"""Per-file statistics for a Delta ``add`` action, from the Parquet footer of each file a
commit adds (PROTOCOL.md, "Per-file Statistics": ``numRecords``, and per column
``minValues``, ``maxValues``, ``nullCount``).

A reader prunes a file by its statistics, so a bound must hold for every row: ``minValues``
at most every value, ``maxValues`` at least every value. delta-rs 1.6's pyarrow reader
(``to_pyarrow_table(filters=...)``) reads a column that the statistics leave out while
they give others as one without values, and a filter on it skips the file: so every
column of a type Delta's writers give bounds has them (or only a null count, when all its
values are null), or the file gets no column statistics at all, only ``numRecords``.
Bounds, per type, as Delta's writers write them:

* booleans, integers, dates (``2026-11-27``): the footer's min and max;
* floats and doubles: the footer's min and max where the file holds no NaN. A footer's
  bounds leave NaN out, and delta-rs takes a file whose bounds satisfy a filter as one
  whose every row does (a NaN row then passes ``>= min``): markerstore's writer records
  which float columns of a file hold a NaN (:data:`NAN_COLUMNS_KEY`), and a file with
  one, or without the record (another writer's), gets no column statistics;
* decimals: exact JSON numbers (never through a binary float);
* timestamps: ISO-8601 text in milliseconds (``...T03:04:05.250Z``; no ``Z`` without a time
  zone): the min truncated down, the max rounded up to the millisecond;
* strings: a prefix of 32 characters (Delta's ``dataSkippingStringPrefixLength``); a
  longer max is its prefix followed by U+FFFD (past any character below U+FFFD), so it
  stays above every value it stands for;
* binary and nested columns: none (readers do not prune by them).

A row group without statistics, or with values but no bounds, leaves the file without
column statistics.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from markerstore.formats.base import CommitToPublish
from markerstore.table import Table

# Key of a data file's Parquet key-value metadata naming its float columns that hold a
# NaN (a JSON list; present, possibly empty, in every file markerstore writes).
NAN_COLUMNS_KEY = b"markerstore.nan_columns"
STRING_PREFIX = 32      # Delta's dataSkippingStringPrefixLength
TIE_BREAKER = "\ufffd"  # appended to a truncated max (as Delta's writers do)
FOOTER_THREADS = 16
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_DATE = _dt.date(1970, 1, 1)
_UNITS = {"milliseconds": 1_000, "microseconds": 1, "nanoseconds": 0.001}


def nan_columns(data: pa.Table) -> set[str]:
    """The float columns of `data` that hold a NaN (a writer records them per file)."""
    return {f.name for f in data.schema
            if (pa.types.is_float32(f.type) or pa.types.is_float64(f.type))
            and pc.any(pc.is_nan(data.column(f.name))).as_py()}


def nan_metadata(columns: set[str]) -> dict[bytes, bytes]:
    """The key-value metadata recording a file's float columns that hold a NaN."""
    return {NAN_COLUMNS_KEY: json.dumps(sorted(columns)).encode()}


def _recorded_nans(metadata: pq.FileMetaData) -> set[str] | None:
    """The columns a file's writer recorded as holding a NaN, or None if it did not say."""
    raw = (metadata.metadata or {}).get(NAN_COLUMNS_KEY)
    try:
        return set(json.loads(raw)) if raw is not None else None
    except ValueError:
        return None


def _timestamp_unit(column: pq.ColumnSchema) -> tuple[float, bool] | None:
    """(microseconds per raw unit, adjusted to UTC) of a Parquet TIMESTAMP column."""
    logical = json.loads(column.logical_type.to_json() or "{}")
    if logical.get("Type") != "Timestamp":
        return None
    unit = _UNITS.get(str(logical.get("timeUnit")))
    return None if unit is None else (unit, bool(logical.get("isAdjustedToUTC")))


def _bounds(column: pq.ColumnSchema, arrow_type: pa.DataType, stats: pq.Statistics
            ) -> tuple[Any, Any] | None:
    """(min, max) of one row group's column as comparable Python values, or None where the
    type gets no statistics."""
    if pa.types.is_boolean(arrow_type) or pa.types.is_signed_integer(arrow_type) \
            or pa.types.is_floating(arrow_type):
        return stats.min, stats.max
    if pa.types.is_decimal(arrow_type):
        return decimal.Decimal(stats.min), decimal.Decimal(stats.max)
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return (stats.min, stats.max) if isinstance(stats.min, str) else None
    if pa.types.is_date32(arrow_type):
        return int(stats.min_raw), int(stats.max_raw)  # days since the epoch
    timestamp = _timestamp_unit(column) if pa.types.is_timestamp(arrow_type) else None
    if timestamp is not None:
        unit = timestamp[0]
        return int(stats.min_raw) * unit, int(stats.max_raw) * unit  # microseconds
    return None


def _string_max(value: str) -> str:
    """A max at most :data:`STRING_PREFIX` characters longer than needed: the prefix, then
    U+FFFD past the first cut character below it (UTF-8 orders by code point)."""
    for cut in range(STRING_PREFIX, len(value)):
        if value[cut] < TIE_BREAKER:
            return value[:cut] + TIE_BREAKER
    return value


def _timestamp_text(micros: float, utc: bool, up: bool) -> str | None:
    millis = int(micros // 1000) + (1 if up and micros % 1000 else 0)
    try:
        moment = _EPOCH + _dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None
    text = moment.isoformat(timespec="milliseconds")
    return text + "Z" if utc else text


def _final(column: pq.ColumnSchema, arrow_type: pa.DataType, low: Any, high: Any
           ) -> tuple[Any, Any] | None:
    """The statistic values of a column's file-wide bounds, or None where they have no
    faithful form."""
    if pa.types.is_date32(arrow_type):
        try:
            return ((_EPOCH_DATE + _dt.timedelta(days=low)).isoformat(),
                    (_EPOCH_DATE + _dt.timedelta(days=high)).isoformat())
        except OverflowError:
            return None
    if pa.types.is_timestamp(arrow_type):
        _, utc = _timestamp_unit(column) or (1, False)
        pair = _timestamp_text(low, utc, False), _timestamp_text(high, utc, True)
        return None if None in pair else pair
    if isinstance(low, str):
        return low[:STRING_PREFIX], _string_max(high)
    return low, high


def _bounded(arrow_type: pa.DataType) -> bool:
    """Whether Delta's writers give a column of `arrow_type` bounds (readers prune by
    them)."""
    return not (pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
                or pa.types.is_fixed_size_binary(arrow_type) or pa.types.is_nested(arrow_type))


def _column(metadata: pq.FileMetaData, index: int, arrow_type: pa.DataType
            ) -> tuple[int, tuple[Any, Any] | None] | None:
    """(null count, file-wide bounds or None when every value is null) of one column, or
    None where its bounds are not known for sure."""
    column = metadata.schema.column(index)
    lows, highs, nulls = [], [], 0
    for group in range(metadata.num_row_groups):
        rows = metadata.row_group(group).num_rows
        stats = metadata.row_group(group).column(index).statistics
        if stats is None or not stats.has_null_count:
            return None
        nulls += stats.null_count
        bounds = _bounds(column, arrow_type, stats) if stats.has_min_max else None
        if bounds is None and stats.null_count < rows:
            return None  # values without bounds
        if bounds is not None:
            lows.append(bounds[0])
            highs.append(bounds[1])
    if not lows:
        return nulls, None
    final = _final(column, arrow_type, min(lows), max(highs))
    return None if final is None else (nulls, final)


def footer_stats(metadata: pq.FileMetaData) -> dict[str, Any]:
    """Delta statistics of one file: numRecords, and minValues, maxValues, nullCount for
    every top-level column of a type with bounds; numRecords alone where one of them has
    no sure bounds."""
    result: dict[str, Any] = {"numRecords": metadata.num_rows}
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    arrow = metadata.schema.to_arrow_schema()
    nans = _recorded_nans(metadata)
    for index in range(metadata.num_columns):
        column = metadata.schema.column(index)
        if "." in column.path or column.name not in arrow.names \
                or not _bounded(arrow.field(column.name).type):
            continue  # nested or binary: no statistics
        arrow_type = arrow.field(column.name).type
        if pa.types.is_floating(arrow_type) and (nans is None or column.name in nans):
            return result  # a NaN (or no record of NaNs): no bounds hold for a reader
        found = _column(metadata, index, arrow_type)
        if found is None:
            return result  # one column without sure bounds: none for the file
        nulls[column.name], bounds = found
        if bounds is not None:
            mins[column.name], maxs[column.name] = bounds
    if mins:
        result["minValues"] = mins
        result["maxValues"] = maxs
    if nulls:
        result["nullCount"] = nulls
    return result


def _json_value(value: Any) -> str:
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # exact: a JSON number with every digit
    return json.dumps(value)


def stats_json(stats: dict[str, Any]) -> str:
    """`stats` as the JSON text of an ``add`` action's ``stats`` (decimals exact)."""
    parts = []
    for key, value in stats.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{json.dumps(k)}: {_json_value(v)}" for k, v in value.items())
            parts.append(f"{json.dumps(key)}: {{{inner}}}")
        else:
            parts.append(f"{json.dumps(key)}: {_json_value(value)}")
    return "{" + ", ".join(parts) + "}"


def file_stats(table: Table, commit: CommitToPublish) -> dict[str, str]:
    """The statistics (JSON text) of every file the commit adds, by path (footers read in
    parallel)."""
    def read(path: str) -> tuple[str, str]:
        with table.storage.fs.open(table.storage.path(path), "rb") as handle:
            return path, stats_json(footer_stats(pq.ParquetFile(handle).metadata))

    paths = [f.path for f in commit.added]
    if not paths:
        return {}
    with ThreadPoolExecutor(max_workers=min(FOOTER_THREADS, len(paths))) as pool:
        return dict(pool.map(read, paths))
