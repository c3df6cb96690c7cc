"""What a task attempt reports to the driver: one row per file, one summary row per task.

Rows travel as Arrow record batches (out of `mapInArrow`), so they have a fixed schema,
:data:`STATS_SCHEMA`; anything without a column of its own is JSON in ``info``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

FILE = "file"
TASK = "task"

STATS_SCHEMA = pa.schema([
    ("kind", pa.string()),
    ("path", pa.string()),
    ("rows", pa.int64()),
    ("bytes", pa.int64()),
    ("checksum", pa.string()),
    ("pending_upload", pa.string()),
    ("spark_partition", pa.int32()),
    ("task_attempt_id", pa.int64()),
    ("info", pa.string()),
])
# The same schema in Spark's DDL, for mapInArrow.
STATS_DDL = ("kind string, path string, rows long, bytes long, checksum string, "
             "pending_upload string, spark_partition int, task_attempt_id long, info string")


@dataclass(frozen=True)
class TaskAttempt:
    """One Spark task attempt (from `pyspark.TaskContext`)."""

    partition_id: int
    stage_id: int = 0
    attempt_number: int = 0
    task_attempt_id: int = 0

    @property
    def label(self) -> str:
        return f"{self.partition_id}-{self.stage_id}-{self.task_attempt_id}"


@dataclass(frozen=True)
class PendingUpload:
    """An S3 multipart upload that is uploaded but not completed (s3committer's
    PendingUpload): completing it makes the object visible, aborting it discards it."""

    bucket: str
    key: str
    upload_id: str
    parts: tuple[tuple[int, str], ...]
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "key": self.key, "upload_id": self.upload_id,
                "parts": [list(p) for p in self.parts], "size": self.size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingUpload:
        return cls(str(data["bucket"]), str(data["key"]), str(data["upload_id"]),
                   tuple((int(n), str(e)) for n, e in data["parts"]), int(data["size"]))

    @classmethod
    def from_json(cls, text: str | Mapping[str, Any] | None) -> PendingUpload | None:
        if text is None or text == "":
            return None
        data = json.loads(text) if isinstance(text, str) else text
        return cls.from_dict(data)


@dataclass(frozen=True)
class FileStats:
    """One data file a task attempt wrote (path relative to the table)."""

    path: str
    rows: int
    bytes: int
    checksum: str | None = None
    pending_upload: PendingUpload | None = None
    spark_partition: int = 0
    task_attempt_id: int = 0

    @property
    def partition(self) -> str:
        return self.path.rpartition("/")[0]

    def to_entry(self) -> dict[str, Any]:
        """The commit metadata entry (Table.commit's DataFile fields)."""
        entry: dict[str, Any] = {"path": self.path, "size": self.bytes, "rows": self.rows}
        if self.checksum:
            entry["checksum"] = self.checksum
        return entry

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["pending_upload"] = (self.pending_upload.to_dict()
                                  if self.pending_upload else None)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FileStats:
        return cls(str(data["path"]), int(data["rows"]), int(data["bytes"]),
                   data.get("checksum"), PendingUpload.from_json(data.get("pending_upload")),
                   int(data.get("spark_partition", 0)), int(data.get("task_attempt_id", 0)))


@dataclass
class TaskSummary:
    """What one task attempt did besides its files: rows read, error records by reason,
    error files (from the error sink), storage requests, and time spent per step; and
    for a task that read source files itself (ingest), what its parser counted there:
    ``source`` holds ``records`` (CSV records, JSON lines that are not blank, Parquet
    rows) and ``lines`` (physical lines of JSON and CSV files)."""

    attempt: TaskAttempt
    rows_in: int = 0
    error_records: dict[str, int] = field(default_factory=dict)
    error_files: list[dict[str, Any]] = field(default_factory=list)
    requests: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    source: dict[str, int] = field(default_factory=dict)

    def info(self) -> str:
        return json.dumps({"attempt": asdict(self.attempt), "rows_in": self.rows_in,
                           "error_records": self.error_records,
                           "error_files": self.error_files, "requests": self.requests,
                           "seconds": self.seconds, "source": self.source},
                          sort_keys=True, default=str)

    @classmethod
    def from_info(cls, text: str) -> TaskSummary:
        data = json.loads(text)
        return cls(TaskAttempt(**data["attempt"]), int(data.get("rows_in", 0)),
                   dict(data.get("error_records", {})), list(data.get("error_files", [])),
                   dict(data.get("requests", {})), dict(data.get("seconds", {})),
                   {str(k): int(v) for k, v in dict(data.get("source") or {}).items()})


@dataclass
class TaskResult:
    """A task attempt's report: its files and its summary."""

    files: list[FileStats]
    summary: TaskSummary

    def to_arrow(self) -> pa.RecordBatch:
        rows: dict[str, list[Any]] = {f.name: [] for f in STATS_SCHEMA}
        for stats in self.files:
            rows["kind"].append(FILE)
            rows["path"].append(stats.path)
            rows["rows"].append(stats.rows)
            rows["bytes"].append(stats.bytes)
            rows["checksum"].append(stats.checksum)
            rows["pending_upload"].append(json.dumps(stats.pending_upload.to_dict())
                                          if stats.pending_upload else None)
            rows["spark_partition"].append(stats.spark_partition)
            rows["task_attempt_id"].append(stats.task_attempt_id)
            rows["info"].append(None)
        rows["kind"].append(TASK)
        for name in ("path", "rows", "bytes", "checksum", "pending_upload"):
            rows[name].append(None)
        rows["spark_partition"].append(self.summary.attempt.partition_id)
        rows["task_attempt_id"].append(self.summary.attempt.task_attempt_id)
        rows["info"].append(self.summary.info())
        return pa.RecordBatch.from_pydict(rows, schema=STATS_SCHEMA)


def results_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[TaskResult]:
    """Group stats rows (dicts with the STATS_SCHEMA columns) back into task results, one per
    task attempt that reported."""
    files: dict[int, list[FileStats]] = {}
    summaries: dict[int, TaskSummary] = {}
    for row in rows:
        attempt_id = int(row["task_attempt_id"])
        if row["kind"] == TASK:
            summaries[attempt_id] = TaskSummary.from_info(row["info"])
        elif row["kind"] == FILE:
            files.setdefault(attempt_id, []).append(FileStats(
                str(row["path"]), int(row["rows"]), int(row["bytes"]), row["checksum"],
                PendingUpload.from_json(row["pending_upload"]), int(row["spark_partition"]),
                attempt_id))
        else:
            raise ValueError(f"unknown stats row kind {row['kind']!r}")
    missing = set(files) - set(summaries)
    if missing:
        raise ValueError(f"task attempts {sorted(missing)} reported files but no summary")
    return [TaskResult(files.get(a, []), summaries[a]) for a in sorted(summaries)]
