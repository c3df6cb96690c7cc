"""An instant's markers as DuckDB reads them: a consistent snapshot, scanned lazily.

Reconcile, rollback and the ``markers`` view need the marker rows of an instant in DuckDB,
without one Python object per marker and without first merging every row into a
materialized table (at a million markers that costs seconds and a gigabyte). A marker
server may compact the folder meanwhile: it writes the merged segment, then deletes the
ones it merged, so a query that reads the segment files in place fails when one vanishes
under it.

:func:`scan_markers` takes a snapshot first: it lists the segments and copies each
Parquet segment's bytes (one GET each; compressed, about 1.2 bytes a marker) into a
private temporary folder, listing again when compaction deleted a listed segment before
its GET. Every marker is in the snapshot (compaction writes before it deletes), and no
compaction can touch the copies: DuckDB then scans them lazily, as often as needed, and a
view over them stays valid. The folder is removed when the DuckDB connection (with every
relation made from it) is gone. Avro segments and direct markers are decoded to Arrow
(Avro is not the default format; a direct marker is a name from a listing).

The rows are unmerged: a marker may have several (a details update, a compaction that
crashed before its delete). :meth:`MarkerScan.merged` merges them, lazily.
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.errors import CorruptTableError, MarkerTypeError
from markerstore.markers.base import (
    BATCHED,
    DIRECT,
    MARKER_COLUMNS,
    marker_folder,
    read_marker_type,
)
from markerstore.markers.direct import DirectWriteMarkers
from markerstore.markers.rows import PATH_SQL, check_marker_rows, literal
from markerstore.markers.segments import (
    DETAIL_KEYS,
    KEY_COLUMNS,
    SegmentFile,
    decode,
    read_listed,
)
from markerstore.storage import Storage

log = logging.getLogger(__name__)

_COLUMNS = ", ".join(f'"{f.name}"' for f in MARKER_COLUMNS)
# One row per marker: the earliest created_at and of each detail its latest non-null value
# (as segments.dedupe merges them).
_MERGED_COLUMNS = (
    f"{', '.join(KEY_COLUMNS)}, "
    + ", ".join(f"arg_max({d}, created_at) FILTER (WHERE {d} IS NOT NULL) AS {d}"
                for d in DETAIL_KEYS)
    + ", min(created_at) AS created_at")


def merge_sql(source: str) -> str:
    """The rows of `source` (SQL after FROM) merged into one row per marker."""
    return f"SELECT {_MERGED_COLUMNS} FROM {source} GROUP BY ALL"


@dataclass
class MarkerScan:
    """A snapshot of one instant's marker rows; see the module docstring."""

    storage: Storage
    instant: str
    mechanism: str
    files: list[str] = field(default_factory=list)  # local copies of Parquet segments
    segments: list[SegmentFile] = field(default_factory=list)  # where each copy came from
    arrow: pa.Table | None = None  # rows that are not in a Parquet segment
    folder: str | None = None
    _unique: bool | None = None
    _rows: int | None = None

    @property
    def where(self) -> str:
        return self.storage.url(marker_folder(self.storage, self.instant))

    def source(self, con: duckdb.DuckDBPyConnection) -> str:
        """SQL text of every row (unmerged), a parenthesized query with columns
        MARKER_COLUMNS and `path`, to put after FROM in a query run by `con` (the rows that
        are not in a Parquet segment are registered in `con`). One statement, not a chain
        of relations: DuckDB binds each relation it builds, about a millisecond each."""
        self._bind(con)
        parts = []
        if self.files:
            listed = ", ".join(literal(f) for f in self.files)
            parts.append(f"SELECT {_COLUMNS} FROM read_parquet([{listed}])")
        arrow = self.arrow
        if arrow is None or not arrow.num_rows:
            arrow = None if parts else MARKER_COLUMNS.empty_table()  # no row at all
        if arrow is not None:
            name = f"markerstore_rows_{id(self):x}"
            con.register(name, arrow)
            parts.append(f"SELECT {_COLUMNS} FROM {name}")
        return f"(SELECT *, {PATH_SQL} AS path FROM ({' UNION ALL '.join(parts)}))"

    def rows(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        """Every row (unmerged), columns MARKER_COLUMNS and `path`, read lazily. The
        snapshot's files stay as long as `con` or a relation made from it."""
        return con.sql(f"SELECT * FROM {self.source(con)}")

    def unique(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Whether no marker has two rows (then the rows are the merged rows). One pass over
        64-bit hashes of the keys, exact: if the hashes are all distinct, so are the keys;
        if not (a duplicate, or a collision), the answer is False and the rows are merged.
        Asked once per snapshot; the same pass counts the rows."""
        if self._unique is None:
            answer = con.sql(f"SELECT count(*), count(DISTINCT hash({', '.join(KEY_COLUMNS)})) "
                             f"FROM {self.source(con)}").fetchall()[0]
            self._rows, self._unique = int(answer[0]), answer[0] == answer[1]
        return self._unique

    def count(self, con: duckdb.DuckDBPyConnection) -> int:
        """How many markers (distinct keys) the snapshot holds."""
        if self.unique(con):
            assert self._rows is not None
            return self._rows
        answer = con.sql(f"SELECT count(*) FROM (SELECT DISTINCT {', '.join(KEY_COLUMNS)} "
                         f"FROM {self.source(con)})").fetchall()[0]
        return int(answer[0])

    def merged_source(self, con: duckdb.DuckDBPyConnection) -> str:
        """As :meth:`source`, one row per marker: the rows as they are when no marker has
        two (see :meth:`unique`), else merged by a GROUP BY."""
        if self.unique(con):
            return self.source(con)
        merge = merge_sql(self.source(con))
        return f"(SELECT {_COLUMNS}, {PATH_SQL} AS path FROM ({merge}))"

    def merged(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        """One row per marker (columns MARKER_COLUMNS and `path`), lazily."""
        return con.sql(f"SELECT * FROM {self.merged_source(con)}")

    def locate(self, partition: str | None, file_name: str | None) -> str | None:
        """The segment that holds a marker row (to name it in an error); None if none."""
        for segment, copy in zip(self.segments, self.files, strict=True):
            table = pq.read_table(copy, columns=["partition", "file"])
            pairs = zip(table.column("partition").to_pylist(),
                        table.column("file").to_pylist())
            if (partition, file_name) in pairs:
                return self.storage.url(segment.path)
        return None

    def check(self, con: duckdb.DuckDBPyConnection) -> None:
        """check_marker_rows over every row (one pass)."""
        check_marker_rows(self.rows(con), self.where, self.locate)

    def _bind(self, con: duckdb.DuckDBPyConnection) -> None:
        if self.folder is not None:
            weakref.finalize(con, shutil.rmtree, self.folder, True)

    def close(self) -> None:
        """Remove the snapshot's files now (a connection that read them must be done)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def scan_markers(storage: Storage, instant: str, *, untyped: str | None = None
                 ) -> MarkerScan | None:
    """A snapshot of the instant's markers, or None if it has no marker folder.
    `untyped`: the mechanism of a folder without MARKERS.type (see read_marker_type)."""
    mechanism = read_marker_type(storage, instant, untyped=untyped)
    if mechanism is None:
        return None
    scan = MarkerScan(storage, instant, mechanism)
    if mechanism == DIRECT:
        scan.arrow = DirectWriteMarkers(storage, instant, initialize=False).to_arrow(
            untyped=untyped)
    elif mechanism == BATCHED:
        _snapshot_segments(scan)
    else:
        raise MarkerTypeError(f"no reader for {mechanism} markers is installed")
    return scan


def _snapshot_segments(scan: MarkerScan) -> None:
    storage, instant = scan.storage, scan.instant
    fetched = read_listed(storage, instant,
                          lambda segments: [(s, storage.get(s.path)) for s in segments])
    parquet = [(s, data) for s, data in fetched if s.fmt == "parquet"]
    avro = [_decoded(storage, s, data) for s, data in fetched if s.fmt != "parquet"]
    if avro:
        scan.arrow = pa.concat_tables(avro)
    if parquet:
        scan.folder = tempfile.mkdtemp(prefix="markerstore-markers-")
        for segment, data in parquet:
            _check_parquet(storage, segment, data)
            copy = Path(scan.folder) / segment.name
            copy.write_bytes(data)
            scan.files.append(str(copy))
            scan.segments.append(segment)


def _decoded(storage: Storage, segment: SegmentFile, data: bytes) -> pa.Table:
    try:
        return decode(data, segment.fmt)
    except Exception as exc:
        raise CorruptTableError(storage.url(segment.path), f"the segment is unreadable: "
                                f"{type(exc).__name__}: {exc}") from None


def _check_parquet(storage: Storage, segment: SegmentFile, data: bytes) -> None:
    """CorruptTableError naming a Parquet segment whose footer does not read, or whose
    columns are not the marker columns (a truncated, empty or foreign file)."""
    try:
        schema = pq.read_schema(io.BytesIO(data))
        for f in MARKER_COLUMNS:
            have = schema.field(f.name).type
            if have != f.type and not (pa.types.is_timestamp(have)
                                       and pa.types.is_timestamp(f.type)):
                raise ValueError(f"column {f.name} is {have}, not {f.type}")
    except Exception as exc:
        raise CorruptTableError(storage.url(segment.path), f"the segment is unreadable: "
                                f"{type(exc).__name__}: {exc}") from None


@contextlib.contextmanager
def scanned(storage: Storage, instant: str, *, untyped: str | None = None
            ) -> Iterator[MarkerScan | None]:
    """scan_markers as a context: the snapshot's files are removed on leaving."""
    scan = scan_markers(storage, instant, untyped=untyped)
    try:
        yield scan
    finally:
        if scan is not None:
            scan.close()


def read_markers(storage: Storage, instant: str, con: duckdb.DuckDBPyConnection
                 ) -> duckdb.DuckDBPyRelation | None:
    """The instant's markers as a DuckDB relation, one row per marker (columns
    MARKER_COLUMNS plus `path`, the data file relative to the table), every row checked;
    None if the instant has no marker folder. Lazy over a snapshot (see the module)."""
    scan = scan_markers(storage, instant)
    if scan is None:
        return None
    scan.check(con)
    return scan.merged(con)


def empty_rows() -> pa.Table:
    """No marker row: MARKER_COLUMNS and `path`."""
    return MARKER_COLUMNS.empty_table().append_column("path", pa.array([], pa.string()))


def empty_markers(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    return con.from_arrow(empty_rows())
