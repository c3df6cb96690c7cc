"""Reading markers of any mechanism into DuckDB; reconcile and rollback from them.

Reconcile (at commit): invalid files = CREATE/MERGE markers minus the files the winning
tasks reported, minus any file a completed commit references; they are deleted in
parallel, and a failed delete fails the commit. The committed files come as Arrow and are
anti-joined in DuckDB against a lazy scan of the marker rows (:mod:`.scan`), in one pass:
no Python object per marker or per committed file, no merged copy of the markers.

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

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.duck import cursor
from markerstore.errors import CorruptTableError, ReconcileError
from markerstore.markers.base import DIRECT, marker_folder
from markerstore.markers.rows import check_marker_rows, check_row_table
from markerstore.markers.scan import (
    MarkerScan,
    empty_markers,
    empty_rows,
    read_markers,
    scanned,
)
from markerstore.paths import path_problem
from markerstore.paths_arrow import bad_paths
from markerstore.storage import Storage
from markerstore.timeline import Timeline

log = logging.getLogger(__name__)

__all__ = [
    "ReconcileResult", "RollbackResult", "check_marker_rows", "clean_markers_of",
    "empty_markers", "read_marker_rows", "read_markers", "reconcile", "referenced_files",
    "rollback_from_markers",
]

DELETE_CHUNK = 10_000  # paths turned into Python strings at a time, to be deleted
RECORD_FILES = 10_000  # paths of each list a rollback record names (its counts are exact)



def referenced_files(timeline: Timeline) -> set[str]:
    """Every data file (relative path) a completed commit references."""
    paths: set[str] = set()
    for _, metadata in timeline.completed():  # each checked against its schema when read
        for entry in metadata.get("files", []):
            paths.add(entry["path"])
    return paths


def _strings(paths: Iterable[str] | pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(paths, pa.ChunkedArray):
        return paths.combine_chunks().cast(pa.string())
    if isinstance(paths, pa.Array):
        return paths.cast(pa.string())
    return pa.array(list(paths), pa.string())


def _not_referenced(paths: pa.Array, timeline: Timeline) -> pa.Array:
    """`paths` minus the files a completed commit references (the timeline is read only
    when there is a path to delete)."""
    if len(paths) == 0:
        return paths
    referenced = referenced_files(timeline)
    if not referenced:
        return paths
    keep = pc.invert(pc.is_in(paths, value_set=pa.array(sorted(referenced), pa.string())))
    return paths.filter(keep)


def _check_paths(paths: pa.Array, where: str) -> None:
    """CorruptTableError naming the first of `paths` that is not table-relative."""
    bad = bad_paths(paths)
    if pc.any(bad).as_py():
        first = paths.filter(bad)[0].as_py()
        raise CorruptTableError(where, f"marked file {first!r} "
                                       f"{path_problem(first) or 'is not table-relative'}")


def delete_paths(storage: Storage, paths: pa.Array, parallelism: int) -> None:
    """Delete the table-relative `paths` (checked by the caller), a chunk at a time. The
    folders they are in are checked first, all of them before the first delete (on local
    disk: no symbolic link out of the table; see Storage.check_contained)."""
    if len(paths) == 0:
        return
    parents = pc.replace_substring_regex(paths, r"/?[^/]*$", "")
    firsts = pa.table({"parent": parents, "path": paths}).group_by(
        "parent", use_threads=False).aggregate([("path", "first")])
    storage.check_contained([storage.path(p) for p in firsts.column("path_first").to_pylist()])
    for offset in range(0, len(paths), DELETE_CHUNK):
        chunk = paths.slice(offset, DELETE_CHUNK).to_pylist()
        storage.delete_many([storage.path(p) for p in chunk], parallelism)


@dataclass
class ReconcileResult:
    """What reconcile found and did; `invalid` is Arrow (sorted paths)."""

    instant: str
    markers: int = 0
    invalid: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))

    @property
    def invalid_files(self) -> list[str]:
        return list(self.invalid.to_pylist())

    @property
    def files_cleaned(self) -> int:
        return len(self.invalid)


# Committed files without a marker (`marked` null), and marker rows that are not committed
# and not APPEND (the files to delete, and any row whose IO type or names are not a
# marker's), in one join of the lazy marker rows with the committed files.
_MISMATCH_SQL = (
    "SELECT m.partition, m.file, m.io_type, m.path, c.path AS committed, m.marked "
    "FROM (SELECT partition, file, io_type, path, true AS marked FROM {marks}) m "
    "FULL JOIN committed c ON m.path = c.path "
    "WHERE m.marked IS NULL OR (c.path IS NULL AND (m.io_type IS DISTINCT FROM 'APPEND' "
    "OR m.path IS NULL))")


def reconcile(storage: Storage, timeline: Timeline, instant: str,
              committed: Iterable[str] | pa.Array | pa.ChunkedArray,
              *, parallelism: int = 100) -> ReconcileResult:
    """Delete the data files of `instant` that have a CREATE/MERGE marker but were not
    reported by a winning task. Raises ReconcileError (and deletes nothing) if a
    reported file has no marker, or if a delete fails. `committed` (relative paths,
    checked by the caller) may be an Arrow array: DuckDB anti-joins it against the
    markers as it is, with no Python object per file."""
    con = cursor()
    con.register("committed", pa.table({"path": _strings(committed)}))
    with scanned(storage, instant) as scan:
        marks = scan.source(con) if scan is not None else _empty_source(con)
        odd = con.sql(_MISMATCH_SQL.format(marks=marks)).to_arrow_table()
        total = scan.count(con) if scan is not None else 0
        unmarked = odd.filter(pc.is_null(odd.column("marked"))).column("committed")
        if len(unmarked):
            first = unmarked.take(pc.sort_indices(unmarked)).slice(0, 5).to_pylist()
            raise ReconcileError(
                f"{len(unmarked)} reported file(s) of instant {instant} have no marker, so "
                f"the write broke the marker-first rule: {', '.join(first)}")
        rows = odd.filter(pc.fill_null(odd.column("marked"), False))
        check_row_table(rows, storage.url(marker_folder(storage, instant)),
                        scan.locate if scan is not None else None)
        invalid = _not_referenced(pc.unique(rows.column("path").combine_chunks()), timeline)
    invalid = invalid.take(pc.sort_indices(invalid))
    result = ReconcileResult(instant, total, invalid)
    if len(invalid):
        try:
            delete_paths(storage, invalid, parallelism)
        except CorruptTableError:
            raise  # refused before the first delete: the table's state is at fault
        except Exception as exc:
            raise ReconcileError(f"could not delete the invalid files of instant {instant}; "
                                 f"the commit must not complete: {exc}") from exc
        log.info("instant %s: deleted %d invalid file(s)", instant, len(invalid))
    return result


def _no_paths() -> pa.Array:
    return pa.array([], pa.string())


@dataclass
class RollbackResult:
    """What a rollback did: `deleted` and `kept` (APPEND files a completed commit
    references) are Arrow arrays of sorted table-relative paths, one Python string per
    file only when asked (`deleted_files`, `kept_append_files`, `to_dict`); `noop` when
    the instant was already rolled back, `rolled_forward` when recovery completed it."""

    instant: str
    deleted: pa.Array = field(default_factory=_no_paths)
    kept: pa.Array = field(default_factory=_no_paths)
    hooks: dict[str, Any] = field(default_factory=dict)
    noop: bool = False
    rolled_forward: bool = False  # recovery completed the instant instead

    @property
    def deleted_files(self) -> list[str]:
        return list(self.deleted.to_pylist())

    @property
    def kept_append_files(self) -> list[str]:
        return list(self.kept.to_pylist())

    def to_dict(self) -> dict[str, Any]:
        return {"instant": self.instant, "deleted_files": self.deleted_files,
                "kept_append_files": self.kept_append_files, "noop": self.noop,
                "rolled_forward": self.rolled_forward,
                **({"cleanup": self.hooks} if self.hooks else {})}

    def record(self) -> dict[str, Any]:
        """The rollback record (``<instant>.rollback``): exact counts, and the first
        RECORD_FILES paths of each list, so that rolling back a million markers does not
        write a million names into the timeline."""
        return {"deleted_count": len(self.deleted),
                "deleted_files": self.deleted.slice(0, RECORD_FILES).to_pylist(),
                "kept_count": len(self.kept),
                "kept_append_files": self.kept.slice(0, RECORD_FILES).to_pylist(),
                "cleanup": self.hooks}


def _empty_source(con: duckdb.DuckDBPyConnection) -> str:
    con.register("no_markers", empty_rows())
    return "no_markers"


def _rollback_sets(scan: MarkerScan, con: duckdb.DuckDBPyConnection, timeline: Timeline
                   ) -> tuple[pa.Array, pa.Array]:
    """(files to delete, APPEND files kept) of a scan, every row checked first."""
    scan.check(con)
    marks = scan.source(con)
    paths = con.sql(f"SELECT DISTINCT path FROM {marks} ORDER BY path").to_arrow_table()
    paths_array = paths.column("path").combine_chunks()
    deleted = _not_referenced(paths_array, timeline)
    kept = _no_paths()
    if len(deleted) < len(paths_array):  # some are referenced: the APPEND ones are kept
        appended = con.sql(f"SELECT DISTINCT path FROM {marks} WHERE io_type = 'APPEND' "
                           "ORDER BY path").to_arrow_table().column("path").combine_chunks()
        kept = appended.filter(pc.invert(pc.is_in(appended, value_set=deleted)))
    return deleted, kept


def read_marker_rows(storage: Storage, instant: str, *, pending_only: bool = False
                     ) -> pa.Table | None:
    """The instant's marker rows (MARKER_COLUMNS, every row checked), or None if it has
    no marker folder; `pending_only`: only the rows that record a pending upload."""
    con = cursor()
    with scanned(storage, instant) as scan:
        if scan is None:
            return None
        scan.check(con)
        where = " WHERE pending_upload IS NOT NULL" if pending_only else ""
        return con.sql(f"SELECT * EXCLUDE (path) FROM {scan.merged_source(con)}{where}"
                       ).to_arrow_table()


def _delete_marked(storage: Storage, timeline: Timeline, instant: str, parallelism: int,
                   *, untyped: str | None = None) -> tuple[pa.Array, pa.Array]:
    """Delete every file the instant's markers name that no completed commit references
    (APPEND files a commit references are kept); returns (deleted, kept). Every row is
    checked before the first delete."""
    con = cursor()
    with scanned(storage, instant, untyped=untyped) as scan:
        if scan is None:
            return _no_paths(), _no_paths()
        deleted, kept = _rollback_sets(scan, con, timeline)
        _check_paths(deleted, storage.url(marker_folder(storage, instant)))
        delete_paths(storage, deleted, parallelism)
    return deleted, kept


def rollback_from_markers(storage: Storage, timeline: Timeline, instant: str, *,
                          parallelism: int = 100, cleanup: Mapping[str, Any] | None = None
                          ) -> RollbackResult:
    """Steps 2-5 of a rollback, after the instant was fenced with claim_rollback.
    `cleanup`: what the caller's recovery did before (kept in the rollback record)."""
    result = RollbackResult(instant)
    result.deleted, result.kept = _delete_marked(storage, timeline, instant, parallelism)
    result.hooks.update({name: value for name, value in (cleanup or {}).items() if value})
    storage.delete_dir(marker_folder(storage, instant), parallelism)
    timeline.finish_rollback(instant, result.record())
    return result


def clean_markers_of(storage: Storage, timeline: Timeline, instant: str, *,
                     parallelism: int = 100) -> pa.Array:
    """Delete the marker folder a terminal (completed or rolled-back) instant left, after
    the files its markers name that no completed commit references: the deletes of a
    rollback, run again. A task that outlived its instant (a zombie writer) may have added
    a marker and its file after the commit or rollback; deleting the folder alone would
    leave that file behind, named by nothing. Returns the files deleted."""
    folder = marker_folder(storage, instant)
    if storage.is_link(folder):  # planted: the link goes, what it leads to is not read
        storage.delete_dir(folder, parallelism)
        return _no_paths()
    # Its MARKERS.type may be gone with the rollback: then a zombie's markers are direct.
    deleted, _ = _delete_marked(storage, timeline, instant, parallelism, untyped=DIRECT)
    if len(deleted):
        log.warning("instant %s is terminal, but its leftover markers named %d file(s) that "
                    "no commit references (a task outlived the instant); deleted them",
                    instant, len(deleted))
    storage.delete_dir(folder, parallelism)
    return deleted
