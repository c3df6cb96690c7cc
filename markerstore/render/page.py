"""The report as HTML: a self-contained page (``markerstore report -o``) and the same
sections as a notebook fragment (``Report._repr_html_``).

The page holds everything it shows: inline CSS and inline SVG charts; no script, font,
image or link is fetched, and its Content-Security-Policy forbids any request, so it
opens the same from a file, an S3 console download or an e-mail attachment. Its colours
follow the reader's light or dark setting. Every figure in it is also in the report's
``--json``: the elements with ``data-figure="<dotted path>"`` show the value at that path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markerstore.render import figures
from markerstore.render.charts import Chart, available, charts_html
from markerstore.render.html import cell, fields_html, table_html, text

CSS = """
.ms-report { --ms-muted: #5a5f66; --ms-line: #d8dbe0; --ms-grid: #0000002a; --ms-ok: #007a5a;
  --ms-bad: #b34700; }
@media (prefers-color-scheme: dark) {
  .ms-report { --ms-muted: #a8adb4; --ms-line: #3a3e44; --ms-grid: #ffffff33; --ms-ok: #3fd0a4;
    --ms-bad: #ff9a52; } }
.ms-report { max-width: 1080px; margin: 0 auto; padding: 16px 24px 48px; }
.ms-report h1 { font-size: 1.5em; margin: 0.4em 0 0.1em; }
.ms-report h2 { font-size: 1.2em; margin: 1.6em 0 0.3em; border-bottom: 1px solid var(--ms-line);
  padding-bottom: 0.2em; }
.ms-report h3 { font-size: 1em; margin: 1.2em 0 0.3em; }
.ms-report .note { color: var(--ms-muted); margin: 0.2em 0 0.8em; }
.ms-report .verdict { font-size: 1.15em; font-weight: 600; }
.ms-report .verdict.ok { color: var(--ms-ok); }
.ms-report .verdict.bad { color: var(--ms-bad); }
.ms-report table { border-collapse: collapse; margin: 0.4em 0 1em; font-size: 0.92em; }
.ms-report th, .ms-report td { text-align: left; padding: 2px 10px 2px 0;
  border-bottom: 1px solid var(--ms-line); vertical-align: top; }
.ms-report td { overflow-wrap: anywhere; max-width: 44em; }
.ms-report code { font-size: 0.95em; }
.ms-report nav a { margin-right: 1em; color: inherit; }
.ms-chart { margin: 0.6em 0 1.2em; }
.ms-chart svg { width: 100%; height: auto; max-width: 760px; display: block; }
.ms-chart figcaption { color: var(--ms-muted); font-size: 0.85em; }
@media print { .ms-report { max-width: none; } .ms-chart { break-inside: avoid; } }
"""
PAGE_CSS = """
:root { color-scheme: light dark; }
body { margin: 0; background: #ffffff; color: #1d1f21;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
@media (prefers-color-scheme: dark) { body { background: #15171a; color: #e8e9eb; } }
"""
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; "
       "base-uri 'none'; form-action 'none'")


def figure(path: str, value: Any, suffix: str = "") -> str:
    """A number of the report, tagged with its path in the JSON (``data-figure``)."""
    shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else \
        cell(value)
    return f'<span data-figure="{text(path)}">{shown}</span>{text(suffix)}'


def _charts(charts: Sequence[Chart | None]) -> str:
    if any(c is not None for c in charts) and not available():
        return ("<p class='note'>Charts need matplotlib: "
                "<code>pip install 'markerstore[report]'</code>.</p>")
    return charts_html(charts)


def _header(data: Mapping[str, Any]) -> str:
    t, verdict = data["table"], data["verdict"]
    last = t["last_commit"] or {}
    schema = ", ".join(f"{c['name']} {c['type']}" for c in t["schema"] or []) or "(unknown)"
    since = data["since"]
    fields = [
        ("table", t["url"]), ("table id", t["table_id"] or "(none)"),
        ("partition columns", ", ".join(t["partition_columns"]) or "(none)"),
        ("schema", schema),
        ("last commit", f"{last.get('instant')} ({last.get('operation')}, "
                        f"completed {last.get('completed_at')})" if last else "(none)"),
    ] + ([("since", f"{since['given']} (instant {since['instant']})")] if since else [])
    size = (f"<p>{figure('table.files', t['files'])} live file(s), "
            f"{figure('table.rows', t['rows'])} rows, "
            f"{figure('table.bytes', t['bytes'])} bytes</p>")
    klass = "ok" if verdict["healthy"] else "bad"
    findings = ""
    if verdict["findings"]:
        findings = table_html(verdict["findings"], ["kind", "instant", "what"])
    return (f"<p class='verdict {klass}' data-figure='verdict.summary'>"
            f"{text(verdict['summary'])}</p>{findings}{fields_html(fields)}{size}")


def _commits(data: Mapping[str, Any]) -> str:
    c = data["commits"]
    charts = figures.commit_charts(c["points"], c["events"], grouped=c["grouped"])
    counts = (f"<p>{figure('commits.completed', c['completed'])} completed, "
              f"{figure('commits.rolled_back', c['rolled_back'])} rolled back, "
              f"{figure('commits.inflight', c['inflight'])} in flight, "
              f"{figure('commits.corrupt', c['corrupt'])} corrupt</p>")
    recent = ""
    if c["recent"]:
        recent = "<h3>Newest instants</h3>" + table_html(c["recent"])
    return counts + _charts(charts) + recent


def _quality(data: Mapping[str, Any]) -> str:
    q, c = data["quality"], data["commits"]
    parts = [f"<p>{figure('quality.error_rows', q['error_rows'])} committed error row(s)</p>"]
    parts.append(_charts([figures.reason_chart(q["by_reason"]),
                          figures.check_chart(q["checks"], c["points"], grouped=c["grouped"]),
                          figures.fingerprint_chart(q["fingerprints"])]))
    if q["checks"]:
        parts.append("<h3>Checks</h3>" + table_html(
            [{"check": k["check"], "failed": k["failed"], "pass rate": k["pass_rate"]}
             for k in q["checks"]]))
    for i, fp in enumerate(q["fingerprints"]):
        sources = "; ".join(f"{s['file']} lines {s['first_line']}–{s['last_line']} "
                            f"({s['rows']:,})" for s in fp["sources"] if s["file"]) or \
            "(not recorded)"
        parts.append(
            f"<h3>{text(fp.get('reason') or '?')}: <code>{text(fp['fingerprint'])}</code> — "
            f"{figure(f'quality.fingerprints.{i}.rows', fp['rows'])} row(s)</h3>"
            + fields_html([("detail", fp.get("detail")),
                           ("first seen", fp["first_seen"]), ("last seen", fp["last_seen"]),
                           ("example message", fp.get("example_message")),
                           ("record key", fp.get("record_key")),
                           ("example record", fp.get("example_record")),
                           ("source files", sources)]))
    return "".join(parts)


def _layout(data: Mapping[str, Any]) -> str:
    lay = data["layout"]
    counts = (f"<p>{figure('layout.partitions', lay['partitions'])} partition(s), "
              f"{figure('layout.small_files', lay['small_files'])} small file(s) (under "
              f"{figure('layout.small_file_bytes', lay['small_file_bytes'])} bytes), skew "
              f"(largest partition / median) {figure('layout.skew', lay['skew'])}</p>")
    charts = figures.partition_charts(lay["top_partitions"], other=lay["other_partitions"])
    return counts + _charts([*charts, figures.size_chart(lay["size_histogram"])])


def _recovery(data: Mapping[str, Any]) -> str:
    rec = data["recovery"]
    parts = [f"<p>{figure('recovery.dead_writers', rec['dead_writers'])} dead writer(s), "
             f"{figure('recovery.pending_uploads', rec['pending_uploads'])} pending "
             "upload(s)</p>"]
    if rec["inflight"]:
        parts.append("<h3>In flight</h3>" + table_html(rec["inflight"]))
    if rec["recent_rollbacks"]:
        parts.append("<h3>Recent rollbacks</h3>" + table_html(
            [{"instant": i} for i in rec["recent_rollbacks"]]))
    if rec.get("recent_roll_forwards"):
        parts.append("<h3>Recently rolled forward</h3>" + table_html(
            [{"instant": i} for i in rec["recent_roll_forwards"]]))
    if rec.get("formats"):
        parts.append("<h3>Table formats</h3>" + table_html(
            rec["formats"], ["format", "position", "backlog", "oldest_pending", "reason"]))
    check = rec["verify"]
    if check is None:
        parts.append(_last_verify(rec.get("last_verify")))
    else:
        verdict = "consistent" if check["consistent"] else \
            f"{len(check['findings'])} finding(s)"
        parts.append(f"<h3>Verify: {text(verdict)}</h3>" + fields_html(
            [("tables checked", ", ".join(check["tables"])),
             ("files on storage", check["files_listed"])]))
        if check["findings"]:
            parts.append(table_html(check["findings"]))
    return "".join(parts)


def _last_verify(last: Mapping[str, Any] | None) -> str:
    """The summary the last ``markerstore verify`` kept in the table, if any."""
    run = ("<code>--verify</code> runs <code>markerstore verify</code>'s checks now")
    if last is None:
        return f"<p class='note'>No verify recorded for this table ({run}).</p>"
    if "unreadable" in last:
        return (f"<p class='note'>The last verify's summary cannot be read: "
                f"{text(last['unreadable'])} ({run}).</p>")
    verdict = ("consistent" if last["consistent"] else
               f"{figure('recovery.last_verify.findings', last['findings'])} finding(s)")
    repaired = ", with --repair" if last.get("repair") else ""
    return (f"<h3>Last verify</h3><p>{text(str(last['at']))} on "
            f"{text(str(last.get('host', '?')))}{repaired}: {verdict} "
            f"({figure('recovery.last_verify.files_listed', last.get('files_listed'))} "
            f"files on storage). <span class='note'>{run}.</span></p>")


SECTIONS = (("commits", "Commits over time", _commits), ("quality", "Data quality", _quality),
            ("layout", "Layout", _layout), ("recovery", "Markers and recovery", _recovery))


def report_fragment(data: Mapping[str, Any]) -> str:
    """The report's sections inside one ``<div class="ms-report">`` (for notebooks)."""
    parts = [f"<h1>Table report</h1>{_header(data)}"]
    for key, title, render in SECTIONS:
        parts.append(f"<section id='{key}'><h2>{text(title)}</h2>"
                     f"<p class='note'>{text(data['notes'][key])}</p>{render(data)}</section>")
    parts.append(f"<p class='note'>Generated {text(data['generated_at'])} by "
                 "<code>markerstore report</code>; <code>--json</code> prints the same "
                 "figures.</p>")
    return f"<div class='ms-report'><style>{CSS}</style>{''.join(parts)}</div>"


def report_page(data: Mapping[str, Any]) -> str:
    """The whole self-contained HTML document."""
    nav = "".join(f"<a href='#{key}'>{text(title)}</a>" for key, title, _ in SECTIONS)
    body = report_fragment(data).replace("<h1>Table report</h1>",
                                         f"<h1>Table report</h1><nav>{nav}</nav>", 1)
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Table report: {text(data['table']['url'])}</title>"
            f"<style>{PAGE_CSS}</style></head><body>{body}</body></html>\n")
