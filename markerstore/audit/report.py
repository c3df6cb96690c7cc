"""A table's report: its health at a glance, as data (``--json``), a self-contained HTML
page, and HTML in notebooks (:mod:`markerstore.render.page`).

``build(table)`` reads the timeline, the live snapshot, the markers and the error tables
through the SQL views (:mod:`markerstore.audit.collect` aggregates them in DuckDB) and
says in one line per section what it shows. Nothing is written to the table.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb

from markerstore import config
from markerstore.audit import collect
from markerstore.audit.verify import last_verify
from markerstore.errors import ConfigError, CorruptTableError, MarkerStoreError
from markerstore.render import page
from markerstore.table import Table
from markerstore.timeline import (
    INFLIGHT,
    REQUESTED,
    ROLLED_FORWARD,
    format_instant,
    is_instant,
)

FORMAT_VERSION = 1
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass
class Report:
    """The figures of one table's report (:meth:`to_dict`, the same as ``--json``)."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def to_html(self) -> str:
        """The self-contained page: inline SVG charts and CSS, no script, no request."""
        return page.report_page(self.data)

    def _repr_html_(self) -> str:
        return page.report_fragment(self.data)

    def write(self, path: str) -> str:
        """Write the page to the local file `path`; return its absolute path."""
        with open(path, "w", encoding="utf-8") as out:
            out.write(self.to_html())
        return os.path.abspath(path)


def parse_since(text: str | None, now: datetime | None = None) -> str | None:
    """The first instant a report covers: a duration back from now (7d, 12h, 30m, 2w), a
    date or time (2026-11-01, 2026-11-01T12:00, UTC unless it says), or an instant id."""
    if text is None:
        return None
    value = text.strip()
    if is_instant(value):
        return value
    match = _DURATION.match(value)
    if match:
        back = timedelta(seconds=int(match.group(1)) * _SECONDS[match.group(2)])
        return format_instant((now or datetime.now(timezone.utc)) - back)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"--since expects a duration (7d, 12h), a date (2026-11-01), a time "
                          f"or an instant id, got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return format_instant(when.astimezone(timezone.utc))


def build(table: str | Table, storage_options: Mapping[str, Any] | None = None, *,
          since: str | None = None, verify: bool = False) -> Report:
    """The report of `table` (a path, URL or Table), of the commits from `since` on
    (:func:`parse_since`), with ``markerstore verify``'s findings when `verify`."""
    t = table if isinstance(table, Table) else Table(table, storage_options)
    first = parse_since(since)
    with t.pinned_timeline():  # one listing of the timeline: every section sees the same
        data, findings = _sections(t, since, first)
    if verify:
        data["recovery"]["verify"] = _verify(t, findings)
    data["verdict"] = {"healthy": not findings, "findings": findings,
                       "summary": "healthy" if not findings else
                       f"{len(findings)} finding{'s' if len(findings) != 1 else ''}"}
    data["notes"] = notes(data)
    return Report(data)


def _sections(t: Table, since: str | None, first: str | None
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every section but verify's, and the findings met on the way."""
    from errortable.reading.access import register_table_errors
    from markerstore.sql.views import connect, unreadable_commits

    findings: list[dict[str, Any]] = []
    table_id = _table_id(t, findings)
    corrupt = unreadable_commits(t)
    findings += [{"kind": "corrupt_instant", "instant": i, "what": problem}
                 for i, problem in corrupt.items()]
    problems: list[str] = []

    def errors_view(table: Table, con: duckdb.DuckDBPyConnection) -> None:
        problem = register_table_errors(table, con)
        if problem is not None:
            problems.append(problem)

    unreadable: dict[str, str] = {}
    con = connect(t, {"errors": errors_view}, corrupt=corrupt, problems=unreadable)
    findings += [{"kind": "unreadable_markers", "instant": i, "what": problem}
                 for i, problem in unreadable.items()]
    findings += [{"kind": "error_table_unreadable", "instant": None, "what": p}
                 for p in problems]
    commits = collect.commit_points(con, first)
    commits["events"] = collect.events(con, commits["points"])
    small = max(1, int(t.settings[config.TARGET_FILE_SIZE]) // 4)
    data: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "since": {"given": since, "instant": first} if since else None,
        "table": _header(t, con, table_id),
        "commits": commits,
        "quality": collect.quality(con, commits["points"], first),
        "layout": collect.layout(con, small),
        "recovery": _recovery(t, con, findings),
    }
    data["quality"]["error_table"] = not problems and _has_error_table(t)
    return data, findings


def _table_id(table: Table, findings: list[dict[str, Any]]) -> str | None:
    try:
        return table.table_id()
    except (CorruptTableError, OSError) as exc:  # OSError: a folder, a link loop
        findings.append({"kind": "corrupt_table_id", "instant": None, "what": str(exc)})
        return None


def _has_error_table(table: Table) -> bool:
    from errortable.reading.reader import error_tables_of, is_error_table

    try:
        return is_error_table(table) or bool(error_tables_of(table))
    except (MarkerStoreError, OSError):
        return False


def _header(table: Table, con: duckdb.DuckDBPyConnection, table_id: str | None
            ) -> dict[str, Any]:
    last = collect.rows(con, """
        SELECT instant, CAST(completed_at AS VARCHAR) AS completed_at, operation,
               json_extract(metadata, '$.partition_by') AS partition_by
        FROM commits WHERE state = 'completed' ORDER BY instant DESC LIMIT 1""")
    newest = con.sql("SELECT path FROM files ORDER BY instant DESC, path LIMIT 1").fetchall()
    partition_by = []
    if last and last[0]["partition_by"]:
        import json

        partition_by = [str(c) for c in json.loads(last[0]["partition_by"])]
    header = {"url": table.storage.url(), "table_id": table_id,
              "schema": _schema(table, newest[0][0]) if newest else None,
              "partition_columns": partition_by,
              "last_commit": ({k: v for k, v in last[0].items() if k != "partition_by"}
                              if last else None)}
    header.update(collect.rows(con, "SELECT count(*) AS files, coalesce(sum(rows), 0) AS rows,"
                                    " coalesce(sum(size), 0) AS bytes FROM files")[0])
    return header


def _schema(table: Table, path: str) -> list[dict[str, str]] | None:
    """The columns of the newest data file (its Parquet footer: one small read)."""
    import pyarrow.parquet as pq

    storage = table.storage
    try:
        with storage.fs.open(storage.path(path), "rb") as handle:
            schema = pq.read_schema(handle)
    except (OSError, ValueError):
        return None
    return [{"name": f.name, "type": str(f.type)} for f in schema]


def _recovery(table: Table, con: duckdb.DuckDBPyConnection,
              findings: list[dict[str, Any]]) -> dict[str, Any]:
    """Instants in flight (alive or not), their markers and pending uploads, the recent
    rollbacks and the recent writes a recovery rolled forward, the last verify's summary."""
    markers = collect.markers(con)
    inflight = []
    for info in table.timeline():
        if info.state not in (REQUESTED, INFLIGHT):
            continue
        alive = table.writer_alive(info.instant)
        counts = markers.get(info.instant, {"markers": 0, "pending_uploads": 0})
        inflight.append({"instant": info.instant, "state": info.state,
                         "writer_alive": alive, **counts})
        if not alive:
            findings.append({"kind": "dead_writer", "instant": info.instant,
                             "what": f"the writer of {info.state} instant {info.instant} is "
                                     f"dead: {counts['markers']} marker(s), "
                                     f"{counts['pending_uploads']} pending upload(s) to "
                                     "roll back (markerstore rollback)"})
    rolled = [i for i, in con.sql("SELECT instant FROM commits WHERE state = 'rolledback' "
                                  "ORDER BY instant DESC LIMIT 10").fetchall()]
    forward = [i for i, in con.execute(
        "SELECT instant FROM commits WHERE state = 'completed' AND "
        "json_extract_string(metadata, '$.recovered') = ? "
        "ORDER BY instant DESC LIMIT 10", [ROLLED_FORWARD]).fetchall()]
    return {"inflight": inflight, "dead_writers": sum(not i["writer_alive"] for i in inflight),
            "pending_uploads": sum(i["pending_uploads"] for i in inflight),
            "recent_rollbacks": rolled, "recent_roll_forwards": forward,
            "formats": _formats(table, findings), "verify": None,
            "last_verify": last_verify(table)}


def _formats(table: Table, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each table format stands (Delta's version, Iceberg's snapshot) and its
    backlog: the completed instants it does not hold, which the next write, recovery or
    ``verify --repair`` publishes. A backlog, or a format that cannot be read, is a
    finding."""
    from markerstore.formats import status

    try:
        outcomes = status(table)
    except (CorruptTableError, OSError):  # the table file: its own finding says it
        return []
    except MarkerStoreError as exc:  # a format this installation cannot publish
        findings.append({"kind": "format_error", "instant": None, "what": str(exc)})
        return []
    shown = []
    for outcome in outcomes.values():
        pending = outcome.pending
        shown.append({"format": outcome.name, "position": outcome.position,
                      "backlog": len(pending), "oldest_pending": pending[0] if pending else None,
                      "reason": outcome.reason})
        if not outcome.ok:
            what = (f"{outcome.name}: {len(pending)} completed instant(s) not published"
                    + (f" (oldest {pending[0]})" if pending else "")
                    + (f": {outcome.reason}" if outcome.reason else ""))
            findings.append({"kind": "format_backlog" if pending else "format_error",
                             "instant": pending[0] if pending else None, "what": what})
    return shown


def _verify(table: Table, findings: list[dict[str, Any]]) -> dict[str, Any]:
    from markerstore.audit.verify import verify_all
    from markerstore.commit.verify import NOTICES

    reports = verify_all(table)
    found = [f.to_dict() for r in reports for f in r.findings]
    findings += [{"kind": f["kind"], "instant": f["instant"], "what": f["path"]}
                 for f in found if f["kind"] not in NOTICES]
    return {"tables": [r.table for r in reports],
            "consistent": all(r.consistent for r in reports),
            "findings": found, "files_listed": sum(r.files_listed for r in reports)}


def notes(data: dict[str, Any]) -> dict[str, str]:
    """One sentence per section saying what it shows."""
    c, q, lay, rec = data["commits"], data["quality"], data["layout"], data["recovery"]
    since = f" since {data['since']['given']}" if data["since"] else ""
    if not c["total"]:
        commits = f"No instant{since}: nothing has been written to this table."
    elif not c["completed"]:
        commits = (f"No completed commit{since}: {c['total']} instant(s), "
                   f"{c['rolled_back']} rolled back, {c['inflight']} in flight, "
                   f"{c['corrupt']} corrupt.")
    else:
        shape = (f"in {len(c['points'])} groups of consecutive commits" if c["grouped"]
                 else "one bar per commit")
        commits = (f"{c['completed']:,} completed commit(s){since}, {shape}; "
                   f"{c['rolled_back']} rolled back, {c['inflight']} in flight"
                   + (f", {c['corrupt']} corrupt (left out)" if c["corrupt"] else "") + ".")
    if not q["error_table"]:
        quality = "No error table: bad records are not kept for this table."
    elif not q["error_rows"]:
        quality = f"The error table holds no committed error row{since}."
    else:
        quality = (f"{q['error_rows']:,} committed error row(s){since} in "
                   f"{len(q['by_reason'])} reason(s); examples are what the error table "
                   "holds (redaction applied when written).")
    layout = ("No live data file." if not lay["files"] else
              f"{lay['files']:,} live file(s) in {lay['partitions']:,} partition(s); "
              f"{lay['small_files']:,} under {collect.size_label(lay['small_file_bytes'])}.")
    recovery = (f"{len(rec['inflight'])} instant(s) in flight, {rec['dead_writers']} with a "
                f"dead writer." if rec["inflight"] else "Nothing in flight.")
    behind = [f for f in rec.get("formats") or [] if f["backlog"] or f["reason"]]
    if behind:
        recovery += " " + "; ".join(
            f"{f['format']}: {f['backlog']} completed instant(s) not published"
            for f in behind) + " (the next write retries)."
    return {"commits": commits, "quality": quality, "layout": layout, "recovery": recovery}
