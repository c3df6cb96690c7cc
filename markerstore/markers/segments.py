"""Batched markers on storage: immutable segment files, and how DuckDB reads them.

A marker folder written by the marker server holds ``MARKERS.type`` (BATCHED) and
``segment-<seq>.parquet`` (or ``.avro``) files, one per flush, never rewritten. The rows
have :data:`~markerstore.markers.base.MARKER_COLUMNS`; ``schemas/marker_segment.avsc``
is the same schema as an Avro file.

Why readers can trust what they list:

* a segment appears whole or not at all: it is created with
  :meth:`Storage.create_if_absent` (S3: one PutObject with ``If-None-Match: *``; local:
  a complete, fsynced temporary file linked into place; memory: one locked put), and
  temporary files start with ``.`` so they never match ``segment-*``;
* compaction writes the merged segment before it deletes the merged ones, so a marker is
  on storage at every moment; a reader may see it twice (once in each) and keeps one
  row per marker;
* a reader that lists a segment which compaction then deletes lists again
  (:func:`read_listed`).
"""

from __future__ import annotations

import functools
import io
import json
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from importlib.resources import files
from typing import Any, TypeVar

import duckdb
import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from markerstore.arrow_avro import arrow_schema
from markerstore.errors import CorruptTableError, MarkerTypeError, StorageError
from markerstore.markers.base import (
    BATCHED,
    MARKER_COLUMNS,
    SEGMENT_RE,
    MarkerName,
    marker_folder,
    read_marker_type,
)
from markerstore.markers.rows import check_marker_rows
from markerstore.storage import Storage

FORMATS = ("parquet", "avro")
SEGMENT_PREFIX = "segment-"
SEQ_WIDTH = 10
T = TypeVar("T")
KEY_COLUMNS = ("partition", "file", "io_type")
DETAIL_KEYS = ("task_attempt", "size", "checksum", "pending_upload")
# How long a reader keeps listing again while compaction deletes the segments it listed.
READ_WAIT_S = 30.0
READ_PAUSE_MAX_S = 0.2  # the longest pause between two of those listings
# How often a memory-filesystem listing is tried again (see _ls).
LS_ATTEMPTS = 5


@dataclass(frozen=True)
class SegmentFile:
    """One segment on storage."""

    seq: int
    fmt: str
    path: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def segment_name(seq: int, fmt: str) -> str:
    """``segment-<seq>.<fmt>``, zero-padded so names sort in sequence order."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown segment format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return f"{SEGMENT_PREFIX}{seq:0{SEQ_WIDTH}d}.{fmt}"


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """(seq, format) of a segment file name, None for any other name."""
    match = SEGMENT_RE.match(name)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


# --- schema ---------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def avro_schema() -> dict[str, Any]:
    """The segment schema from ``schemas/marker_segment.avsc`` (parsed by fastavro)."""
    text = files("markerstore.schemas").joinpath("marker_segment.avsc").read_text("utf-8")
    parsed = fastavro.parse_schema(json.loads(text))
    assert isinstance(parsed, dict)
    return parsed


def arrow_schema_from_avro(schema: Mapping[str, Any] | None = None) -> pa.Schema:
    """The Arrow schema an Avro record schema describes (types and nullability)."""
    return arrow_schema(schema if schema is not None else avro_schema())


# --- rows -----------------------------------------------------------------------------------
def now_ms() -> int:
    return int(time.time() * 1000)


def marker_row(marker: MarkerName, details: Mapping[str, Any], created_at_ms: int
               ) -> dict[str, Any]:
    """One segment row; `pending_upload` is kept as JSON text."""
    pending = details.get("pending_upload")
    if pending is not None and not isinstance(pending, str):
        pending = json.dumps(pending, sort_keys=True, default=str)
    size = details.get("size")
    return {"partition": marker.partition, "file": marker.file_name,
            "io_type": marker.io_type.value,
            "task_attempt": _opt_str(details.get("task_attempt")),
            "size": None if size is None else int(size),
            "checksum": _opt_str(details.get("checksum")),
            "pending_upload": pending, "created_at": created_at_ms}


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    columns: dict[str, list[Any]] = {field.name: [] for field in MARKER_COLUMNS}
    for row in rows:
        for name, values in columns.items():
            values.append(row.get(name))
    return pa.table(columns, schema=MARKER_COLUMNS)


def marker_names(table: pa.Table) -> list[str]:
    """The marker name (``<partition>/<file>.marker.<IO>``) of every row."""
    parts = table.column("partition").to_pylist()
    names = table.column("file").to_pylist()
    ios = table.column("io_type").to_pylist()
    return [f"{p}/{f}.marker.{io}" if p else f"{f}.marker.{io}"
            for p, f, io in zip(parts, names, ios, strict=True)]


def dedupe(table: pa.Table) -> pa.Table:
    """One row per marker: a crash between the write and the delete of a compaction, or a
    flush whose answer was lost, leaves a marker twice, and a details update (size,
    checksum, pending upload) adds a row. The rows of a marker merge into one: the
    earliest ``created_at``, and of each detail its latest value that is not null. Rows
    keep the order of each marker's first row. Vectorized, so that compacting 100,000
    rows does not stall the server."""
    if table.num_rows < 2:
        return table
    table = table.cast(MARKER_COLUMNS)
    indexed = table.append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    firsts = indexed.select([*KEY_COLUMNS, "_row"]).group_by(
        list(KEY_COLUMNS), use_threads=False).aggregate([("_row", "min")])
    if firsts.num_rows == table.num_rows:
        return table
    latest_last = indexed.take(pc.sort_indices(
        indexed, sort_keys=[("created_at", "ascending"), ("_row", "ascending")]))
    merged = latest_last.group_by(list(KEY_COLUMNS), use_threads=False).aggregate(
        [("_row", "min"), ("created_at", "min")]
        + [(name, "last") for name in DETAIL_KEYS])
    merged = merged.take(pc.sort_indices(merged.column("_row_min")))
    columns = {name: merged.column(name) for name in KEY_COLUMNS}
    columns.update({name: merged.column(f"{name}_last") for name in DETAIL_KEYS})
    columns["created_at"] = merged.column("created_at_min")
    return pa.table([columns[f.name] for f in MARKER_COLUMNS], schema=MARKER_COLUMNS)


# --- encoding -------------------------------------------------------------------------------
def encode(table: pa.Table, fmt: str) -> bytes:
    """A segment file's bytes."""
    table = table.cast(MARKER_COLUMNS)
    buffer = io.BytesIO()
    if fmt == "parquet":
        pq.write_table(table, buffer, compression="zstd")
    elif fmt == "avro":
        records = table.to_pylist()
        fastavro.writer(buffer, avro_schema(), records, codec="deflate")
    else:
        raise ValueError(f"unknown segment format {fmt!r}")
    return buffer.getvalue()


def decode(data: bytes, fmt: str) -> pa.Table:
    """A segment file's rows, with MARKER_COLUMNS."""
    if fmt == "parquet":
        return pq.read_table(io.BytesIO(data)).cast(MARKER_COLUMNS)
    if fmt == "avro":
        return _avro_to_arrow(r for r in fastavro.reader(io.BytesIO(data))
                              if isinstance(r, dict))
    raise ValueError(f"unknown segment format {fmt!r}")


def _avro_to_arrow(records: Iterable[dict[str, Any]]) -> pa.Table:
    columns: dict[str, list[Any]] = {field.name: [] for field in MARKER_COLUMNS}
    for record in records:
        for name, values in columns.items():
            value = record.get(name)
            if name == "created_at" and isinstance(value, datetime):
                value = value.astimezone(timezone.utc)
            values.append(value)
    return pa.table(columns, schema=MARKER_COLUMNS)


# --- storage --------------------------------------------------------------------------------
def list_segments(storage: Storage, instant: str) -> list[SegmentFile]:
    """The instant's segment files, in sequence order (one LIST)."""
    folder = marker_folder(storage, instant)
    result = []
    for name in _ls(storage, folder):
        parsed = parse_segment_name(name)
        if parsed is not None:
            result.append(SegmentFile(parsed[0], parsed[1], f"{folder}/{name}"))
    return sorted(result, key=lambda s: (s.seq, s.fmt))


def _ls(storage: Storage, folder: str) -> list[str]:
    for attempt in range(LS_ATTEMPTS):
        try:
            return storage.ls(folder)
        except StorageError as exc:
            # fsspec's memory filesystem lists and then looks each entry up: a delete in
            # between (a compaction) raises KeyError. List again.
            if not (storage.is_memory and isinstance(exc.__cause__, KeyError)) \
                    or attempt == LS_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def write_segment(storage: Storage, instant: str, table: pa.Table, fmt: str,
                  next_seq: Callable[[], int], attempts: int = 100) -> SegmentFile:
    """Create a new segment with the rows of `table`; returns it once it is durable.

    The sequence number comes from `next_seq`; a name already taken (by another server
    that wrote this folder) takes the next number, so no segment is ever replaced.
    """
    data = encode(table, fmt)
    folder = marker_folder(storage, instant)
    for _ in range(attempts):
        seq = next_seq()
        path = f"{folder}/{segment_name(seq, fmt)}"
        if storage.create_if_absent(path, data):
            return SegmentFile(seq, fmt, path)
    raise StorageError(f"could not find a free segment name under {storage.url(folder)} "
                       f"after {attempts} tries")


def read_segment(storage: Storage, segment: SegmentFile) -> pa.Table:
    """The rows of one segment (one GET); a file that does not decode is an error, never
    skipped: skipping it would lose markers and so leave files behind."""
    return _decode_checked(storage, segment, storage.get(segment.path))


def _decode_checked(storage: Storage, segment: SegmentFile, data: bytes) -> pa.Table:
    try:
        return decode(data, segment.fmt)
    except Exception as exc:
        raise StorageError(f"segment {storage.url(segment.path)} is unreadable: "
                           f"{type(exc).__name__}: {exc}") from exc


class SegmentsChanged(Exception):
    """Raised by a `read` given to :func:`read_listed`: the listing it read is stale."""


def read_listed(storage: Storage, instant: str, read: Callable[[list[SegmentFile]], T]) -> T:
    """``read(segments)`` on a fresh listing of the instant's segments.

    A compaction deletes the segments it merged only once the merged one is durable, so
    when a listed segment is gone (FileNotFoundError, or :class:`SegmentsChanged`) a new
    listing holds its rows. While the compaction's deletes run, one listing after another
    can go stale: list again after a pause that doubles up to READ_PAUSE_MAX_S, for up to
    READ_WAIT_S in all (a compaction deletes a few files; under load that took more than
    five quick tries).
    """
    deadline = time.monotonic() + READ_WAIT_S
    pause = 0.005
    while True:
        segments = list_segments(storage, instant)
        try:
            return read(segments)
        except (FileNotFoundError, SegmentsChanged):
            if time.monotonic() + pause > deadline:
                break
        time.sleep(pause)
        pause = min(pause * 2, READ_PAUSE_MAX_S)
    raise StorageError(f"the segments of instant {instant} kept changing while being read "
                       f"for {READ_WAIT_S:g} s")


def delete_segments(storage: Storage, segments: Iterable[SegmentFile]) -> None:
    paths = [s.path for s in segments]
    if paths:
        storage.delete_many(paths, parallelism=8)


# --- the reader reconcile, rollback and the SQL views use -----------------------------------
def _fetch(storage: Storage, segments: list[SegmentFile]) -> list[bytes]:
    """The bytes of each segment: one GET each, retried and counted by Storage."""
    if len(segments) <= 1:
        return [storage.get(s.path) for s in segments]
    with ThreadPoolExecutor(max_workers=min(8, len(segments))) as pool:
        return list(pool.map(lambda s: storage.get(s.path), segments))


def _relation(storage: Storage, segments: list[SegmentFile], con: duckdb.DuckDBPyConnection
              ) -> duckdb.DuckDBPyRelation:
    parquet = [s for s in segments if s.fmt == "parquet"]
    avro = [s for s in segments if s.fmt == "avro"]
    parts: list[duckdb.DuckDBPyRelation] = []
    if parquet:
        if storage.is_local:
            storage.count_request("GET", len(parquet))  # DuckDB reads these files itself
            parts.append(con.read_parquet([s.path for s in parquet]))
        else:
            # DuckDB parses the Parquet; the bytes come through Storage, one GET per file
            # (DuckDB over fsspec would HEAD and LIST each file several times).
            parts.append(con.read_parquet([io.BytesIO(b) for b in _fetch(storage, parquet)]))
    if avro:
        # DuckDB cannot load its avro extension here: decode with fastavro, hand it Arrow.
        tables = [_decode_checked(storage, s, data)
                  for s, data in zip(avro, _fetch(storage, avro), strict=True)]
        parts.append(con.from_arrow(pa.concat_tables(tables)))
    columns = ", ".join(f'"{f.name}"' for f in MARKER_COLUMNS)
    relation = parts[0].select(columns)
    for part in parts[1:]:
        relation = relation.union(part.select(columns))
    return relation


# One row per marker, merged as :func:`dedupe` merges them.
_MERGE_SQL = (
    f"SELECT {', '.join(KEY_COLUMNS)}, "
    + ", ".join(f"arg_max({d}, created_at) FILTER (WHERE {d} IS NOT NULL) AS {d}"
                for d in DETAIL_KEYS)
    + ", min(created_at) AS created_at FROM s GROUP BY ALL")  # no ORDER BY: 3/4 of the cost


def read_batched(storage: Storage, instant: str, con: duckdb.DuckDBPyConnection
                 ) -> duckdb.DuckDBPyRelation:
    """The markers of a BATCHED folder as a DuckDB relation of MARKER_COLUMNS, one row
    per marker. The rows are materialized, so the relation stays valid after a later
    compaction deletes the segments it came from."""

    def read(segments: list[SegmentFile]) -> duckdb.DuckDBPyRelation:
        if not segments:
            return con.from_arrow(MARKER_COLUMNS.empty_table())
        try:
            relation = _relation(storage, segments, con).query("s", _MERGE_SQL)
            assert relation is not None
            rows = relation.to_arrow_table()
        except (FileNotFoundError, duckdb.Error, StorageError) as exc:
            if list_segments(storage, instant) != segments:
                raise SegmentsChanged from exc  # compaction replaced one meanwhile
            _raise_unreadable(storage, segments, exc)
            raise
        relation = con.from_arrow(rows.cast(MARKER_COLUMNS))
        check_marker_rows(relation, storage.url(marker_folder(storage, instant)),
                          functools.partial(_segment_holding, storage, segments))
        return relation

    return read_listed(storage, instant, read)


def _raise_unreadable(storage: Storage, segments: list[SegmentFile], exc: Exception) -> None:
    """CorruptTableError naming the first segment that does not decode, if one does not
    (a truncated, empty or foreign file); returns when every segment decodes."""
    if isinstance(exc, FileNotFoundError) or (isinstance(exc, StorageError)
                                              and "is unreadable" not in str(exc)):
        return
    for segment in segments:
        try:
            decode(storage.get(segment.path), segment.fmt)
        except FileNotFoundError:
            return
        except Exception as error:
            raise CorruptTableError(storage.url(segment.path), f"the segment is unreadable: "
                                    f"{type(error).__name__}: {error}") from None


def _segment_holding(storage: Storage, segments: list[SegmentFile], partition: str | None,
                     file_name: str | None) -> str | None:
    """The segment that holds a marker row (to name it in an error); None if not found."""
    for segment in segments:
        try:
            table = read_segment(storage, segment)
        except (OSError, StorageError):
            continue
        pairs = zip(table.column("partition").to_pylist(), table.column("file").to_pylist())
        if (partition, file_name) in pairs:
            return storage.url(segment.path)
    return None


def read_batched_table(storage: Storage, instant: str) -> pa.Table:
    """The markers of a BATCHED folder as Arrow (MARKER_COLUMNS); raises if the folder was
    written by another mechanism."""
    mechanism = read_marker_type(storage, instant)
    if mechanism is None:
        return MARKER_COLUMNS.empty_table()
    if mechanism != BATCHED:
        raise MarkerTypeError(f"the markers of instant {instant} are {mechanism}, not BATCHED")
    return read_batched(storage, instant, duckdb.connect()).to_arrow_table()

