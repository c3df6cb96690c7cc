"""Which chart shows what: the report page and the notebook objects (``Table``,
``CommitResult``, ``ErrorStats``) draw their charts through these functions, from plain
rows (the report's ``--json`` shapes), so a figure looks the same everywhere."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from markerstore.render.charts import PALETTE, Chart, Series

# One colour per error reason, the same in every chart.
REASON_COLORS = {"parse": PALETTE[0], "cast": PALETTE[1], "null": PALETTE[2],
                 "key": PALETTE[3], "partition": PALETTE[4], "check": PALETTE[5],
                 "exception": PALETTE[6]}
ROWS_COLOR, ERRORS_COLOR = PALETTE[0], PALETTE[5]


def instant_label(instant: str) -> str:
    """yyyyMMddHHmmssSSS as 'MM-dd HH:mm:ss'."""
    if len(instant) < 14 or not instant.isdigit():
        return instant
    return f"{instant[4:6]}-{instant[6:8]} {instant[8:10]}:{instant[10:12]}:{instant[12:14]}"


def point_label(point: Mapping[str, Any]) -> str:
    """A commit, or a group of consecutive commits ('MM-dd HH:mm:ss +N')."""
    label = instant_label(str(point["first_instant"]))
    extra = int(point.get("commits", 1)) - 1
    return f"{label} +{extra}" if extra else label


def commit_point(instant: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A completed commit's metadata as a point of :func:`commit_charts` (the shape of the
    report's ``commits.points``, for one commit)."""
    counts = meta.get("counts") or {}
    recorded = meta.get("error_records")
    by_reason: dict[str, int] = {str(k): int(v) for k, v in recorded.items()} \
        if isinstance(recorded, dict) else {}
    errors = sum(by_reason.values())
    rows = int(counts.get("rows") or 0)
    duration = None
    if isinstance(meta.get("timestamp"), (int, float)) and instant[:17].isdigit():
        from datetime import datetime, timezone

        started = datetime.strptime(instant[:17] + "000", "%Y%m%d%H%M%S%f").replace(
            tzinfo=timezone.utc)
        duration = round(meta["timestamp"] / 1000 - started.timestamp(), 3)
    return {"first_instant": instant, "last_instant": instant, "commits": 1, "rows": rows,
            "error_records": errors, "by_reason": by_reason,
            "files": int(counts.get("files") or 0), "bytes": int(counts.get("bytes") or 0),
            "files_cleaned": int(counts.get("files_cleaned") or 0), "duration_s": duration,
            "rows_in": rows + errors,
            "error_rate": round(errors / (rows + errors), 6) if rows + errors else 0.0}


def _total(values: Sequence[Any]) -> int:
    return int(sum(v or 0 for v in values))


def commit_charts(points: Sequence[Mapping[str, Any]],
                  events: Sequence[Mapping[str, Any]] = (), *, grouped: bool = False
                  ) -> list[Chart]:
    """Rows written, error records by reason, error rate and commit duration per commit
    (or group of commits), with rollbacks, roll forwards and instants in flight as event
    lines."""
    if not points:
        return []
    labels = [point_label(p) for p in points]
    per = "per group of commits" if grouped else "per commit"
    # a roll forward is drawn on its own commit's bar; the others before the next commit
    marks = [(float(e["point"]) + (0.5 if e["kind"] == "rolled forward" else 0.0),
              str(e["kind"]), str(e["instant"])) for e in events]
    rows = [p["rows"] for p in points]
    reasons = sorted({r for p in points for r in p.get("by_reason", {})},
                     key=lambda r: (r not in REASON_COLORS, list(REASON_COLORS).index(r)
                                    if r in REASON_COLORS else 0, r))
    errors = [Series(r, [p.get("by_reason", {}).get(r, 0) for p in points],
                     REASON_COLORS.get(r)) for r in reasons] or \
        [Series("error records", [p["error_records"] for p in points], ERRORS_COLOR)]
    event_text = (f"; {len(marks)} event(s) marked: " + ", ".join(
        sorted({k for _, k, _ in marks})) if marks else "")
    return [
        Chart("commit-rows", f"Rows written {per}", labels,
              [Series("rows written", rows, ROWS_COLOR)], "rows", "commit time",
              f"Rows written {per}, {len(points)} bar(s), {_total(rows):,} rows in all"
              + event_text, events=marks),
        Chart("commit-errors", f"Error records {per}, by reason", labels, errors,
              "error records", "commit time",
              f"Error records {per} stacked by reason "
              f"({', '.join(s.name for s in errors)}), "
              f"{_total([p['error_records'] for p in points]):,} in all" + event_text,
              stacked=True, events=marks),
        Chart("commit-error-rate", f"Error rate {per}", labels,
              [Series("error rate", [p.get("error_rate", 0) for p in points],
                      ERRORS_COLOR)], "error records / rows in", "commit time",
              f"Error records as a share of rows in {per}; the highest is "
              f"{max(p.get('error_rate', 0) for p in points):.4%}", percent=True,
              events=marks),
        Chart("commit-duration", f"Commit duration {per}" + (" (longest)" if grouped else ""),
              labels, [Series("seconds", [p.get("duration_s") for p in points], PALETTE[2])],
              "seconds", "commit time",
              f"Seconds from the start of a write to its commit {per}; the longest took "
              f"{max(p.get('duration_s') or 0 for p in points):,.1f} s", events=marks),
        Chart("commit-cleaned", f"Files cleaned by reconcile {per}", labels,
              [Series("files cleaned", [p.get("files_cleaned", 0) for p in points],
                      PALETTE[1])], "files", "commit time",
              "Files of failed or duplicate task attempts that reconcile deleted at commit "
              f"{per}, {_total([p.get('files_cleaned', 0) for p in points]):,} in all",
              events=marks),
    ]


def check_chart(checks: Sequence[Mapping[str, Any]], points: Sequence[Mapping[str, Any]],
                *, grouped: bool = False) -> Chart | None:
    """The pass rate of each named check per commit: no bar where no commit of the point
    applied the check."""
    if not checks or not points:
        return None
    per = "per group of commits" if grouped else "per commit"
    series = [Series(str(c["check"]), list(c["pass_rate_per_point"]),
                     PALETTE[i % len(PALETTE)]) for i, c in enumerate(checks)]
    worst = min((v for s in series for v in s.values if v is not None), default=1.0)
    floor = max(0.0, math.floor((worst - (1 - worst)) * 100) / 100) if worst < 1 else 0.9
    return Chart("check-pass-rate", f"Pass rate of each check {per}",
                 [point_label(p) for p in points], series, "rows passing", "commit time",
                 f"Share of rows in that passed each check {per}; the lowest is "
                 f"{worst:.4%}; the axis starts at {floor:.0%}", percent=True, floor=floor)


def reason_chart(by_reason: Mapping[str, int], chart_id: str = "reasons") -> Chart | None:
    """Error rows by reason."""
    if not by_reason:
        return None
    names = list(by_reason)
    return Chart(chart_id, "Error rows by reason", names,
                 [Series("error rows", [by_reason[n] for n in names], ERRORS_COLOR)],
                 "error rows", "reason",
                 "Error rows by reason: " + ", ".join(f"{n} {by_reason[n]:,}" for n in names),
                 horizontal=True)


def fingerprint_chart(fingerprints: Sequence[Mapping[str, Any]],
                      chart_id: str = "fingerprints") -> Chart | None:
    """The largest fingerprint groups (one kind of failure each)."""
    if not fingerprints:
        return None
    labels = [f"{f.get('reason') or '?'}: {str(f.get('fingerprint'))[:12]}"
              for f in fingerprints]
    counts = [int(f["rows"]) for f in fingerprints]
    return Chart(chart_id, "Top fingerprints (kinds of failure)", labels,
                 [Series("error rows", counts, ERRORS_COLOR)], "error rows", "",
                 f"The {len(counts)} largest fingerprint groups; the largest holds "
                 f"{counts[0]:,} error rows", horizontal=True)


def partition_charts(partitions: Sequence[Mapping[str, Any]], *, other: Mapping[str, Any]
                     | None = None, chart_prefix: str = "partition") -> list[Chart]:
    """Rows and bytes per partition (the largest first; skew shows as one long bar)."""
    if not partitions:
        return []
    labels = [str(p["partition"]) or "(unpartitioned)" for p in partitions]
    counts = [p["rows"] for p in partitions]
    sizes = [p["bytes"] for p in partitions]
    rest = ""
    if other and other.get("partitions"):
        rest = f"; {other['partitions']:,} smaller partition(s) not drawn"
    return [
        Chart(f"{chart_prefix}-bytes", "Bytes per partition", labels,
              [Series("bytes", sizes, PALETTE[0])], "bytes", "",
              f"Bytes of live files in the {len(labels)} largest partition(s): from "
              f"{min(sizes):,} to {max(sizes):,}" + rest, horizontal=True),
        Chart(f"{chart_prefix}-rows", "Rows per partition", labels,
              [Series("rows", counts, PALETTE[2])], "rows", "",
              f"Rows of live files in the same partition(s): from {min(counts):,} to "
              f"{max(counts):,}" + rest, horizontal=True),
    ]


def size_chart(histogram: Sequence[Mapping[str, Any]]) -> Chart | None:
    """How many live files of each size (powers of two)."""
    if not histogram:
        return None
    labels = [str(h["label"]) for h in histogram]
    files = [int(h["files"]) for h in histogram]
    return Chart("file-sizes", "File size distribution", labels,
                 [Series("files", files, PALETTE[4])], "files", "file size",
                 f"Live files by size, in powers of two: {sum(files):,} files, most of "
                 f"them {labels[files.index(max(files))]}")


def day_chart(by_day: Sequence[Mapping[str, Any]]) -> Chart | None:
    """Error rows per day."""
    if not by_day:
        return None
    labels = [str(d["day"]) for d in by_day]
    counts = [int(d["rows"]) for d in by_day]
    return Chart("errors-by-day", "Error rows per day", labels,
                 [Series("error rows", counts, ERRORS_COLOR)], "error rows", "day",
                 f"Committed error rows per day over {len(labels)} day(s), "
                 f"{sum(counts):,} in all")
