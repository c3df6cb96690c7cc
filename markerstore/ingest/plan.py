"""What every task of one ingest needs besides its write's job: the target schema, the
validation (key, partition columns, checks), the source splits and their storage options.
Both ways an ingest runs build their tasks from it (:meth:`IngestPlan.task`): the
function writer's ``mapInArrow`` on a classic session, the data source over Spark Connect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore.commit import WriteJob
from markerstore.ingest.options import IngestOptions
from markerstore.ingest.sources import SourceTask
from markerstore.ingest.task import IngestTask

# Each Spark task's splits: (the split, its file's CSV header, whether it drops the header)
Splits = list[list[tuple[SourceTask, str | None, bool]]]


@dataclass(frozen=True)
class IngestPlan:
    """One ingest's tasks, by number: `splits[i]` are the source splits (with their CSV
    header line) that Spark task `i` reads."""

    target: pa.Schema
    key: str | None = None
    columns: Sequence[str] = ()
    checks: dict[str, str] = field(default_factory=dict)
    storage_options: dict[str, Any] = field(default_factory=dict)  # the source's
    splits: Splits = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # the write's (reading options)
    case_sensitive: bool = False  # Spark's spark.sql.caseSensitive: how headers name columns

    def task(self, job: WriteJob) -> IngestTask:
        """The tasks' function, once the write's instant exists: it carries the job's task
        spec and the capture context (commit time, error table) to the executors."""
        import errortable

        errors: Any = job.error_commit  # errortable's ErrorTableLink, when enabled
        spec = errors.task_spec() if errors is not None else None
        columns = list(self.columns)
        formats = IngestOptions.from_settings(self.options).value_formats()
        validator = (spec.validator(self.target, self.key, columns, dict(self.checks),
                                    formats=formats)
                     if spec is not None else
                     errortable.Validator(self.target, self.key, columns, dict(self.checks),
                                          formats=formats))
        return IngestTask(job.spec, validator, spec or _NoSpec(), self.storage_options,
                          self.splits, options=self.options,
                          case_sensitive=self.case_sensitive)


class _NoSpec:
    """Capture context without an error table (errors are then counted, not stored)."""

    def context(self, task_attempt: str | None = None, **more: Any) -> Any:
        from errortable import CaptureContext

        return CaptureContext(task_attempt=task_attempt, **more)
