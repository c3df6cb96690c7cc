"""CommitResult: what a write committed, what it cleaned, what it cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markerstore.formats.publish import FormatOutcome
from markerstore.render import figures
from markerstore.render.charts import charts_html
from markerstore.render.html import fields_html
from markerstore.table import DataFile


@dataclass
class CommitResult:
    """The outcome of one committed write.

    `requests` counts storage requests by kind, of the driver and every winning task
    attempt together (`driver_requests` is the driver's share). `timings` holds seconds
    per step: job (the Spark job), commit (job commit), and the tasks' own steps summed
    over winning attempts (task_markers, task_write, task_finish, task_upload).
    `source` holds what the tasks' parsers counted in the source, for a write whose
    tasks read it themselves (ingest): ``records`` and ``lines``; empty otherwise.
    `formats` holds, for a table that publishes Delta or Iceberg, where each format stands
    after the commit (``position``: ``v12``, ``snapshot <id>``) or which completed
    instants it does not hold yet and why (``pending``, ``reason``): :attr:`published`
    says it in one line.
    """

    path: str
    instant: str
    write_uuid: str
    files: list[DataFile]
    rows_written: int
    error_records: dict[str, int] = field(default_factory=dict)
    files_cleaned: int = 0
    duration: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    driver_requests: dict[str, int] = field(default_factory=dict)
    conflict_mode: str = "append"
    replaced_files: list[str] = field(default_factory=list)
    error_files: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    source: dict[str, int] = field(default_factory=dict)
    formats: list[FormatOutcome] = field(default_factory=list)

    @property
    def published(self) -> str:
        """``published: delta v12, iceberg pending (reason)``; empty without formats."""
        return "published: " + ", ".join(f.text() for f in self.formats) \
            if self.formats else ""

    @property
    def num_files(self) -> int:
        return len(self.files)

    @property
    def bytes_written(self) -> int:
        return sum(f.size or 0 for f in self.files)

    @property
    def partitions(self) -> list[str]:
        return sorted({f.partition for f in self.files})

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "instant": self.instant, "write_uuid": self.write_uuid,
                "files": [f.path for f in self.files], "num_files": self.num_files,
                "bytes_written": self.bytes_written, "rows_written": self.rows_written,
                "error_records": dict(self.error_records), "files_cleaned": self.files_cleaned,
                **({"source": dict(self.source)} if self.source else {}),
                "duration": round(self.duration, 3), "requests": dict(self.requests),
                "driver_requests": dict(self.driver_requests),
                "conflict_mode": self.conflict_mode,
                "replaced_files": list(self.replaced_files),
                **({"formats": [f.to_dict() for f in self.formats]} if self.formats else {}),
                "timings": {k: round(v, 3) for k, v in self.timings.items()}}

    def _request_text(self) -> str:
        shown = {k: v for k, v in self.requests.items() if k != "total" and v}
        return ", ".join(f"{k} {v}" for k, v in shown.items()) or "none"

    def __repr__(self) -> str:
        errors = sum(self.error_records.values())
        return (f"CommitResult(instant={self.instant!r}, files={self.num_files}, "
                f"rows_written={self.rows_written}, error_records={errors}, "
                f"files_cleaned={self.files_cleaned}, duration={self.duration:.2f}s, "
                f"requests={self.requests.get('total', 0)} [{self._request_text()}], "
                f"mode={self.conflict_mode}, path={self.path!r}"
                f"{', ' + self.published if self.formats else ''})")

    def _repr_html_(self) -> str:
        rows = [("path", self.path), ("instant", self.instant), ("write UUID", self.write_uuid),
                ("conflict mode", self.conflict_mode),
                ("files", f"{self.num_files} in {len(self.partitions)} partition(s), "
                          f"{self.bytes_written:,} bytes"),
                ("rows written", f"{self.rows_written:,}"),
                ("error records", ", ".join(f"{k}: {v}" for k, v in
                                            sorted(self.error_records.items())) or "0"),
                ("files cleaned", str(self.files_cleaned)),
                ("files replaced", str(len(self.replaced_files))),
                ("duration", f"{self.duration:.2f} s"),
                ("storage requests", f"{self.requests.get('total', 0)} "
                                     f"({self._request_text()})")]
        if self.formats:
            rows.append(("table formats", self.published.removeprefix("published: ")))
        return fields_html(rows, caption="markerstore commit") + charts_html(
            [*figures.partition_charts(self._partition_rows(), chart_prefix="commit"),
             figures.reason_chart(dict(sorted(self.error_records.items(),
                                              key=lambda kv: -kv[1])), "commit-reasons")],
            unique=True)

    def _partition_rows(self) -> list[dict[str, Any]]:
        """Files, rows and bytes per partition, the largest 20 first."""
        by: dict[str, dict[str, Any]] = {}
        for f in self.files:
            row = by.setdefault(f.partition, {"partition": f.partition, "files": 0,
                                              "rows": 0, "bytes": 0})
            row["files"] += 1
            row["rows"] += f.rows or 0
            row["bytes"] += f.size or 0
        return sorted(by.values(), key=lambda r: (-r["bytes"], r["partition"]))[:20]
