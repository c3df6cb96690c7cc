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
from typing import TYPE_CHECKING

import pyarrow as pa

from markerstore.commit.stats import TaskAttempt

if TYPE_CHECKING:
    from errortable import ErrorTaskSpec

ERROR_COLUMN = "__markerstore_error"
"""A column of serialised ErrorRecords: rows a reading stage upstream of the writer found
bad (a malformed line, say) travel to the writer's error sink through it."""


class ErrorTableValidator:
    """Splits each batch into good rows and ErrorRecords: rows an upstream stage marked
    bad in :data:`ERROR_COLUMN`, then casts, key, partition and checks (errortable's
    Validator, through its writer hook)."""

    def __init__(self, spec: ErrorTaskSpec, target_schema: pa.Schema, key: str | None = None,
                 partition_by: Sequence[str] = (), checks: Mapping[str, str] | None = None
                 ) -> None:
        from errortable.hooks import ValidatorHook

        self.hook = ValidatorHook(spec.validator(target_schema, key, list(partition_by),
                                                 dict(checks or {})), spec)

    def __call__(self, batch: pa.RecordBatch, attempt: TaskAttempt
                 ) -> tuple[pa.RecordBatch, pa.Table | None]:
        import pyarrow.compute as pc

        from errortable import arrow_schema
        from errortable.hooks import REASON_COLUMN

        upstream: pa.Table | None = None
        if ERROR_COLUMN in batch.schema.names:
            column = batch.column(batch.schema.get_field_index(ERROR_COLUMN))
            bad = pc.is_valid(column)
            if pc.any(bad).as_py():
                records = [json.loads(text) for text in pc.filter(column, bad).to_pylist()]
                upstream = pa.Table.from_pylist(records, schema=arrow_schema())
                upstream = upstream.append_column(REASON_COLUMN, pc.map_lookup(
                    upstream.column("context"), "reason", "first"))
                batch = batch.filter(pc.invert(bad))
            batch = batch.drop_columns([ERROR_COLUMN])
        good, errors = self.hook(batch, attempt)
        if upstream is not None:
            errors = pa.concat_tables([upstream, errors.cast(upstream.schema)]) \
                if errors.num_rows else upstream
        return good, (errors if errors.num_rows else None)
