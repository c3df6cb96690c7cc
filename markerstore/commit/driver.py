"""The driver side of one write, engine-neutral: start, hand out a TaskSpec, commit, abort.

    job = WriteJob(table, partition_by=["day"], conflict_mode="replace").start()
    results = [run_task(job.spec, batches, attempt) for ...]   # in executors
    commit = job.commit(winning_results)                       # or job.abort()
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.commit.conflict import FAIL, check_committed
from markerstore.commit.job import JobCommitter
from markerstore.commit.names import check_write_uuid
from markerstore.commit.ports import ErrorTables, ErrorWrite
from markerstore.commit.recovery import recover, rollback
from markerstore.commit.result import CommitResult
from markerstore.commit.runner import TaskHook, TaskSpec
from markerstore.commit.staging import resolve_mode, staging_for
from markerstore.commit.stats import TaskResult
from markerstore.commit.task import BatchValidator, ErrorSinkFactory
from markerstore.errors import ConfigError
from markerstore.formats import check_write, publishers_of
from markerstore.formats.repair import refuse_foreign_commits_of
from markerstore.markers import BATCHED, DIRECT, RollbackResult, ensure_marker_type
from markerstore.table import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ErrorTableSpec:
    """What the error table's validator checks: the target schema (casts), the record
    key, and named checks (SQL boolean expressions)."""

    schema: pa.Schema
    key: str | None = None
    checks: Mapping[str, str] = field(default_factory=dict)


class WriteJob:
    """One write to a table, seen from the driver."""

    def __init__(self, table: Table, *, partition_by: Sequence[str] = (),
                 conflict_mode: str | None = None, marker_url: str | None = None,
                 marker_token: str | None = None,
                 validator: BatchValidator | None = None,
                 error_sink: ErrorSinkFactory | None = None, task_hook: TaskHook | None = None,
                 metadata: Mapping[str, Any] | None = None,
                 error_table: ErrorTableSpec | None = None,
                 error_tables: ErrorTables | None = None,
                 schema: pa.Schema | None = None, failfast: bool = False) -> None:
        settings = table.settings
        self.table = table
        self.partition_by = tuple(partition_by)
        if len(set(self.partition_by)) != len(self.partition_by):
            raise ConfigError(f"partition_by names a column twice: {list(self.partition_by)}")
        self.conflict_mode = conflict_mode or str(settings[config.CONFLICT_MODE])
        self.marker_type = str(settings[config.MARKERS_TYPE])
        if self.marker_type == "batched" and not marker_url:
            raise ConfigError("batched markers need a running marker server (marker_url)")
        self.marker_url = marker_url
        self.marker_token = marker_token
        self.staging_mode = resolve_mode(table.storage, settings[config.STAGING_MODE])
        self.validator = validator
        self.error_sink = error_sink
        self.task_hook = task_hook
        self.metadata = dict(metadata or {})
        if error_table is not None and error_tables is None:
            raise ConfigError("a write with an error table needs error_tables= (e.g. "
                              "errortable.ErrorTables())")
        self.error_table = error_table
        self.error_tables = error_tables
        self.error_commit: ErrorWrite | None = None
        self.schema = schema  # the columns the tasks write, where known at the start
        self.failfast = failfast  # no error row allowed (ingest's mode=FAILFAST)
        self.instant = ""
        self.write_uuid = ""
        self.started_at = 0.0
        self._spec: TaskSpec | None = None

    def start(self) -> WriteJob:
        """Recover failed writes, check conflicts that need no data and what the table's
        formats cannot take (`schema`, the partition columns, their settings), start the
        instant."""
        settings = self.table.settings
        write_uuid = settings[config.WRITE_UUID]
        if write_uuid is None and settings[config.UUID_REQUIRED]:
            raise ConfigError(f"{config.UUID_REQUIRED} is set but no write UUID was given "
                              f"({config.WRITE_UUID})")
        self.write_uuid = check_write_uuid(write_uuid or str(uuid.uuid4()))
        self.started_at = time.perf_counter()
        publishers = publishers_of(self.table)  # each reads its format once for both
        recover(self.table, error_tables=self.error_tables, publishers=publishers)
        refuse_foreign_commits_of(self.table, publishers)  # nothing published over another tool's
        # The one rule: a write publishes to every format, or fails here, before it writes.
        check_write(self.table, self.schema, self.partition_by, publishers)
        if self.error_table is not None:
            assert self.error_tables is not None
            self.error_tables.check_formats(self.table)
        if self.conflict_mode == FAIL and not self.partition_by:
            # The directory committer's check: fail before any task runs.
            check_committed(self.table, FAIL, [""])
        extra = {"partition_by": list(self.partition_by), "conflict_mode": self.conflict_mode,
                 "staging": self.staging_mode, "markers": self.marker_type}
        if self.error_table is not None:
            assert self.error_tables is not None
            extra["error_table"] = self.error_tables.location(self.table)
        self.instant = self.table.start_commit(self.write_uuid, "write", extra=extra,
                                               rollback_failed=False)
        try:
            self._open_markers()
            if self.error_table is not None:
                self._open_error_table()
        except BaseException:
            self._roll_back()
            raise
        return self

    def _open_error_table(self) -> None:
        """Open the error instant; tasks get its sink, and its validator when the write
        has nothing more specific."""
        assert self.error_table is not None and self.error_tables is not None
        self.error_commit = self.error_tables.open(self.table, self.instant)
        self.error_sink = self.error_commit.task_sink()
        if self.validator is None:
            self.validator = self.error_commit.validator(
                self.error_table.schema, self.error_table.key, self.partition_by,
                self.error_table.checks)

    def _roll_back(self) -> RollbackResult:
        return rollback(self.table, self.instant, force=True, roll_forward=False,
                        error_tables=self.error_tables)

    def _open_markers(self) -> None:
        """Write the instant's MARKERS.type before any task runs (the marker server checks
        the same file when it first flushes)."""
        ensure_marker_type(self.table.storage, self.instant,
                           BATCHED if self.marker_type == "batched" else DIRECT)

    @property
    def spec(self) -> TaskSpec:
        """What each task attempt needs (picklable)."""
        if not self.instant:
            raise RuntimeError("start() the write first")
        if self._spec is None:
            self._spec = TaskSpec(
                table_url=self.table.storage.url(), instant=self.instant,
                write_uuid=self.write_uuid,
                staging_mode=self.staging_mode,
                storage_options=dict(self.table.storage.storage_options),
                options=self.table.settings.explicit(), partition_by=self.partition_by,
                marker_type=self.marker_type, marker_url=self.marker_url,
                marker_token=self.marker_token,
                validator=self.validator, error_sink=self.error_sink,
                task_hook=self.task_hook, formats=self.table.formats())
        return self._spec

    def committer(self) -> JobCommitter:
        staging = staging_for(self.table.storage, self.instant, self.write_uuid,
                              self.table.settings, self.staging_mode)
        metadata = {"partition_by": list(self.partition_by), **self.metadata}
        return JobCommitter(self.table, self.instant, conflict_mode=self.conflict_mode,
                            partitioned=bool(self.partition_by), staging=staging,
                            metadata=metadata, error_commit=self.error_commit,
                            error_tables=self.error_tables, failfast=self.failfast)

    def commit(self, results: Iterable[TaskResult], *, sealed: bool = False) -> CommitResult:
        """Job commit from the winning attempts' results (one per task); `sealed`: see
        JobCommitter.commit."""
        result = self.committer().commit(results, sealed=sealed)
        result.duration = time.perf_counter() - self.started_at
        return result

    def abort(self) -> RollbackResult:
        """Roll the write back (idempotent); the error instant follows the main one."""
        result = self._roll_back()
        if self.error_commit is not None:
            self.error_commit.abort()
        return result
