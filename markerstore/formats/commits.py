"""A completed instant as a format publishes it: :func:`commit_to_publish` builds a
:class:`CommitToPublish` from the instant's commit metadata (``files``,
``replaced_files``), its Hive-style folders (partition columns and values) and the Parquet
footer of one of its files (the schema, with the partition columns' types the writer
recorded there).

Timestamps with a time zone are instants: Delta's ``timestamp`` and Iceberg's
``timestamptz`` hold them in UTC, and neither library takes another zone. Spark hands its
batches over in the session's zone, so the task writer stores them as UTC
(:func:`utc_schema`, the same instants), a file written before in another zone publishes
as UTC, and a timestamp partition folder, which holds the wall-clock time of the zone the
writer recorded (as Spark names its folders), publishes as that instant in UTC."""

from __future__ import annotations

import base64
import datetime as _dt
import zoneinfo
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.formats.base import (
    APPEND,
    OVERWRITE,
    CommitToPublish,
    PublishedFile,
    Settled,
)
from markerstore.formats.values import unescape
from markerstore.paths import HIVE_DEFAULT_PARTITION
from markerstore.table import Table

# Key of a data file's Parquet key-value metadata naming the types of the partition
# columns (which Hive-style files do not hold): an Arrow IPC schema, base64.
PARTITION_SCHEMA_KEY = b"markerstore.partition_schema"
# More files a commit removed, per its metadata, besides its ``replaced_files`` (an error
# table's expire commits name theirs so): the same hook as verify's.
Absent = Callable[[Mapping[str, Any]], Iterable[str]]


def hive_partition(path: str) -> dict[str, str | None]:
    """The partition values of a file's folders (``day=2026-11-27/h=3/f.parquet`` ->
    {"day": "2026-11-27", "h": "3"}), unescaped once as Spark unescapes them (``%2F`` is
    ``/``); None for Hive's default (null) one."""
    values: dict[str, str | None] = {}
    for part in path.split("/")[:-1]:
        key, sep, value = part.partition("=")
        if not sep:
            continue
        value = unescape(value)
        values[unescape(key)] = None if value == HIVE_DEFAULT_PARTITION else value
    return values


def partition_schema_metadata(fields: list[pa.Field]) -> dict[bytes, bytes]:
    """The key-value metadata a data file carries for its partition columns' types."""
    raw = pa.schema(fields).serialize().to_pybytes()
    return {PARTITION_SCHEMA_KEY: base64.b64encode(raw)}


def utc_type(data_type: pa.DataType) -> pa.DataType:
    """`data_type` with every timestamp that has a time zone in UTC (nested ones too)."""
    if pa.types.is_timestamp(data_type):
        zoned = data_type.tz is not None and data_type.tz != "UTC"
        return pa.timestamp(data_type.unit, "UTC") if zoned else data_type
    if pa.types.is_map(data_type):
        return pa.map_(utc_field(data_type.key_field), utc_field(data_type.item_field),
                       data_type.keys_sorted)
    if pa.types.is_struct(data_type):
        return pa.struct([utc_field(data_type.field(i)) for i in range(data_type.num_fields)])
    if pa.types.is_large_list(data_type):
        return pa.large_list(utc_field(data_type.value_field))
    if pa.types.is_fixed_size_list(data_type):
        return pa.list_(utc_field(data_type.value_field), data_type.list_size)
    if pa.types.is_list(data_type):
        return pa.list_(utc_field(data_type.value_field))
    return data_type


def utc_field(field: pa.Field) -> pa.Field:
    return field.with_type(utc_type(field.type))


def utc_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with its zoned timestamps in UTC (:func:`utc_type`)."""
    return pa.schema([utc_field(f) for f in schema], metadata=schema.metadata)


def utc_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with its zoned timestamps in UTC: the same instants (a cast of the type
    alone); the batch itself where it has none."""
    target = utc_schema(batch.schema)
    return batch if target.equals(batch.schema) else batch.cast(target)


def _zone(name: str) -> _dt.tzinfo:
    """The time zone an Arrow timestamp type names: an IANA name or an offset."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = _dt.datetime.strptime(name, "%z").tzinfo  # "+05:30"
        return zone if zone is not None else _dt.timezone.utc


def _utc_folder_value(text: str | None, zone: str) -> str | None:
    """A timestamp partition folder's wall-clock time in `zone` as the UTC time Delta's
    and Iceberg's partition values hold (``2024-01-02 08:04:05``)."""
    if text is None:
        return None
    try:
        local = _dt.datetime.fromisoformat(text)
        if local.tzinfo is None:
            local = local.replace(tzinfo=_zone(zone))
    except ValueError:
        return text  # not a wall-clock time: the format's own check names it
    return local.astimezone(_dt.timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def _footer_schema(table: Table, path: str) -> pa.Schema:
    with table.storage.fs.open(table.storage.path(path), "rb") as handle:
        return pq.read_schema(handle)


def table_schema(table: Table, files: list[str], partition_by: tuple[str, ...]
                 ) -> pa.Schema:
    """The data columns of the first file's footer, then the partition columns (typed as
    the writer recorded them; else strings), zoned timestamps in UTC."""
    fields = _written_fields(table, files, partition_by)
    return pa.schema([utc_field(f.remove_metadata()) for f in fields])


def _written_fields(table: Table, files: list[str], partition_by: tuple[str, ...]
                    ) -> list[pa.Field]:
    """The columns as the writer wrote and recorded them (zones as they were)."""
    data = pa.schema([])
    typed: dict[str, pa.Field] = {}
    if files:
        footer = _footer_schema(table, files[0])
        raw = (footer.metadata or {}).get(PARTITION_SCHEMA_KEY)
        if raw:
            recorded = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw)))
            typed = {f.name: f for f in recorded}
        data = pa.schema([f for f in footer if f.name not in partition_by])
    return [*data, *(typed.get(c, pa.field(c, pa.string())) for c in partition_by)]


def _zoned_partitions(fields: list[pa.Field], partition_by: tuple[str, ...]
                      ) -> dict[str, str]:
    """The partition columns that are timestamps of a zone other than UTC: their zone."""
    zones = {}
    for f in fields:
        if f.name in partition_by and pa.types.is_timestamp(f.type) and f.type.tz \
                and f.type.tz != "UTC":
            zones[f.name] = str(f.type.tz)
    return zones


def commit_to_publish(table: Table, instant: str, meta: Mapping[str, Any] | None = None,
                      absent: Absent | None = None, *, settled: Settled | None = None
                      ) -> CommitToPublish:
    """The completed instant `instant` (its commit metadata `meta`, read if not given) as a
    format publishes it; `absent` names more files it removed; `settled`: what the
    timeline says, for the version to carry (:class:`Settled`)."""
    meta = table.commit_metadata(instant) if meta is None else meta
    entries = list(meta.get("files", []))
    removed = tuple(dict.fromkeys([*meta.get("replaced_files", []),
                                   *(absent(meta) if absent is not None else [])]))
    requested = table.requested_info(instant)
    partition_by = tuple(requested.get("partition_by") or ())
    if not partition_by:
        paths = [e["path"] for e in entries] + list(removed)
        partition_by = tuple(hive_partition(paths[0])) if paths else ()
    written = _written_fields(table, [e["path"] for e in entries], partition_by)
    zones = _zoned_partitions(written, partition_by)
    added = tuple(PublishedFile(e["path"], int(e.get("size") or 0), e.get("rows"),
                                _partition_values(e["path"], zones)) for e in entries)
    schema = pa.schema([utc_field(f.remove_metadata()) for f in written])
    mode = OVERWRITE if removed or meta.get("conflict_mode") == "replace" else APPEND
    return CommitToPublish(instant, mode, added, removed, partition_by, schema, settled)


def _partition_values(path: str, zones: Mapping[str, str]) -> dict[str, str | None]:
    """A file's partition values; a zoned timestamp's as its UTC time."""
    values = hive_partition(path)
    for name, zone in zones.items():
        if name in values:
            values[name] = _utc_folder_value(values[name], zone)
    return values

