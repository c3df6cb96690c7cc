"""DuckDB views over a table's timeline and markers: `commits`, `files`, `markers`.

Views are rebuilt for each query from the timeline (one LIST, plus one GET per completed
commit not read before) and the marker folders. Other packages add views by passing
providers to :func:`connect` (errortable's `errors`: ``errortable.table_connect``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from markerstore.errors import CorruptTableError, InvalidMarkerError, MarkerTypeError
from markerstore.markers.base import MARKERS_DIR
from markerstore.markers.scan import empty_markers, empty_rows, scan_markers
from markerstore.snapshot import live_files
from markerstore.sql.sandbox import allow_paths
from markerstore.timeline import COMPLETED, is_instant, parse_instant

if TYPE_CHECKING:
    from markerstore.table import Table

ViewProvider = Callable[["Table", duckdb.DuckDBPyConnection], None]

COMMITS_SCHEMA = pa.schema([
    ("instant", pa.string()), ("state", pa.string()),
    ("instant_time", pa.timestamp("ms", tz="UTC")), ("write_uuid", pa.string()),
    ("operation", pa.string()), ("completed_at", pa.timestamp("ms", tz="UTC")),
    ("num_files", pa.int64()), ("num_rows", pa.int64()), ("num_bytes", pa.int64()),
    ("error_records", pa.int64()), ("files_cleaned", pa.int64()), ("metadata", pa.string()),
])
FILES_SCHEMA = pa.schema([
    ("instant", pa.string()), ("partition", pa.string()), ("file", pa.string()),
    ("path", pa.string()), ("url", pa.string()), ("size", pa.int64()), ("rows", pa.int64()),
    ("checksum", pa.string()),
])


def _ms(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    return None


def unreadable_commits(table: Table) -> dict[str, str]:
    """Completed instants whose commit metadata cannot be read, with the problem (the
    others are read, and cached, on the way)."""
    found: dict[str, str] = {}
    for info in table.timeline():
        if info.state == COMPLETED:
            try:
                table.commit_metadata(info.instant)
            except CorruptTableError as exc:
                found[info.instant] = str(exc)
    return found


def commits_table(table: Table, corrupt: Collection[str] = ()) -> pa.Table:
    """One row per instant; a completed instant in `corrupt` has state 'corrupt' and no
    metadata."""
    rows: dict[str, list[Any]] = {f.name: [] for f in COMMITS_SCHEMA}
    for info in table.timeline():
        meta: dict[str, Any] = {}
        broken = info.state == COMPLETED and info.instant in corrupt
        if info.state == COMPLETED and not broken:
            meta = table.commit_metadata(info.instant)
        counts = meta.get("counts", {})
        rows["instant"].append(info.instant)
        rows["state"].append("corrupt" if broken else info.state)
        rows["instant_time"].append(parse_instant(info.instant))
        rows["write_uuid"].append(meta.get("write_uuid"))
        rows["operation"].append(meta.get("operation"))
        rows["completed_at"].append(_ms(meta.get("timestamp")))
        rows["num_files"].append(counts.get("files"))
        rows["num_rows"].append(counts.get("rows"))
        rows["num_bytes"].append(counts.get("bytes"))
        errors = meta.get("error_records")
        rows["error_records"].append(sum(errors.values()) if isinstance(errors, dict)
                                     else counts.get("error_records"))
        rows["files_cleaned"].append(counts.get("files_cleaned"))
        rows["metadata"].append(json.dumps(meta, sort_keys=True) if meta else None)
    return pa.table(rows, schema=COMMITS_SCHEMA)


def files_table(table: Table, corrupt: Collection[str] = ()) -> pa.Table:
    """Live data files of completed commits: a commit that replaced files (conflict mode
    replace) hides them from the instant it completed, before they are deleted. The
    instants in `corrupt` are left out."""
    rows: dict[str, list[Any]] = {f.name: [] for f in FILES_SCHEMA}
    storage = table.storage
    completed = ([(i.instant, table.commit_metadata(i.instant)) for i in table.timeline()
                  if i.state == COMPLETED and i.instant not in corrupt] if corrupt
                 else table.completed())
    for instant, entry in live_files(completed):
        path = entry["path"]
        partition, _, file_name = path.rpartition("/")
        rows["instant"].append(instant)
        rows["partition"].append(partition)
        rows["file"].append(file_name)
        rows["path"].append(path)
        rows["url"].append(storage.url(storage.path(path)))
        rows["size"].append(entry.get("size"))
        rows["rows"].append(entry.get("rows"))
        rows["checksum"].append(entry.get("checksum"))
    return pa.table(rows, schema=FILES_SCHEMA)


def markers_relation(table: Table, con: duckdb.DuckDBPyConnection,
                     problems: dict[str, str] | None = None) -> duckdb.DuckDBPyRelation:
    """The `markers` view: one row per marker of every instant with a marker folder, with
    its `instant`. Lazy: DuckDB scans each instant's snapshot of segments (see
    markerstore.markers.scan) when a query runs, so `count(*)` never materializes the
    merged rows, and a compaction after the snapshot changes nothing. Nothing is deleted
    from these rows: reconcile and rollback check every row they act on.

    An instant whose marker folder cannot be read (a stray or odd file in it, a corrupt
    segment: an in-flight write may leave one) is left out, and `problems` maps it to
    why; without `problems`, a query that reads the view fails with that reason (naming
    the file), and a query of the other views runs."""
    storage = table.storage
    relation: duckdb.DuckDBPyRelation | None = None
    for name in storage.ls(storage.path(MARKERS_DIR)):
        if not is_instant(name):
            continue
        try:
            scan = scan_markers(storage, name)
        except (CorruptTableError, InvalidMarkerError, MarkerTypeError) as exc:
            if problems is not None:
                problems[name] = str(exc)
                continue
            rows = _failing(con, str(exc))
            relation = rows if relation is None else relation.union(rows)
            continue
        if scan is None:
            continue
        allow_paths(con, scan.files)  # the sandbox reads the snapshot's files, no other
        rows = scan.merged(con).project(duckdb.ConstantExpression(name).alias("instant"),
                                        duckdb.StarExpression())
        relation = rows if relation is None else relation.union(rows)
    if relation is None:
        empty = empty_markers(con).to_arrow_table()
        return con.from_arrow(empty.add_column(0, "instant", pa.array([], pa.string())))
    return relation


def _failing(con: duckdb.DuckDBPyConnection, message: str) -> duckdb.DuckDBPyRelation:
    """A relation of the `markers` columns that fails with `message` when it is scanned
    (DuckDB's ``error()`` over one row), and only then."""
    row = empty_rows().add_column(0, "instant", pa.array([], pa.string()))
    row = pa.Table.from_pylist([dict.fromkeys(row.column_names)], row.schema)
    fail = duckdb.FunctionExpression("error", duckdb.ConstantExpression(message))
    return con.from_arrow(row).filter(fail.isnull())


def connect(table: Table, views: Mapping[str, ViewProvider] | None = None, *,
            corrupt: Collection[str] = (), problems: dict[str, str] | None = None
            ) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the table's views `commits`, `files` and `markers`, plus
    one per provider in `views` (name -> ``provider(table, con)``, which creates it).
    Completed instants in `corrupt` (:func:`unreadable_commits`) are left out of `files`
    and have state 'corrupt' in `commits`; otherwise an unreadable one raises
    CorruptTableError. An instant whose markers cannot be read is left out of `markers`
    (see :func:`markers_relation`), and `problems` maps it to why; without `problems` a
    query that reads `markers` fails with the reason.

    This is DuckDB's full engine (any file, COPY, ATTACH, SET, ...): the caller already
    runs Python. For SQL from someone else, use the sandbox that `markerstore sql` uses:
    ``markerstore.sql.sandbox.run(connect(table), query)`` (docs/SECURITY.md)."""
    con = duckdb.connect()
    con.register("commits", commits_table(table, corrupt))
    con.register("files", files_table(table, corrupt))
    markers_relation(table, con, problems).create_view("markers")
    for name, provider in (views or {}).items():
        provider(table, con)
        if name not in {r[0] for r in con.sql("SELECT view_name FROM duckdb_views()").fetchall()
                        } | {r[0] for r in con.sql("SHOW TABLES").fetchall()}:
            raise RuntimeError(f"view provider {name!r} did not create its view")
    return con


def sql(table: Table, query: str, views: Mapping[str, ViewProvider] | None = None
        ) -> duckdb.DuckDBPyRelation:
    """Run `query` over the table's views (see :func:`connect`)."""
    return connect(table, views).sql(query)
