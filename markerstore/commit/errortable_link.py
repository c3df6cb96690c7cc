"""The error table in a write: the executors' sink and validator, the driver's steps.

A write with the error table enabled opens an error instant J (on `<table>_errors` or the
global error table) right after its main instant I. Each task attempt writes its error
rows to one error file with a marker in J; job commit reconciles J with the winning
attempts' error files, puts them in I's commit metadata (one atomic switch makes data and
error rows visible together), then rolls J forward. See docs/ERROR_TABLE.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from markerstore.commit.stats import TaskAttempt
from markerstore.markers import WriteMarkers

if TYPE_CHECKING:
    from errortable import ErrorTaskSpec, TaskErrorWriter, Validator

ERROR_COLUMN = "__markerstore_error"
"""A column of serialised ErrorRecords: rows a reading stage upstream of the writer found
bad (a malformed line, say) travel to the writer's error sink through it."""


class _Sink:
    """One task attempt's error file (the commit.task ErrorSink protocol)."""

    def __init__(self, writer: TaskErrorWriter) -> None:
        self.writer = writer

    def write(self, errors: pa.Table) -> None:
        self.writer.write_arrow(errors)

    def commit(self) -> list[dict[str, Any]]:
        stats = self.writer.close()
        return [stats.to_dict()] if stats is not None else []

    def abort(self) -> None:
        self.writer.abort()


class ErrorTableSink:
    """Picklable factory of task error sinks for one error instant."""

    def __init__(self, spec: ErrorTaskSpec) -> None:
        self.spec = spec

    def __call__(self, attempt: TaskAttempt, markers: WriteMarkers) -> _Sink:
        # The error file's marker goes in the error instant, not the main one.
        return _Sink(self.spec.writer(attempt.label))


class ErrorTableValidator:
    """Splits each batch into good rows and ErrorRecords: rows an upstream stage marked
    bad in :data:`ERROR_COLUMN`, then casts, key, partition and checks (errortable's
    Validator)."""

    def __init__(self, spec: ErrorTaskSpec, target_schema: pa.Schema, key: str | None = None,
                 partition_by: Sequence[str] = (), checks: Mapping[str, str] | None = None
                 ) -> None:
        self.spec = spec
        self.validator: Validator = spec.validator(target_schema, key, list(partition_by),
                                                   dict(checks or {}))

    def __call__(self, batch: pa.RecordBatch, attempt: TaskAttempt
                 ) -> tuple[pa.RecordBatch, pa.Table | None]:
        import pyarrow.compute as pc

        from errortable import arrow_schema

        upstream: pa.Table | None = None
        if ERROR_COLUMN in batch.schema.names:
            column = batch.column(batch.schema.get_field_index(ERROR_COLUMN))
            bad = pc.is_valid(column)
            if pc.any(bad).as_py():
                records = [json.loads(text) for text in pc.filter(column, bad).to_pylist()]
                upstream = pa.Table.from_pylist(records, schema=arrow_schema())
                batch = batch.filter(pc.invert(bad))
            batch = batch.drop_columns([ERROR_COLUMN])
        good, errors = self.validator.split_arrow(
            batch, self.spec.context(task_attempt=attempt.label))
        if upstream is not None:
            errors = pa.concat_tables([upstream, errors.cast(upstream.schema)]) \
                if errors.num_rows else upstream
        return good, (errors if errors.num_rows else None)
