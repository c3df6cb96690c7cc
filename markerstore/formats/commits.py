"""A completed instant as a format publishes it: :func:`commit_to_publish` builds a
:class:`CommitToPublish` from the instant's commit metadata (``files``,
``replaced_files``), its Hive-style folders (partition columns and values) and the Parquet
footer of one of its files (the schema, with the partition columns' types the writer
recorded there)."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.formats.base import APPEND, OVERWRITE, CommitToPublish, PublishedFile
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


def _footer_schema(table: Table, path: str) -> pa.Schema:
    with table.storage.fs.open(table.storage.path(path), "rb") as handle:
        return pq.read_schema(handle)


def table_schema(table: Table, files: list[str], partition_by: tuple[str, ...]
                 ) -> pa.Schema:
    """The data columns of the first file's footer, then the partition columns (typed as
    the writer recorded them; else strings)."""
    data = pa.schema([])
    typed: dict[str, pa.Field] = {}
    if files:
        footer = _footer_schema(table, files[0])
        raw = (footer.metadata or {}).get(PARTITION_SCHEMA_KEY)
        if raw:
            recorded = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw)))
            typed = {f.name: f for f in recorded}
        data = pa.schema([f for f in footer if f.name not in partition_by])
    fields = [*data, *(typed.get(c, pa.field(c, pa.string())) for c in partition_by)]
    return pa.schema([f.remove_metadata() for f in fields])


def commit_to_publish(table: Table, instant: str, meta: Mapping[str, Any] | None = None,
                      absent: Absent | None = None) -> CommitToPublish:
    """The completed instant `instant` (its commit metadata `meta`, read if not given) as a
    format publishes it; `absent` names more files it removed."""
    meta = table.commit_metadata(instant) if meta is None else meta
    entries = list(meta.get("files", []))
    removed = tuple(dict.fromkeys([*meta.get("replaced_files", []),
                                   *(absent(meta) if absent is not None else [])]))
    requested = table.requested_info(instant)
    partition_by = tuple(requested.get("partition_by") or ())
    if not partition_by:
        paths = [e["path"] for e in entries] + list(removed)
        partition_by = tuple(hive_partition(paths[0])) if paths else ()
    added = tuple(PublishedFile(e["path"], int(e.get("size") or 0), e.get("rows"),
                                hive_partition(e["path"])) for e in entries)
    schema = table_schema(table, [e["path"] for e in entries], partition_by)
    mode = OVERWRITE if removed or meta.get("conflict_mode") == "replace" else APPEND
    return CommitToPublish(instant, mode, added, removed, partition_by, schema)

