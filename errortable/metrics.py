"""The failed-record count metric: per commit, by reason.

The same counts go to the main commit's metadata (``error_records``), the log (one line
per commit) and the process-wide registry :mod:`markerstore.metrics` (counter
``markerstore_failed_records_total`` by table and reason, shown on every marker server's
``/metrics``). :func:`snapshot` and :func:`prometheus_lines` read that counter, for
processes without a marker server; this module keeps only each table's last commit.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from markerstore import metrics as process_metrics
from markerstore.config import FAILED_RECORDS_HELP, FAILED_RECORDS_METRIC

log = logging.getLogger("errortable")

_lock = threading.Lock()
_last: dict[str, dict[str, Any]] = {}                  # table -> last commit's counts


def error_counts(stats: Iterable[Any]) -> dict[str, int]:
    """Error rows by reason over error file stats (ErrorFileStats or their dicts)."""
    counts: Counter[str] = Counter()
    for item in stats:
        by_reason = item.get("counts") if isinstance(item, Mapping) else item.counts
        counts.update({str(k): int(v) for k, v in (by_reason or {}).items()})
    return dict(sorted(counts.items()))


def record_commit(table: str, instant: str, counts: Mapping[str, int]) -> None:
    """Log one commit's failed-record counts and add them to the process totals."""
    total = sum(counts.values())
    detail = ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "none"
    log.info("commit %s of %s: %d failed record(s) (%s)", instant, table, total, detail)
    with _lock:
        for reason, n in counts.items():
            process_metrics.failed_records(table, reason, int(n))
        _last[table] = {"instant": instant, "total": total, "by_reason": dict(counts)}


def snapshot() -> dict[str, Any]:
    """Totals since the process started, by table and reason, and each table's last commit."""
    with _lock:
        totals: dict[str, dict[str, int]] = {}
        for (table, reason), n in sorted(process_metrics.failed_record_totals().items()):
            totals.setdefault(table, {})[reason] = n
        return {"totals": totals, "last_commit": {k: dict(v) for k, v in _last.items()}}


def reset() -> None:
    """Start counting afresh (the process registry's failed-record counter too)."""
    with _lock:
        process_metrics.REGISTRY.forget(FAILED_RECORDS_METRIC)
        _last.clear()


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus_lines() -> list[str]:
    """The metric in Prometheus text format: a counter by table and reason, and a gauge of
    the last commit's failed records by table."""
    snap = snapshot()
    name = FAILED_RECORDS_METRIC  # the marker server's /metrics shows the same counter
    lines = [f"# HELP {name} {FAILED_RECORDS_HELP}", f"# TYPE {name} counter"]
    for table, by_reason in snap["totals"].items():
        for reason, n in by_reason.items():
            lines.append(f'{name}{{table="{_label(table)}",reason="{_label(reason)}"}} {n}')
    lines += ["# HELP markerstore_error_records_last_commit Failed records of the last commit.",
              "# TYPE markerstore_error_records_last_commit gauge"]
    for table, last in snap["last_commit"].items():
        lines.append(f'markerstore_error_records_last_commit{{table="{_label(table)}",'
                     f'instant="{_label(last["instant"])}"}} {last["total"]}')
    return lines
