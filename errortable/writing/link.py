"""The error table in a write: errortable's side of the commit protocol's
:mod:`markerstore.commit.ports` (the entry points pass :class:`ErrorTables` in).

A write with the error table enabled opens an error instant J (on `<table>_errors` or the
global error table) right after its main instant I. Each task attempt writes its error
rows to one error file with a marker in J; job commit reconciles J with the winning
attempts' error files, puts them in I's commit metadata (one atomic switch makes data and
error rows visible together), then rolls J forward. See docs/ERROR_TABLE.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable.config import ErrorTableConfig, locate
from errortable.schema import arrow_schema
from errortable.writing.commit import ErrorCommit, check_error_table_formats
from errortable.writing.hooks import ErrorSinkHook, ValidatorHook
from errortable.writing.recovery import rollback_error_instant
from errortable.writing.taskwriter import ErrorTaskSpec
from markerstore.config import REASON_KEY
from markerstore.table import Table

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
        self.hook = ValidatorHook(spec.validator(target_schema, key, list(partition_by),
                                                 dict(checks or {})), spec)

    def __call__(self, batch: pa.RecordBatch, attempt: Any
                 ) -> tuple[pa.RecordBatch, pa.Table | None]:
        upstream: pa.Table | None = None
        if ERROR_COLUMN in batch.schema.names:
            column = batch.column(batch.schema.get_field_index(ERROR_COLUMN))
            bad = pc.is_valid(column)
            if pc.any(bad).as_py():
                records = [json.loads(text) for text in pc.filter(column, bad).to_pylist()]
                upstream = pa.Table.from_pylist(records, schema=arrow_schema())
                upstream = upstream.append_column(REASON_KEY, pc.map_lookup(
                    upstream.column("context"), "reason", "first"))
                batch = batch.filter(pc.invert(bad))
            batch = batch.drop_columns([ERROR_COLUMN])
        good, errors = self.hook(batch, attempt)
        if upstream is not None:
            errors = pa.concat_tables([upstream, errors.cast(upstream.schema)]) \
                if errors.num_rows else upstream
        return good, (errors if errors.num_rows else None)


class ErrorWriteLink:
    """One write's error instant (an :class:`ErrorCommit`) as the commit protocol's
    ``ErrorWrite``."""

    def __init__(self, commit: ErrorCommit) -> None:
        self.commit = commit

    def __repr__(self) -> str:
        return f"ErrorWriteLink({self.commit!r})"

    @property
    def instant(self) -> str:
        return self.commit.instant

    @property
    def table(self) -> Table:
        return self.commit.table

    def task_spec(self) -> ErrorTaskSpec:
        return self.commit.task_spec()

    def task_sink(self) -> ErrorSinkHook:
        return ErrorSinkHook(self.commit.task_spec())

    def validator(self, schema: pa.Schema, key: str | None, partition_by: Sequence[str],
                  checks: Mapping[str, str]) -> ErrorTableValidator:
        return ErrorTableValidator(self.commit.task_spec(), schema, key, partition_by, checks)

    def prepare(self, error_files: list[dict[str, Any]]) -> dict[str, Any]:
        return self.commit.prepare(error_files)

    def complete(self) -> Any:
        return self.commit.complete()

    def abort(self) -> Any:
        return self.commit.abort()

    def commonest_message(self, error_files: list[dict[str, Any]]) -> str | None:
        return self.commit.commonest_message(error_files)


class ErrorTables:
    """errortable as the commit protocol's ``ErrorTables``: where a write's error rows
    go, opening its error instant, and rolling error instants back with their main
    instant. Stateless; the entry points pass ``ErrorTables()``."""

    def location(self, table: Table) -> str:
        return locate(table.storage.url(), ErrorTableConfig.from_options(table.settings)).url

    def check_formats(self, table: Table) -> None:
        location = locate(table.storage.url(), ErrorTableConfig.from_options(table.settings))
        check_error_table_formats(table, location)

    def open(self, table: Table, instant: str) -> ErrorWriteLink:
        location = locate(table.storage.url(), ErrorTableConfig.from_options(table.settings))
        return ErrorWriteLink(ErrorCommit.open(table, instant, options=table.settings,
                                               location=location))

    def recover(self, table: Table, instant: str) -> dict[str, Any] | None:
        return rollback_error_instant(table, instant)
