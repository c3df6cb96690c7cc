"""`markerstore report` at scale: a table with 10,000 commits and 10 million error rows.

The table is built synthetically. Ten template commits are written through the real APIs
(``Table.start_commit``/``commit`` with a marker first, errortable's ``ErrorCommit`` and
task writer): each records one small data file (the report reads the timeline, not the
data), and the first carries an error commit of 10,000 generated error rows (DuckDB
writes them: five reasons, seven checks, 35 fingerprints each of one reason and check as the
writer's are, source files and lines). The 10,000
commits are copies of these ten under new instants: their timeline files with the
instants, paths and completion times rewritten, their data and error files hard-linked
(committing 10,000 times through the API takes hours here: each commit lists the
timeline). Timed: ``build`` (aggregation in DuckDB over the views), the HTML page (charts
drawn by matplotlib) and the JSON, for the first report in the process and again; the
page's and the JSON's sizes. ``quick=True`` builds a tenth of it and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import duckdb
import pyarrow as pa

import errortable
from errortable import schema as S
from errortable.writing.commit import ErrorCommit
from markerstore import Table
from markerstore.audit.collect import MAX_POINTS
from markerstore.table import DataFile
from markerstore.timeline import format_instant, parse_instant

COMMITS = 10_000
ERROR_ROWS = 10_000_000
ERROR_EVERY = 10  # one commit in ten has error rows
QUIET_SCAN_S = 2.12  # the GROUP BY of docs/BENCHMARKS.md's error table section, at load 1.2
REASONS = ("parse", "cast", "check", "key", "partition")

_GEN = """
SELECT uuid()::VARCHAR AS uid, (epoch(now()) + i / 1000)::VARCHAR AS ts,
  '{"type":"arrow","fields":[{"name":"id","type":"string","nullable":true}]}' AS schema,
  '{"id":"k' || i::VARCHAR || '","amount":' || (-(i % 997))::VARCHAR || '}' AS record,
  'CheckFailed: check ''c' || (i % 7)::VARCHAR || ''' failed' AS message,
  MAP(['commitTime', 'tableName', 'reason', 'errorClass', 'check', 'fingerprint',
       'recordKey', 'sourceFile', 'sourceLine'],
      ['$INSTANT', 'events', $REASON, 'CheckFailed',
       CASE WHEN i % 5 = 2 THEN 'c' || (i % 7)::VARCHAR END,
       'fp' || (i % 35)::VARCHAR, 'k' || i::VARCHAR,
       's3://raw/part-' || (i % 13)::VARCHAR || '.json', (i % 100000)::VARCHAR]) AS context
FROM range($ROWS) t(i)
"""


def _error_rows(con: duckdb.DuckDBPyConnection, instant: str, rows: int) -> pa.Table:
    reason = "(['" + "', '".join(REASONS) + "'])[1 + i % 5]"
    sql = (_GEN.replace("$INSTANT", instant).replace("$REASON", reason)
           .replace("$ROWS", str(rows)))
    return con.sql(sql).to_arrow_table().cast(S.arrow_schema())


def build_templates(base: str, commits: int, error_rows: int) -> Table:
    """`commits` completed commits through the real APIs, the first with an error commit
    of `error_rows` rows."""
    table = Table(os.path.join(base, "events"))
    location = errortable.locate(table.storage.url(), {})
    con = duckdb.connect()
    for n in range(commits):
        extra = {"error_table": location.url} if n == 0 else {}
        instant = table.start_commit(heartbeat=False, extra=extra)
        part = f"day={n:02d}"
        file_name = f"part-{n:05d}_0-1-0_{instant}.parquet"
        table.markers(instant).create(part, file_name, "CREATE")  # marker first
        table.storage.put(table.storage.path(part, file_name), b"x")
        metadata: dict[str, Any] = {"partition_by": ["day"]}
        if n == 0:
            commit = ErrorCommit.open(table, instant, location=location)
            commit.markers()
            writer = commit.task_spec().writer("bench-task-0")
            writer.write_arrow(_error_rows(con, instant, error_rows))
            writer.close()
            metadata.update(commit.prepare([writer.stats]))
        rows = 1000 + n * 50
        table.commit(instant, [DataFile(f"{part}/{file_name}", size=rows * 40, rows=rows)],
                     metadata=metadata)
        if n == 0:
            commit.complete()
    return table


def _copy_instant(source: str, target: str, old: str, new: str,
                  replace: dict[str, str], shift_ms: int) -> list[str]:
    """The timeline files of instant `old` of the table at `source` as instant `new` of the
    table at `target` (text rewritten; the completion time shifted). Returns the files the
    completed instant names."""
    folder = os.path.join(source, ".markerstore", "timeline")
    named: list[str] = []
    for name in os.listdir(folder):
        if not name.startswith(old):
            continue
        with open(os.path.join(folder, name)) as handle:
            text = handle.read()
        for before, after in replace.items():
            text = text.replace(before, after)
        if name.endswith(".commit"):
            payload = json.loads(text)
            payload["timestamp"] += shift_ms
            named = [f["path"] for f in payload.get("files", [])]
            text = json.dumps(payload, indent=1, sort_keys=True)
        with open(os.path.join(target, ".markerstore", "timeline",
                               name.replace(old, new)), "w") as out:
            out.write(text)
    return named


def _link(source: str, target: str, path: str, old: str, new: str) -> None:
    destination = os.path.join(target, path.replace(old, new))
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    os.link(os.path.join(source, path.replace(new, old)), destination)


def build_table(base: str, commits: int, error_rows: int) -> Table:
    """`commits` commits, one in ERROR_EVERY with an error commit: copies of the
    templates under new instants (see the module's docstring)."""
    per_error_commit = error_rows // (commits // ERROR_EVERY)
    template = build_templates(os.path.join(base, "template"), ERROR_EVERY, per_error_commit)
    source, source_errors = template.path, template.path + "_errors"
    target, target_errors = os.path.join(base, "events"), os.path.join(base, "events_errors")
    for folder, origin in ((target, source), (target_errors, source_errors)):
        os.makedirs(os.path.join(folder, ".markerstore", "timeline"))
        for name in os.listdir(os.path.join(origin, ".markerstore")):
            if name.endswith(".json"):  # the table ids
                shutil.copy(os.path.join(origin, ".markerstore", name),
                            os.path.join(folder, ".markerstore", name))
    completed = template.completed()
    start = datetime.now(timezone.utc) - timedelta(days=60)
    for n in range(commits):
        instant, meta = completed[n % len(completed)]
        error_instant = meta.get("error_instant")
        when = start + timedelta(seconds=n * 500)
        new, new_error = format_instant(when), format_instant(when + timedelta(seconds=1))
        replace = {instant: new, source: target}
        if error_instant:
            replace[error_instant] = new_error
        shift = int((when - parse_instant(instant)).total_seconds() * 1000)
        for path in _copy_instant(source, target, instant, new, replace, shift):
            _link(source, target, path, instant, new)
        if error_instant:
            for path in _copy_instant(source_errors, target_errors, error_instant, new_error,
                                      replace, shift):
                _link(source_errors, target_errors, path, error_instant, new_error)
    return Table(target)


def _timed_report(url: str) -> dict[str, float]:
    """One report in a fresh process state: build, page, JSON, timed apart."""
    from markerstore.audit import build

    started = time.perf_counter()
    report = build(url)
    built = time.perf_counter()
    page = report.to_html()
    drawn = time.perf_counter()
    data = json.dumps(report.to_dict(), default=str)
    return {"build_s": built - started, "page_s": drawn - built,
            "json_s": time.perf_counter() - drawn, "page_bytes": len(page.encode()),
            "json_bytes": len(data.encode()), "charts": page.count("<figure"),
            "error_rows": report.to_dict()["quality"]["error_rows"],
            "commits": report.to_dict()["commits"]["completed"]}


def run(quick: bool = False) -> str:
    commits = COMMITS // 10 if quick else COMMITS
    error_rows = ERROR_ROWS // 10 if quick else ERROR_ROWS
    base = tempfile.mkdtemp(prefix="bench-report-")
    try:
        started = time.perf_counter()
        table = build_table(base, commits, error_rows)
        built = time.perf_counter() - started
        disk = sum(os.path.getsize(os.path.join(d, f))
                   for d, _, files in os.walk(base) for f in files)
        load_before = os.getloadavg()[0]
        cold = _timed_report(table.path)
        warm = _timed_report(table.path)
        started = time.perf_counter()  # the baseline: one GROUP BY over the error rows
        groups = errortable.query(table.path + "_errors", "SELECT fingerprint, count(*) "
                                  "FROM errors GROUP BY 1").fetchall()
        scan = time.perf_counter() - started
        load_after = os.getloadavg()[0]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert cold["commits"] == commits and cold["error_rows"] == error_rows, cold
    assert sum(n for _, n in groups) == error_rows
    return _section(quick, commits, error_rows, disk, built, cold, warm, scan,
                    (load_before, load_after))


def _section(quick: bool, commits: int, error_rows: int, disk: int, built: float,
             cold: dict[str, float], warm: dict[str, float], scan: float,
             loads: tuple[float, float]) -> str:
    load_before, load_after = loads
    lines = [
        "## `markerstore report` at scale" + (" (quick: a tenth of the sizes)" if quick else ""),
        "",
        f"A local table with {commits:,} commits and {error_rows:,} committed error rows "
        f"({commits // ERROR_EVERY:,} error commits of {error_rows // (commits // ERROR_EVERY):,}"
        f" rows, Parquet, {disk / 2**20:,.0f} MiB of files, the error files hard links of "
        f"one), built synthetically in {built:,.0f} s (`benchmarks/bench_report.py`: ten "
        "commits through the real APIs, copied under new instants). The report aggregates "
        f"in DuckDB over the SQL views (commits grouped into {MAX_POINTS} points, the error "
        "rows counted in one pass, the top fingerprints' examples and source files from a "
        "bounded sample of their rows) and draws "
        f"{cold['charts']} charts.",
        "",
        "| | first report in the process | again |",
        "|---|---|---|",
        f"| build (timeline, views, DuckDB aggregation) | {cold['build_s']:.2f} s | "
        f"{warm['build_s']:.2f} s |",
        f"| HTML page (matplotlib SVG charts) | {cold['page_s']:.2f} s | "
        f"{warm['page_s']:.2f} s |",
        f"| JSON | {cold['json_s']:.3f} s | {warm['json_s']:.3f} s |",
        f"| total | {cold['build_s'] + cold['page_s'] + cold['json_s']:.2f} s | "
        f"{warm['build_s'] + warm['page_s'] + warm['json_s']:.2f} s |",
        "",
        f"Baseline, measured in the same run: one `SELECT fingerprint, count(*) FROM errors "
        f"GROUP BY 1` over the same error table (`errortable.query`) took {scan:.2f} s, so "
        f"the report's build is **{warm['build_s'] / scan:.1f}x** one pass over the error "
        "rows (it makes one grouping pass and one bounded read of the top fingerprints' "
        f"rows, and reads the {commits:,} commits' metadata). Load average "
        f"{load_before:.1f} before the reports and {load_after:.1f} after, on 2 cores."
        + _busy_note(load_before, warm["build_s"] / scan),
        "",
        f"The page is {cold['page_bytes'] / 1024:,.0f} KiB (self-contained: CSS and inline "
        f"SVG), the JSON {cold['json_bytes'] / 1024:,.0f} KiB: both are bounded by the "
        "number of points, fingerprints and partitions shown, not by the table's size.",
        "",
    ]
    return "\n".join(lines)


def _busy_note(load: float, ratio: float) -> str:
    """On a busy machine, what the ratio says the build takes on a quiet one."""
    if load < 2.5:
        return ""
    return (" The absolute times are several times a quiet machine's. The error table "
            f"section measured the same GROUP BY at {QUIET_SCAN_S} s at load 1.2: at that "
            f"speed the ratio puts the build at about {ratio * QUIET_SCAN_S:.0f} s (an "
            "estimate from this run's ratio, not a measurement).")
