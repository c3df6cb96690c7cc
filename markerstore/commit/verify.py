"""`verify`: an fsck of one table: what is on storage against what the timeline says.

Findings (each a :class:`Finding`: kind, path, size, instant, action):

``orphan_file``        a file outside ``.markerstore/`` that no completed commit references
                       and no inflight instant's markers name
``missing_file``       a file a completed commit references that is not on storage
``size_mismatch``      ... that is there with another size than the commit recorded
``replaced_file``      a file a later commit replaced more than the retention ago (or an
                       expire removed) that is still there and no format's retained
                       version references (repair deletes it; within the retention it is
                       kept for time travel, and no finding)
``orphan_upload``      (S3) an open multipart upload of this table's write whose instant
                       is terminal (or not on the timeline and older than the grace period)
``leftover_markers`` / ``leftover_plan`` / ``leftover_staging`` / ``leftover_heartbeat``
                       what a terminal instant (completed or rolled back) left behind
``corrupt_table_file`` ``.markerstore/table.json`` (the table's id) cannot be read
``format_missing_instant`` a completed instant a table format (Delta, Iceberg) does not
                       hold yet (repair publishes it, oldest first)
``format_unknown_instant`` a format version of an instant the timeline has not completed
``format_error``       a table format whose own state cannot be read (a corrupt Delta log,
                       an Iceberg catalog that does not answer) or cannot say what it
                       holds: nothing it may reference is deleted meanwhile
``format_foreign_commit`` / ``format_lost`` / ``format_catalog_lost`` / ``format_moved``
                       another tool's version or snapshot, a format's log or metadata
                       gone, Iceberg's catalog entry gone, the table moved: see
                       :mod:`markerstore.formats.repair` (repair makes the format hold the
                       timeline's files again)

And one notice, which leaves the table consistent:

``nested_table``       a folder under the table that holds its own ``.markerstore/``: another
                       table, skipped (none of its files is an orphan, none is deleted;
                       verify it on its own)

The listing streams (S3: ListObjectsV2 pages of 1,000 keys; local disk: ``os.scandir``;
elsewhere fsspec ``find``) in Arrow chunks of 10,000 rows, each written as a Parquet file
to a temporary folder; the committed files go the same way, a few commits at a time;
orphans and missing files are anti-joins in DuckDB over those files, with at most 128 MB
in memory (it spills the rest to the temporary folder). Memory stays
bounded whatever the table size: no Python object per file (except per finding), and at
most a few commits' metadata parsed at once.

Order matters against concurrent writers: the timeline is read before the listing (only
instants completed then are checked for missing files: a commit completing during the
listing may publish files the listing already passed) and again after it (what is
committed or inflight then protects files the listing saw). A file named for an instant
that was inflight is never deleted, with or without markers.

``repair`` deletes orphans older than the grace period whose name is a markerstore file
name (``..._<instant>.<ext>``), aborts orphaned uploads, deletes the leftovers (finishing
a completed instant's plan as recovery does; leftover markers after the files they name
that no commit references, as a rollback would). Without it nothing is changed.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

import duckdb
import pyarrow as pa

from markerstore import config
from markerstore.commit import s3
from markerstore.commit.cleanup import post_commit
from markerstore.commit.listing import CHUNK, LISTING, Spool, listing
from markerstore.commit.names import parse_path
from markerstore.commit.plan import PLANS_DIR, delete_plan, read_plan
from markerstore.commit.retention import expire, retention_seconds
from markerstore.commit.staging import STAGING_DIR, remove_staging_area
from markerstore.errors import ConfigError, CorruptTableError
from markerstore.formats.publish import check_formats, referenced_paths
from markerstore.formats.repair import check_outside_changes
from markerstore.markers import MARKERS_DIR, read_markers
from markerstore.option_values import duration_seconds
from markerstore.table import TABLE_FILE, Table
from markerstore.tablefile import parse_table_file, parse_table_formats
from markerstore.timeline import COMPLETED, INFLIGHT, META_DIR, REQUESTED, ROLLEDBACK, Timeline
from markerstore.timeline.heartbeat import HEARTBEAT_DIR

GRACE_DEFAULT = timedelta(days=1)
READERS = 4  # commit metadata files read in parallel (and held at once, at most)
MEMORY_LIMIT = "128MB"  # DuckDB's; beyond it the joins spill to the temporary folder
LIVE = (REQUESTED, INFLIGHT)
TERMINAL = (COMPLETED, ROLLEDBACK)
COMMITTED = pa.schema([("path", pa.string()), ("size", pa.int64()), ("instant", pa.string())])
# A file a later commit removed; `replaced_at` (ms): when a replace replaced it (it stays
# for the retention), null for what an expire removed (gone at once).
GONE = pa.schema([("path", pa.string()), ("instant", pa.string()),
                  ("replaced_at", pa.int64())])
_OURS = re.compile(r"_(\d{17})\.[A-Za-z0-9]+$")

NESTED = "nested_table"
NOTICES = frozenset({NESTED})  # reported, but the table is consistent

# Paths a completed commit's metadata says are gone (besides `replaced_files`): the error
# table passes its expire commits' files here, so verify stays free of error tables.
AbsentHook = Callable[[Mapping[str, Any]], Iterable[str]]


def parse_grace(text: str | timedelta) -> timedelta:
    """'1d', '12h', '30m', '45s', '2w', or a number of seconds ('0')."""
    if isinstance(text, timedelta):
        return text
    try:
        return timedelta(seconds=duration_seconds(text))
    except ValueError:
        raise ConfigError(f"expected a grace period like 1d, 12h, 30m, 45s or 0, got "
                          f"{text!r}") from None


@dataclass
class Finding:
    """One inconsistency, and what repair did or would do about it."""

    kind: str
    path: str
    size: int | None
    instant: str | None
    action: str
    table: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class VerifyReport:
    """What verify found in one table."""

    table: str
    repair: bool
    findings: list[Finding] = field(default_factory=list)
    files_listed: int = 0
    committed_files: int = 0
    seconds: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def consistent(self) -> bool:
        return all(f.kind in NOTICES for f in self.findings)

    def counts(self) -> dict[str, int]:
        result: dict[str, int] = {}
        for finding in self.findings:
            result[finding.kind] = result.get(finding.kind, 0) + 1
        return result


# --- what the timeline says ------------------------------------------------------------------
def _committed(table: Table, instants: list[str], spools: dict[str, Spool],
               absent: AbsentHook | None) -> int:
    """Load every completed commit's files into `committed` and the files later commits
    removed into `gone`; one commit's metadata at a time, read in parallel."""
    timeline = Timeline(table.storage)
    rows: dict[str, list[Any]] = {"path": [], "size": [], "instant": []}
    gone: dict[str, list[Any]] = {"path": [], "instant": [], "replaced_at": []}
    total = 0

    def read(instant: str) -> tuple[str, dict[str, Any]]:
        meta = timeline.commit_metadata(instant)
        getattr(timeline, "_metadata_cache", {}).pop(instant, None)
        return instant, meta

    def flush(force: bool = False) -> None:
        if rows["path"] and (force or len(rows["path"]) >= CHUNK):
            spools["committed"].add(
                pa.record_batch([rows[k] for k in COMMITTED.names], schema=COMMITTED))
            for values in rows.values():
                values.clear()
        if gone["path"] and (force or len(gone["path"]) >= CHUNK):
            spools["gone"].add(pa.record_batch([gone[k] for k in GONE.names], schema=GONE))
            for values in gone.values():
                values.clear()

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        for instant, meta in _bounded_map(pool, read, instants):
            for entry in meta.get("files", []):
                rows["path"].append(str(entry["path"]))
                rows["size"].append(entry.get("size"))
                rows["instant"].append(instant)
                total += 1
            replaced = list(meta.get("replaced_files") or [])
            removed = replaced + (list(absent(meta)) if absent is not None else [])
            gone["path"].extend(str(p) for p in removed)
            gone["instant"].extend([instant] * len(removed))
            gone["replaced_at"].extend([meta.get("timestamp")] * len(replaced)
                              + [None] * (len(removed) - len(replaced)))
            flush()
    flush(force=True)
    return total


def _bounded_map(pool: ThreadPoolExecutor, fn: Callable[[str], Any], items: list[str]
                 ) -> Iterator[Any]:
    """pool.map, in order, with at most READERS items read ahead (a commit's metadata can
    be large: never all of them in memory at once)."""
    pending: deque[Future[Any]] = deque()
    for item in items:
        pending.append(pool.submit(fn, item))
        if len(pending) >= READERS:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _live_markers(table: Table, live: list[str], con: duckdb.DuckDBPyConnection) -> None:
    """The data files the markers of live (requested, inflight) instants name."""
    for instant in live:
        relation = read_markers(table.storage, instant, con)
        if relation is not None:  # an instant id is 17 digits: safe in SQL text
            relation.project(f"path, '{instant}' AS instant").insert_into("live")


def _connect(folder: str) -> duckdb.DuckDBPyConnection:
    # At most MEMORY_LIMIT in memory; the joins spill to the temporary folder beyond it.
    con = duckdb.connect(":memory:")
    con.execute(f"SET temp_directory = '{folder}/tmp'")
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    con.execute("CREATE TABLE live (path VARCHAR, instant VARCHAR)")
    con.execute("CREATE TABLE states (instant VARCHAR, state VARCHAR, checked BOOLEAN)")
    con.execute("CREATE TABLE kept (path VARCHAR)")  # a format's retained version has it
    con.execute("CREATE TABLE format_folders (prefix VARCHAR)")  # its log, not orphans
    return con


# --- the checks ------------------------------------------------------------------------------
# Folders holding a `.markerstore/` of their own: other tables (the outermost of each).
_NESTED = f"""
CREATE TABLE nested AS
WITH found AS (
  SELECT regexp_extract(path, '^(.*?)/{META_DIR}/', 1) AS prefix, count(*) AS files
  FROM listing WHERE contains(path, '/{META_DIR}/') AND NOT starts_with(path, '{META_DIR}/')
  GROUP BY ALL)
SELECT prefix, files FROM found f
WHERE NOT EXISTS (SELECT 1 FROM found o WHERE starts_with(f.prefix, o.prefix || '/'))
ORDER BY prefix"""
_NOT_NESTED = "NOT EXISTS (SELECT 1 FROM nested n WHERE starts_with(l.path, n.prefix || '/'))"

_ORPHANS = f"""
SELECT l.path, l.size, l.mtime, regexp_extract(l.path, '{_OURS.pattern}', 1) AS named,
       s.state
FROM listing l
LEFT JOIN states s ON s.instant = regexp_extract(l.path, '{_OURS.pattern}', 1)
WHERE NOT starts_with(l.path, '{META_DIR}/')
  AND NOT EXISTS (SELECT 1 FROM committed c WHERE c.path = l.path)
  AND NOT EXISTS (SELECT 1 FROM live m WHERE m.path = l.path)
  AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.path = l.path)
  AND NOT EXISTS (SELECT 1 FROM format_folders f WHERE starts_with(l.path, f.prefix))
  AND {_NOT_NESTED}
ORDER BY l.path"""

# Replaced files within the retention are kept for time travel: no finding.
_REMOVED = f"""
SELECT l.path, l.size, min(g.instant) FROM listing l JOIN gone g USING (path)
WHERE {_NOT_NESTED} AND NOT EXISTS (SELECT 1 FROM kept k WHERE k.path = l.path)
  AND (g.replaced_at IS NULL OR g.replaced_at <= $cutoff)
GROUP BY l.path, l.size ORDER BY l.path"""

_MISSING = """
SELECT c.path, c.size, c.instant, l.size AS actual FROM committed c
JOIN states s ON s.instant = c.instant AND s.checked
LEFT JOIN listing l USING (path)
WHERE NOT EXISTS (SELECT 1 FROM gone g WHERE g.path = c.path)
  AND (l.path IS NULL OR (c.size IS NOT NULL AND l.size <> c.size))
ORDER BY c.path"""

_LEFTOVERS = f"""
SELECT kind, x.instant, count(*) AS files, sum(size) AS bytes, max(mtime) AS newest, s.state
FROM (SELECT CASE WHEN starts_with(path, '{MARKERS_DIR}/') THEN 'leftover_markers'
                  WHEN starts_with(path, '{PLANS_DIR}/') THEN 'leftover_plan'
                  WHEN starts_with(path, '{STAGING_DIR}/') THEN 'leftover_staging'
                  WHEN starts_with(path, '{HEARTBEAT_DIR}/') THEN 'leftover_heartbeat'
             END AS kind,
             regexp_extract(path, '^{META_DIR}/[a-z]+/(\\d{{17}})', 1) AS instant, size, mtime
      FROM listing WHERE starts_with(path, '{META_DIR}/')) x
LEFT JOIN states s USING (instant)
WHERE kind IS NOT NULL AND x.instant <> '' AND (s.state IS NULL OR s.state IN ('{COMPLETED}',
      '{ROLLEDBACK}'))
GROUP BY kind, x.instant, s.state ORDER BY x.instant, kind"""


class Verifier:
    """One run of verify over one table."""

    def __init__(self, table: Table, *, repair: bool = False,
                 grace: str | timedelta = GRACE_DEFAULT, absent: AbsentHook | None = None,
                 now: float | None = None) -> None:
        self.table = table
        self.storage = table.storage
        self.repair = repair
        self.grace = parse_grace(grace).total_seconds()
        self.absent = absent
        self.now = time.time() if now is None else now
        # what a replace replaced before this (ms) is past the retention
        self.cutoff_ms = int((self.now - retention_seconds(table)) * 1000)
        self.report = VerifyReport(self.storage.url(), repair)
        self.states: dict[str, str] = {}
        self.nested: list[str] = []  # prefixes of nested tables ("archive/")
        self.unreadable_format: str | None = None  # a format whose retained files are unknown

    def _old(self, mtime: float | None) -> bool:
        return mtime is not None and self.now - mtime >= self.grace

    def _add(self, kind: str, path: str, size: int | None, instant: str | None,
             action: str) -> None:
        self.report.findings.append(Finding(kind, path, None if size is None else int(size),
                                            instant or None, action, self.report.table))

    def run(self) -> VerifyReport:
        started = time.perf_counter()
        before = self.storage.requests()
        folder = tempfile.mkdtemp(prefix="markerstore-verify-")
        try:
            con = _connect(folder)
            try:
                self._table_file()
                self._load(con, folder)
                self._formats(con)
                self._nested(con)
                self._orphans(con)
                self._removed(con)
                self._missing(con)
                self._leftovers(con)
                if self.storage.is_s3:
                    self._uploads()
            finally:
                con.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        after = self.storage.requests()
        self.report.requests = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        self.report.seconds = time.perf_counter() - started
        return self.report

    def _load(self, con: duckdb.DuckDBPyConnection, folder: str) -> None:
        spools = {name: Spool(folder, name, schema) for name, schema in
                  (("listing", LISTING), ("committed", COMMITTED), ("gone", GONE))}
        timeline = Timeline(self.storage)
        checked = {i.instant for i in timeline.instants() if i.state == COMPLETED}
        for batch in listing(self.storage):
            spools["listing"].add(batch)
            self.report.files_listed += batch.num_rows
        infos = timeline.instants()
        self.states = {i.instant: i.state for i in infos}
        if infos:
            con.executemany("INSERT INTO states VALUES (?, ?, ?)",
                            [[i.instant, i.state, i.instant in checked] for i in infos])
        completed = [i.instant for i in infos if i.state == COMPLETED]
        self.report.committed_files = _committed(self.table, completed, spools, self.absent)
        for spool in spools.values():
            spool.view(con)
        _live_markers(self.table, [i.instant for i in infos if i.state in LIVE], con)

    def _formats(self, con: duckdb.DuckDBPyConnection) -> None:
        """Drift between the timeline and the table's formats (repair publishes what is
        missing); the files their retained versions reference are kept, their own
        folders are not orphans."""
        try:
            outside, broken = check_outside_changes(self.table, repair=self.repair)
            findings, referenced, folders = check_formats(self.table, repair=self.repair,
                                                            absent=self.absent,
                                                            cutoff_ms=self.cutoff_ms,
                                                            skip=broken)
            if self.repair:  # replaced files past the retention, Iceberg's snapshots first
                expire(self.table, now=self.now)
                # a format that cannot be read: what it referenced before
                with contextlib.suppress(Exception):
                    referenced = referenced_paths(self.table)
        except (CorruptTableError, OSError):
            return  # an unreadable table file: reported by _table_file
        for f in [*outside, *findings]:
            self._add(f["kind"], f.get("path") or f["format"], None, f["instant"],
                      f["action"])
            if f["kind"] == "format_error":  # its retained files are unknown: keep all
                self.unreadable_format = f["format"]
        if referenced:
            con.executemany("INSERT INTO kept VALUES (?)", [[p] for p in sorted(referenced)])
        if folders:
            con.executemany("INSERT INTO format_folders VALUES (?)", [[f] for f in folders])

    def _table_file(self) -> None:
        """The table's id file: absent is fine (tables older than ids), unreadable is a
        finding (error tables know their owner's rows by that id)."""
        path = self.storage.path(TABLE_FILE)
        try:
            raw = self.storage.get(path)
            parse_table_file(raw, self.storage.url(path))
            parse_table_formats(raw, self.storage.url(path))
        except FileNotFoundError:
            return
        except (CorruptTableError, OSError) as exc:  # a folder, a link loop: unreadable
            what = exc.entry if isinstance(exc, CorruptTableError) else \
                f"the table file cannot be read: {exc}"
            self._add("corrupt_table_file", TABLE_FILE, None, None,
                      f"none: {what} (restore it: error tables know their owner's rows "
                      "by the id in it)")

    def _nested(self, con: duckdb.DuckDBPyConnection) -> None:
        """Report each nested table: verify skips it, and repair touches none of it."""
        con.execute(_NESTED)
        for prefix, files in con.execute("SELECT prefix, files FROM nested").fetchall():
            self.nested.append(prefix + "/")
            self._add(NESTED, prefix, None, None,
                      f"skipped: another table (its own {META_DIR}/, {files} file(s) there); "
                      "none of its files is checked or deleted here: verify it on its own")

    def _delete(self, paths: list[str]) -> None:
        if paths:
            self.storage.delete_many([self.storage.path(p) for p in paths],
                                     self.table.parallelism)

    def _orphans(self, con: duckdb.DuckDBPyConnection) -> None:
        cursor = con.execute(_ORPHANS)
        while True:
            rows = cursor.fetchmany(CHUNK)
            if not rows:
                return
            todo = []
            for path, size, mtime, named, state in rows:
                if not named:
                    action = "kept: not a markerstore file name"
                elif state in LIVE:
                    action = f"kept: instant {named} is {state}"
                elif not self._old(mtime):
                    action = "kept: younger than the grace period"
                elif self.unreadable_format:
                    action = f"kept: {self.unreadable_format} cannot be read"
                else:
                    action = "deleted" if self.repair else "would delete"
                    todo.append(path)
                self._add("orphan_file", path, size, named, action)
            if self.repair:
                self._delete(todo)

    def _removed(self, con: duckdb.DuckDBPyConnection) -> None:
        todo = []
        for path, size, instant in con.execute(_REMOVED, {"cutoff": self.cutoff_ms}
                                               ).fetchall():
            if self.unreadable_format:
                self._add("replaced_file", path, size, instant,
                          f"kept: {self.unreadable_format} cannot be read")
                continue
            todo.append(path)
            self._add("replaced_file", path, size, instant,
                      "deleted" if self.repair else "would delete")
        if self.repair:
            self._delete(todo)

    def _missing(self, con: duckdb.DuckDBPyConnection) -> None:
        for path, size, instant, actual in con.execute(_MISSING).fetchall():
            if actual is None:
                self._add("missing_file", path, size, instant,
                          "none: a committed file is lost (restore it)")
            else:
                self._add("size_mismatch", path, actual, instant,
                          f"none: the commit recorded {size} bytes (restore the file)")

    def _leftovers(self, con: duckdb.DuckDBPyConnection) -> None:
        for kind, instant, _files, size, newest, state in con.execute(_LEFTOVERS).fetchall():
            where = {"leftover_markers": f"{MARKERS_DIR}/{instant}",
                     "leftover_plan": f"{PLANS_DIR}/{instant}.json",
                     "leftover_staging": f"{STAGING_DIR}/{instant}",
                     "leftover_heartbeat": f"{HEARTBEAT_DIR}/{instant}"}[kind]
            if state is None and not self._old(newest):
                action = "kept: instant not on the timeline, younger than the grace period"
            elif self.repair:
                self._clean(kind, instant, state)
                action = "deleted" if kind != "leftover_plan" or state != COMPLETED \
                    else "finished (cleanup after the commit)"
            else:
                action = "would delete" if kind != "leftover_plan" or state != COMPLETED \
                    else "would finish (cleanup after the commit)"
            self._add(kind, where, size, instant, action)

    def _clean(self, kind: str, instant: str, state: str | None) -> None:
        storage = self.storage
        if kind == "leftover_markers":
            self.table.clean_markers_of(instant)
        elif kind == "leftover_staging":
            remove_staging_area(storage, instant)
        elif kind == "leftover_heartbeat":
            storage.delete(storage.path(HEARTBEAT_DIR, instant))
        elif state == COMPLETED and (plan := read_plan(storage, instant)) is not None:
            post_commit(self.table, plan)
        else:
            remove_staging_area(storage, instant)
            delete_plan(storage, instant)

    def _uploads(self) -> None:
        todo = []
        uuids: dict[str, str | None] = {}
        for upload in s3.list_uploads(self.storage):
            parsed = parse_path(upload.key)
            if parsed is None:
                continue  # not a markerstore file: not this table's write
            state = self.states.get(parsed.instant)
            if state in LIVE:
                continue
            if state is not None:
                if parsed.instant not in uuids:
                    uuids[parsed.instant] = self.table.write_uuid(parsed.instant)
                if uuids[parsed.instant] != parsed.write_uuid:
                    continue  # another write's upload under this prefix
            _, prefix = s3.table_prefix(self.storage)
            path = upload.key[len(prefix):]
            if any(path.startswith(n) for n in self.nested):
                continue  # a nested table's upload: that table's to clean up
            initiated = _timestamp(upload.initiated)
            if state is None and not self._old(initiated):
                action = "kept: instant not on the timeline, younger than the grace period"
            else:
                action = "aborted" if self.repair else "would abort"
                todo.append((upload.bucket, upload.key, upload.upload_id))
            self._add("orphan_upload", path, None, parsed.instant,
                      f"{action} (upload {upload.upload_id})")
        if self.repair and todo:
            s3.abort_many(self.storage, todo, int(self.table.settings[config.COMMIT_THREADS]))


def _timestamp(text: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def verify(table: Table, *, repair: bool = False, grace: str | timedelta = GRACE_DEFAULT,
           absent: AbsentHook | None = None) -> VerifyReport:
    """Compare `table`'s storage with its timeline; with `repair`, fix what is safe to fix.
    `absent` names, per completed commit's metadata, more files it removed (besides its
    `replaced_files`), such as an error table's expire commits."""
    return Verifier(table, repair=repair, grace=grace, absent=absent).run()
