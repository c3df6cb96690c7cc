"""Adapters to the writer's hooks (markerstore.commit): `validator=` and `error_sink=`.

The commit protocol's TaskWriter calls ``validator(batch, attempt) -> (good, errors)`` on
every batch, counts `errors` by their ``reason`` column, and hands them to the task
attempt's sink made by ``error_sink(attempt, markers)``; the sink's ``commit()`` describes
the files it wrote, and the job commit puts those descriptions (``error_files``) and the
counts (``error_records``) in the main commit's metadata. So, on the driver::

    job = WriteJob(table, ..., ).start()              # requested info: {"error_table": E}
    ec = ErrorCommit.open(table, job.instant, options=options)
    job.validator, job.error_sink = writer_hooks(ec, target_schema, key=..., checks=...)
    job.metadata.update(ec.link_metadata())           # error_table, error_instant
    result = job.commit(winning_results)              # the one atomic write
    ec.complete(result.error_files)                   # roll J forward
    # on failure: job.abort() (the rollback hook rolls J back) and ec.abort()

The sink ignores the main instant's markers: error files are marked in the error
instant J on the error table (direct markers), like everything else in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable import schema as S
from errortable.capture.validator import Validator
from errortable.writing.commit import ErrorCommit
from errortable.writing.taskwriter import ErrorTaskSpec, TaskErrorWriter
from markerstore.config import REASON_KEY


def _label(attempt: Any) -> str:
    label = getattr(attempt, "label", None)
    return str(label) if label else str(attempt)


class ValidatorHook:
    """``validator(batch, attempt) -> (good, errors)``: errors are ErrorRecord rows plus a
    ``reason`` column, which the writer counts and the sink drops. Picklable."""

    def __init__(self, validator: Validator, spec: ErrorTaskSpec) -> None:
        self.validator = validator
        self.spec = spec

    def __call__(self, batch: pa.RecordBatch, attempt: Any
                 ) -> tuple[pa.RecordBatch, pa.Table]:
        good, errors = self.validator.split_arrow(batch, self.spec.context(_label(attempt)))
        reasons = pc.map_lookup(errors.column("context"), "reason", "first")
        return good, errors.append_column(REASON_KEY, reasons)


class TaskErrorSink:
    """One task attempt's error file, as the writer's ErrorSink."""

    def __init__(self, writer: TaskErrorWriter) -> None:
        self.writer = writer

    def write(self, errors: pa.Table) -> None:
        reasons = errors.column(REASON_KEY) if REASON_KEY in errors.column_names else None
        self.writer.write_arrow(errors.select(S.arrow_schema().names), reasons)

    def commit(self) -> list[dict[str, Any]]:
        stats = self.writer.close()
        return [stats.to_dict()] if stats is not None else []

    def abort(self) -> None:
        self.writer.abort()


class ErrorSinkHook:
    """``error_sink(attempt, markers) -> ErrorSink``: a TaskErrorWriter per attempt on the
    error table (the main instant's `markers` are not used). Picklable."""

    def __init__(self, spec: ErrorTaskSpec) -> None:
        self.spec = spec

    def __call__(self, attempt: Any, markers: Any = None) -> TaskErrorSink:
        return TaskErrorSink(self.spec.writer(_label(attempt)))


def writer_hooks(commit: ErrorCommit, target_schema: pa.Schema, key: str | None = None,
          partition_by: Sequence[str] | None = None,
          checks: Mapping[str, str] | None = None, **kwargs: Any
          ) -> tuple[ValidatorHook, ErrorSinkHook]:
    """The `validator` and `error_sink` for one write whose error instant is `commit`.
    Bad check expressions and unknown columns raise ConfigError here, before any task."""
    spec = commit.task_spec()
    validator = spec.validator(target_schema, key, partition_by, checks, **kwargs)
    return ValidatorHook(validator, spec), ErrorSinkHook(spec)
