"""Reading markers of any mechanism into DuckDB; reconcile and rollback from them.

Reconcile (at commit): invalid files = CREATE/MERGE markers minus the files the winning
tasks reported, minus any file a completed commit references; they are deleted in
parallel, and a failed delete fails the commit.

APPEND markers: an APPEND marker names a file that may already hold committed data (an
append to an existing file). Reconcile never deletes such a file. Rollback deletes it
only when no completed commit references it; otherwise it is left and reported in the
rollback's ``kept_append_files``.

Rollback (of a failed instant): fence the instant (no commit of it can complete after),
delete every data file its markers name (with the APPEND rule above), delete the marker
folder, record the rollback (with what the caller's recovery cleaned up first: the commit
protocol aborts pending uploads). Every step is idempotent, so an interrupted rollback is
finished by the next.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from markerstore.errors import CorruptTableError, ReconcileError
from markerstore.markers.base import (
    DIRECT,
    MARKER_COLUMNS,
    marker_folder,
    read_marker_type,
)
from markerstore.markers.direct import DirectWriteMarkers
from markerstore.paths import checked_paths, path_problem
from markerstore.storage import Storage
from markerstore.timeline import Timeline

log = logging.getLogger(__name__)

MarkerReader = Callable[[Storage, str, duckdb.DuckDBPyConnection], duckdb.DuckDBPyRelation]

_READERS: dict[str, MarkerReader] = {}
_SELF_CHECKED: set[str] = set()  # mechanisms whose reader checks the rows it returns


def register_reader(mechanism: str, reader: MarkerReader, *, checks_rows: bool = False
                    ) -> None:
    """How to read the markers a mechanism wrote, as a DuckDB relation of MARKER_COLUMNS.
    `checks_rows`: the reader runs :func:`check_marker_rows` on what it returns itself,
    so read_markers does not run it a second time (a pass over every row)."""
    _READERS[mechanism] = reader
    if checks_rows:
        _SELF_CHECKED.add(mechanism)
    else:
        _SELF_CHECKED.discard(mechanism)


# Rows whose file name or IO type cannot be a marker's (the partition is checked apart:
# there are few distinct ones). A file name is one path segment.
_BAD_ROWS_SQL = (
    "SELECT partition, file, io_type FROM m WHERE partition IS NULL OR file IS NULL "
    "OR io_type IS NULL OR io_type NOT IN ('CREATE', 'MERGE', 'APPEND') "
    "OR file IN ('', '.', '..') OR regexp_matches(file, '[/\\\\\\x00-\\x1f\\x7f]') LIMIT 1")


def check_marker_rows(relation: duckdb.DuckDBPyRelation, where: str,
                      locate: Callable[[str | None, str | None], str | None] | None = None
                      ) -> None:
    """CorruptTableError if a marker row read from storage names no valid table-relative
    data file (a partition with '..', an absolute one, a file name with a separator, an
    unknown IO type, ...). `where` names the marker folder; `locate(partition, file)`
    may name the very file that holds the bad row."""
    bad = relation.query("m", _BAD_ROWS_SQL)
    assert bad is not None
    rows = bad.fetchall()
    entry: tuple[Any, Any, Any] | None = rows[0] if rows else None
    if entry is None:
        parts = relation.query("m", "SELECT DISTINCT partition FROM m")
        assert parts is not None
        for (partition,) in parts.fetchall():
            if path_problem(partition, allow_empty=True) is not None:
                found = relation.query(
                    "m", "SELECT partition, file, io_type FROM m WHERE partition = "
                         + _literal(partition) + " LIMIT 1")
                assert found is not None
                entry = found.fetchall()[0]
                break
    if entry is None:
        return
    partition, file_name, io_type = entry
    problem = (path_problem(partition, allow_empty=True) if partition is not None
               else "is null")
    what = f"partition {partition!r} {problem}" if problem else \
        f"marker (partition {partition!r}, file {file_name!r}, io_type {io_type!r}) does " \
        "not name one data file of the table"
    source = (locate(partition, file_name) if locate is not None else None) or where
    raise CorruptTableError(source, what)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _read_direct(storage: Storage, instant: str, con: duckdb.DuckDBPyConnection
                 ) -> duckdb.DuckDBPyRelation:
    table = DirectWriteMarkers(storage, instant, initialize=False).to_arrow()
    return con.from_arrow(table)


register_reader(DIRECT, _read_direct)


def _load_mechanisms() -> None:
    # The batched reader lives with the marker server; import it if it is installed.
    with contextlib.suppress(ImportError):
        import markerstore.markers.segments  # noqa: F401


def read_markers(storage: Storage, instant: str, con: duckdb.DuckDBPyConnection
                 ) -> duckdb.DuckDBPyRelation | None:
    """The instant's markers as a DuckDB relation (columns MARKER_COLUMNS plus `path`, the
    data file relative to the table), or None if the instant has no marker folder."""
    mechanism = read_marker_type(storage, instant)
    if mechanism is None:
        return None
    if mechanism not in _READERS:
        _load_mechanisms()
    if mechanism not in _READERS:
        from markerstore.errors import MarkerTypeError

        raise MarkerTypeError(f"no reader for {mechanism} markers is installed")
    relation = _READERS[mechanism](storage, instant, con)
    if mechanism not in _SELF_CHECKED:
        check_marker_rows(relation, storage.url(marker_folder(storage, instant)))
    columns = ", ".join(f'"{f.name}"' for f in MARKER_COLUMNS)
    return relation.query(
        "m", f"SELECT {columns}, CASE WHEN partition = '' THEN file "
             f"ELSE partition || '/' || file END AS path FROM m")


def empty_markers(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    table = MARKER_COLUMNS.empty_table().append_column("path", pa.array([], pa.string()))
    return con.from_arrow(table)


def referenced_files(timeline: Timeline) -> set[str]:
    """Every data file (relative path) a completed commit references."""
    paths: set[str] = set()
    for _, metadata in timeline.completed():  # each checked against its schema when read
        for entry in metadata.get("files", []):
            paths.add(entry["path"])
    return paths


def _paths_table(paths: Iterable[str]) -> pa.Table:
    return pa.table({"path": pa.array(sorted(set(paths)), pa.string())})


@dataclass
class ReconcileResult:
    """What reconcile found and did."""

    instant: str
    markers: int = 0
    invalid_files: list[str] = field(default_factory=list)

    @property
    def files_cleaned(self) -> int:
        return len(self.invalid_files)


def reconcile(storage: Storage, timeline: Timeline, instant: str,
              committed: Iterable[str] | pa.Array | pa.ChunkedArray,
              *, parallelism: int = 100) -> ReconcileResult:
    """Delete the data files of `instant` that have a CREATE/MERGE marker but were not
    reported by a winning task. Raises ReconcileError (and deletes nothing) if a
    reported file has no marker, or if a delete fails. `committed` (relative paths,
    checked by the caller) may be an Arrow array: DuckDB anti-joins it against the
    markers as it is, with no Python object per file."""
    con = duckdb.connect()
    markers = read_markers(storage, instant, con)
    if markers is None:
        markers = empty_markers(con)
    con.register("markers_rel", markers.to_arrow_table())
    if isinstance(committed, (pa.Array, pa.ChunkedArray)):
        con.register("committed", pa.table({"path": committed}))
    else:
        con.register("committed", _paths_table(committed))
    con.register("referenced", _paths_table(referenced_files(timeline)))
    unmarked = [r[0] for r in con.sql(
        "SELECT path FROM committed WHERE path NOT IN (SELECT path FROM markers_rel) "
        "ORDER BY path").fetchall()]
    if unmarked:
        raise ReconcileError(
            f"{len(unmarked)} reported file(s) of instant {instant} have no marker, so the "
            f"write broke the marker-first rule: {', '.join(unmarked[:5])}")
    invalid = [r[0] for r in con.sql(
        "SELECT DISTINCT path FROM markers_rel WHERE io_type IN ('CREATE', 'MERGE') "
        "AND path NOT IN (SELECT path FROM committed) "
        "AND path NOT IN (SELECT path FROM referenced) ORDER BY path").fetchall()]
    total = con.sql("SELECT count(*) FROM markers_rel").fetchall()[0][0]
    result = ReconcileResult(instant, int(total), invalid)
    checked_paths(invalid, storage.url(marker_folder(storage, instant)), what="marked file")
    if invalid:
        try:
            storage.delete_many([storage.path(p) for p in invalid], parallelism)
        except Exception as exc:
            raise ReconcileError(f"could not delete the invalid files of instant {instant}; "
                                 f"the commit must not complete: {exc}") from exc
        log.info("instant %s: deleted %d invalid file(s)", instant, len(invalid))
    return result


@dataclass
class RollbackResult:
    """What a rollback did; `noop` when the instant was already rolled back,
    `rolled_forward` when recovery completed it instead."""

    instant: str
    deleted_files: list[str] = field(default_factory=list)
    kept_append_files: list[str] = field(default_factory=list)
    hooks: dict[str, Any] = field(default_factory=dict)
    noop: bool = False
    rolled_forward: bool = False  # recovery completed the instant instead

    def to_dict(self) -> dict[str, Any]:
        return {"instant": self.instant, "deleted_files": self.deleted_files,
                "kept_append_files": self.kept_append_files, "noop": self.noop,
                "rolled_forward": self.rolled_forward,
                **({"cleanup": self.hooks} if self.hooks else {})}


def read_marker_rows(storage: Storage, instant: str) -> pa.Table | None:
    """The instant's marker rows (MARKER_COLUMNS), or None if it has no marker folder."""
    con = duckdb.connect()
    markers = read_markers(storage, instant, con)
    return None if markers is None else markers.to_arrow_table().drop_columns(["path"])


def rollback_from_markers(storage: Storage, timeline: Timeline, instant: str, *,
                          parallelism: int = 100, cleanup: Mapping[str, Any] | None = None
                          ) -> RollbackResult:
    """Steps 2-5 of a rollback, after the instant was fenced with claim_rollback.
    `cleanup`: what the caller's recovery did before (kept in the rollback record)."""
    con = duckdb.connect()
    markers = read_markers(storage, instant, con)
    result = RollbackResult(instant)
    if markers is not None:
        rows = markers.to_arrow_table()
        con.register("markers_rel", rows)
        con.register("referenced", _paths_table(referenced_files(timeline)))
        result.deleted_files = [r[0] for r in con.sql(
            "SELECT DISTINCT path FROM markers_rel "
            "WHERE path NOT IN (SELECT path FROM referenced) ORDER BY path").fetchall()]
        result.kept_append_files = [r[0] for r in con.sql(
            "SELECT DISTINCT path FROM markers_rel WHERE io_type = 'APPEND' "
            "AND path IN (SELECT path FROM referenced) ORDER BY path").fetchall()]
        checked_paths(result.deleted_files, storage.url(marker_folder(storage, instant)),
                      what="marked file")
        storage.delete_many([storage.path(p) for p in result.deleted_files], parallelism)
    result.hooks.update({name: value for name, value in (cleanup or {}).items() if value})
    storage.delete_dir(marker_folder(storage, instant), parallelism)
    timeline.finish_rollback(instant, {"deleted_files": result.deleted_files,
                                       "kept_append_files": result.kept_append_files,
                                       "cleanup": result.hooks})
    return result
