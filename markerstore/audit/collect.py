"""The figures of a table's report, aggregated in DuckDB over the SQL views.

Commits come from the `commits` view (the timeline and each commit's metadata), the
layout from `files` (the live snapshot), markers from `markers`, and data quality from
`errors` (the committed rows of the table's error tables: only what they hold, so a
redacted or dropped payload stays redacted or dropped). Nothing here scales with the
error rows but DuckDB's scans: one pass over the error rows, grouped by commit, reason,
check and fingerprint, counts every figure of the section; the examples and source files
of the top fingerprints come from a sample of their rows (``LIMIT``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from markerstore.timeline import COMPLETED, INFLIGHT, REQUESTED, ROLLEDBACK

MAX_POINTS = 60           # commits (or groups of commits) drawn per chart
RECENT_COMMITS = 20       # commits listed one by one
TOP_FINGERPRINTS = 10
TOP_PARTITIONS = 20
TOP_SOURCES = 3           # source files listed per fingerprint
MAX_EXAMPLE_CHARS = 500   # an example message or record is cut to this
MAX_EVENTS = 200          # rollbacks marked on the charts (the newest)
SAMPLE_ROWS = 100_000     # rows of the top fingerprints read for examples and sources


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()
         ) -> list[dict[str, Any]]:
    relation = con.execute(sql, list(params))
    names = [d[0] for d in relation.description or []]
    return [dict(zip(names, values)) for values in relation.fetchall()]


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_EXAMPLE_CHARS:
        return value[:MAX_EXAMPLE_CHARS] + "…"
    return value


def commit_points(con: duckdb.DuckDBPyConnection, since: str | None) -> dict[str, Any]:
    """Completed commits as at most MAX_POINTS points (one commit each, or consecutive
    commits grouped), the newest commits one by one, and the counts by state."""
    where = "WHERE instant >= ?" if since else ""
    params = [since] if since else []
    con.execute(f"""CREATE OR REPLACE TEMP TABLE report_commits AS
        SELECT instant, state, operation, coalesce(num_rows, 0) AS rows,
               coalesce(num_files, 0) AS files, coalesce(num_bytes, 0) AS bytes,
               coalesce(error_records, 0) AS error_records,
               coalesce(files_cleaned, 0) AS files_cleaned, completed_at,
               epoch(completed_at) - epoch(instant_time) AS duration_s,
               json_extract(metadata, '$.error_records') AS by_reason,
               json_extract_string(metadata, '$.recovered') AS recovered,
               CASE WHEN json_type(metadata, '$.checks') = 'ARRAY'
                    THEN CAST(json_extract(metadata, '$.checks') AS VARCHAR[]) END AS checks
        FROM commits {where}""", params)
    states = dict(con.sql("SELECT state, count(*) FROM report_commits GROUP BY 1").fetchall())
    completed = int(states.get("completed", 0))
    groups = min(completed, MAX_POINTS)
    # Each completed commit with its point: the charts' groups of consecutive commits.
    con.execute("""CREATE OR REPLACE TEMP TABLE report_points AS
        SELECT *, ntile(?) OVER (ORDER BY instant) - 1 AS point
        FROM report_commits WHERE state = 'completed'""", [max(groups, 1)])
    points = rows(con, """
        SELECT point, min(instant) AS first_instant, max(instant) AS last_instant,
               count(*) AS commits, sum(rows) AS rows, sum(error_records) AS error_records,
               sum(files) AS files, sum(bytes) AS bytes, sum(files_cleaned) AS files_cleaned,
               round(max(duration_s), 3) AS duration_s
        FROM report_points GROUP BY point ORDER BY point""")
    # Each reason key is data (any character, a quote too): read as a map entry, never
    # spliced into a JSON path; a count that is not an integer counts nothing.
    reasons = rows(con, """
        WITH e AS (SELECT point, unnest(map_entries(TRY_CAST(by_reason AS MAP(VARCHAR, JSON))))
                              AS entry
                   FROM report_points WHERE json_type(by_reason) = 'OBJECT')
        SELECT point, entry.key AS reason, sum(TRY_CAST(entry.value AS BIGINT)) AS n
        FROM e GROUP BY ALL ORDER BY point, reason""")
    for point in points:
        point["by_reason"] = {}
        point["rows_in"] = int(point["rows"]) + int(point["error_records"])
        point["error_rate"] = (round(point["error_records"] / point["rows_in"], 6)
                               if point["rows_in"] else 0.0)
    for item in reasons:
        points[item["point"]]["by_reason"][item["reason"]] = int(item["n"] or 0)
    recent = rows(con, f"""
        SELECT instant, state, operation, rows, error_records, files, bytes, files_cleaned,
               CAST(completed_at AS VARCHAR) AS completed_at, round(duration_s, 3) AS duration_s
        FROM report_commits ORDER BY instant DESC LIMIT {RECENT_COMMITS}""")
    return {"total": sum(int(v) for v in states.values()), "completed": completed,
            "rolled_back": int(states.get(ROLLEDBACK, 0)),
            "inflight": int(states.get(INFLIGHT, 0)) + int(states.get(REQUESTED, 0)),
            "corrupt": int(states.get("corrupt", 0)),
            "grouped": completed > MAX_POINTS, "points": points, "recent": recent}


def events(con: duckdb.DuckDBPyConnection, points: list[dict[str, Any]]
           ) -> list[dict[str, Any]]:
    """Rollbacks and instants still in flight, each placed at the point of the first
    completed commit after it (or after the last point), and writes rolled forward by a
    recovery, at their own point."""
    found = rows(con, """
        SELECT instant, state FROM report_commits
        WHERE state IN (?, ?, ?, 'corrupt') OR (state = ? AND recovered IS NOT NULL)
        ORDER BY instant DESC LIMIT ?""",
                 [ROLLEDBACK, INFLIGHT, REQUESTED, COMPLETED, MAX_EVENTS])
    firsts = [p["first_instant"] for p in points]
    placed = []
    for event in reversed(found):
        after = next((i for i, first in enumerate(firsts) if first > event["instant"]),
                     len(points))
        if event["state"] == COMPLETED:
            kind, at = "rolled forward", max(after - 1, 0)
        else:
            kind = {ROLLEDBACK: "rolled back", "corrupt": "corrupt"}.get(event["state"],
                                                                         "in flight")
            at = after
        placed.append({"instant": event["instant"], "kind": kind, "point": at})
    return placed


def quality(con: duckdb.DuckDBPyConnection, points: list[dict[str, Any]],
            since: str | None) -> dict[str, Any]:
    """Error rows by reason, the pass rate of each named check per point, and the top
    fingerprints with an example and the source files they came from."""
    where = "WHERE source_instant >= ?" if since else ""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE report_groups AS
        SELECT source_instant, reason, check_name, fingerprint, count(*) AS n,
               min(created_at) AS first_seen, max(created_at) AS last_seen
        FROM errors {where} GROUP BY ALL""", [since] if since else [])
    total = int(con.sql("SELECT coalesce(sum(n), 0) FROM report_groups").fetchall()[0][0])
    by_reason = {r: int(n) for r, n in con.sql(
        "SELECT coalesce(reason, 'unknown'), sum(n) FROM report_groups GROUP BY 1 "
        "ORDER BY 2 DESC, 1").fetchall()}
    checks = _check_pass_rates(con, points)
    return {"error_rows": total, "by_reason": by_reason,
            "checks": checks,
            "fingerprints": fingerprints(con, since)}


def _check_pass_rates(con: duckdb.DuckDBPyConnection, points: list[dict[str, Any]]
                      ) -> list[dict[str, Any]]:
    """Each named check's failures and pass rate, overall and per point. A commit's
    metadata names the checks its write applied (``checks``): a check is rated over the
    rows of those commits only, and one that never failed is listed at 100%. Commits
    written before checks were recorded count for every check."""
    if not points:
        return []
    groups = len(points)
    failed: dict[str, list[int]] = {}
    for name, point, n in con.sql("""
            SELECT g.check_name, c.point, sum(g.n) FROM report_groups g
            JOIN report_points c ON c.instant = g.source_instant
            WHERE g.reason = 'check' AND g.check_name IS NOT NULL GROUP BY ALL""").fetchall():
        failed.setdefault(name, [0] * groups)[point] += int(n)
    applied: dict[str | None, list[int]] = {}
    for name, point, n in con.sql("""
            WITH c AS (SELECT rows + error_records AS rows_in, checks, point
                       FROM report_points)
            SELECT name, point, sum(rows_in) FROM (
                SELECT unnest(checks) AS name, point, rows_in FROM c WHERE checks IS NOT NULL
                UNION ALL SELECT NULL, point, rows_in FROM c WHERE checks IS NULL)
            GROUP BY ALL""").fetchall():
        applied.setdefault(name, [0] * groups)[point] += int(n)
    legacy = applied.pop(None, [0] * groups)
    result = []
    for name in sorted(set(failed) | {n for n in applied if n is not None}):
        fails = failed.get(name, [0] * groups)
        rows_in = [a + b for a, b in zip(applied.get(name, [0] * groups), legacy)]
        rows_in = [r if r >= f else p["rows_in"] for r, f, p in zip(rows_in, fails, points)]
        total_in, total_failed = sum(rows_in), sum(fails)
        result.append({
            "check": name, "failed": total_failed,
            "pass_rate": round(1 - total_failed / total_in, 6) if total_in else None,
            "pass_rate_per_point": [round(1 - f / r, 6) if r else None
                                    for f, r in zip(fails, rows_in)]})
    return result


def fingerprints(con: duckdb.DuckDBPyConnection, since: str | None) -> list[dict[str, Any]]:
    """The TOP_FINGERPRINTS largest groups with when they were first and last seen, and,
    from a sample (the first SAMPLE_ROWS of their rows read), one example (message,
    record key, record) and the source files and lines they came from."""
    top = rows(con, f"""
        SELECT fingerprint, any_value(reason) AS reason, sum(n) AS rows,
               CAST(min(first_seen) AS VARCHAR) AS first_seen,
               CAST(max(last_seen) AS VARCHAR) AS last_seen
        FROM report_groups GROUP BY fingerprint
        ORDER BY rows DESC, fingerprint LIMIT {TOP_FINGERPRINTS}""")
    if not top:
        return top
    since_sql = "AND source_instant >= ?" if since else ""
    details = rows(con, f"""
        WITH sample AS (
            SELECT fingerprint, source_file, source_line,
                   {{'detail': coalesce(check_name, column_name, error_class),
                    'example_message': error, 'example_record': record,
                    'record_key': record_key, 'source_instant': source_instant}} AS example
            FROM errors WHERE list_contains(?, fingerprint) {since_sql}
            LIMIT {SAMPLE_ROWS})
        SELECT fingerprint, source_file AS file, count(*) AS rows,
               min(source_line) AS first_line, max(source_line) AS last_line,
               any_value(example) AS example
        FROM sample GROUP BY ALL ORDER BY fingerprint, rows DESC, file""",
                   [[t["fingerprint"] for t in top], *([since] if since else [])])
    by_name = {t["fingerprint"]: {**t, "sampled_rows": 0, "sources": []} for t in top}
    for group in details:
        item = by_name[group.pop("fingerprint")]
        example = group.pop("example")
        if not item["sources"]:  # the largest source group gives the example
            item.update({k: _cut(v) for k, v in example.items()})
        item["sampled_rows"] += group["rows"]
        if len(item["sources"]) < TOP_SOURCES:
            item["sources"].append(group)
    return list(by_name.values())


def layout(con: duckdb.DuckDBPyConnection, small_file_bytes: int) -> dict[str, Any]:
    """Rows and bytes per partition (the largest, and the rest together), small files and
    the file size distribution (powers of two), of the live snapshot."""
    totals = rows(con, """SELECT count(*) AS files, coalesce(sum(rows), 0) AS rows,
                                 coalesce(sum(size), 0) AS bytes,
                                 count(DISTINCT partition) AS partitions,
                                 count(*) FILTER (WHERE size < ?) AS small_files
                          FROM files""", [small_file_bytes])[0]
    partitions = rows(con, f"""
        SELECT partition, count(*) AS files, coalesce(sum(rows), 0) AS rows,
               coalesce(sum(size), 0) AS bytes
        FROM files GROUP BY partition ORDER BY bytes DESC, partition
        LIMIT {TOP_PARTITIONS}""")
    skew = con.sql("""SELECT max(b) / nullif(median(b), 0) FROM
                      (SELECT sum(size) AS b FROM files GROUP BY partition)""").fetchall()[0][0]
    shown = {key: sum(p[key] for p in partitions) for key in ("files", "rows", "bytes")}
    rest = {key: int(totals[key]) - shown[key] for key in shown}
    histogram = rows(con, """
        SELECT CAST(floor(log2(greatest(size, 1))) AS INTEGER) AS bucket, count(*) AS files
        FROM files WHERE size IS NOT NULL GROUP BY 1 ORDER BY 1""")
    return {**{k: int(v) for k, v in totals.items()},
            "small_file_bytes": small_file_bytes,
            "skew": None if skew is None else round(float(skew), 2),
            "top_partitions": partitions,
            "other_partitions": {"partitions": max(int(totals["partitions"]) - len(partitions),
                                                   0), **rest},
            "size_histogram": [{"label": f"{size_label(2 ** h['bucket'])}–"
                                         f"{size_label(2 ** (h['bucket'] + 1))}",
                                "min_bytes": 2 ** h["bucket"],
                                "files": int(h["files"])} for h in histogram]}


def size_label(size: float) -> str:
    """Bytes in binary units: 512 B, 4 KiB, 1.5 MiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            text = f"{size:.1f}".rstrip("0").rstrip(".") if unit != "B" else str(int(size))
            return f"{text} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def markers(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, int]]:
    """Per instant with a marker folder: markers and pending (uncompleted) uploads."""
    found = con.sql("""SELECT instant, count(*), count(pending_upload) FROM markers
                       GROUP BY instant""").fetchall()
    return {i: {"markers": int(n), "pending_uploads": int(p)} for i, n, p in found}
