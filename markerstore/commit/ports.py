"""What the commit protocol needs from an error table: a small typed protocol.

The commit protocol never imports an error-table package. `errortable` implements these
two protocols (``errortable.ErrorTables``) and the entry points (spark, ingest, the CLI)
pass an instance in: ``WriteJob(..., error_tables=ErrorTables())`` for a write,
``recover(table, error_tables=ErrorTables())`` for recovery.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from markerstore.commit.task import BatchValidator, ErrorSinkFactory
    from markerstore.table import Table


class ErrorWrite(Protocol):
    """One write's error instant J on its error table, opened by :meth:`ErrorTables.open`.

    Driver side: :meth:`prepare` at job commit (keep the winning attempts' error files;
    returns what the main commit records to link J), :meth:`complete` once the main
    instant completed (roll J forward), :meth:`abort` when the write failed (J follows
    the main instant). Task side: :meth:`task_sink` and :meth:`validator` (picklable)."""

    @property
    def instant(self) -> str: ...

    @property
    def table(self) -> Table: ...

    def task_sink(self) -> ErrorSinkFactory: ...

    def validator(self, schema: pa.Schema, key: str | None, partition_by: Sequence[str],
                  checks: Mapping[str, str]) -> BatchValidator: ...

    def prepare(self, error_files: list[dict[str, Any]]) -> dict[str, Any]: ...

    def complete(self) -> Any: ...

    def abort(self) -> Any: ...

    def commonest_message(self, error_files: list[dict[str, Any]]) -> str | None: ...


class ErrorTables(Protocol):
    """How writes and recovery of a table reach its error tables."""

    def location(self, table: Table) -> str:
        """The URL of the error table that a write to `table` uses (recorded in the main
        instant's requested info before the instant starts)."""
        ...

    def check_formats(self, table: Table) -> None:
        """Refuse (TableFormatError), before anything is written, a write whose error
        table publishes a table format that cannot take it (its Iceberg identifier taken,
        its catalog properties wrong)."""
        ...

    def open(self, table: Table, instant: str) -> ErrorWrite:
        """Open error instant J for main instant `instant` of `table` (right after the
        main instant started, with :meth:`location` in its requested info)."""
        ...

    def recover(self, table: Table, instant: str) -> dict[str, Any] | None:
        """Main instant `instant` of `table` is being rolled back: roll back the error
        instants linked to it (what was done, or None). Idempotent."""
        ...
