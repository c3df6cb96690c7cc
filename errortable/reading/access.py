"""The read API of error tables: ``errortable.read(path)``, ``connect``, ``query``, and
the `errors` view in markerstore's SQL (:func:`table_connect`).

Reading is :mod:`errortable.reading.reader`'s and never writes. ``repair=True`` asks recovery
(:func:`errortable.writing.recovery.roll_forward_completed`) to write the commits of error
instants whose main instant completed, before reading.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import duckdb

from errortable.reading.reader import (
    ErrorTableReader,
    SourceFilter,
    error_tables_of,
    is_error_table,
    register_errors,
)
from errortable.writing.recovery import roll_forward_completed
from markerstore.errors import MarkerStoreError, NotAnErrorTableError
from markerstore.table import Table

log = logging.getLogger(__name__)


def readers_for(path: str | Table, storage_options: Mapping[str, Any] | None = None, *,
                strict: bool = False, repair: bool = False
                ) -> list[tuple[ErrorTableReader, SourceFilter | None]]:
    """Readers for `path`: an error table itself, or a target table (then its error tables,
    filtered to its rows). NotAnErrorTableError if neither."""
    table = path if isinstance(path, Table) else Table(path, storage_options)
    options = table.storage.storage_options
    if is_error_table(table):
        reader = ErrorTableReader(table, strict=strict)
        if repair:
            roll_forward_completed(table, skip=reader.expired())
        return [(reader, None)]
    urls = error_tables_of(table)
    if not urls:
        raise NotAnErrorTableError(
            f"{table.storage.url()} is not an error table, and no error table is recorded for "
            f"it (no error_table in its commits, no {table.storage.url()}_errors)")
    source = SourceFilter.of(table)
    readers = [ErrorTableReader(Table(u, options), strict=strict,
                                source_storage_options=options) for u in urls]
    if repair:
        for reader in readers:
            roll_forward_completed(reader.table, source_storage_options=options,
                                   skip=reader.expired())
    return [(reader, source) for reader in readers]


def connect(path: str | Table, storage_options: Mapping[str, Any] | None = None, *,
            strict: bool = False, repair: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with view `errors` over the committed rows at `path`."""
    con = duckdb.connect()
    register_errors(con, readers_for(path, storage_options, strict=strict, repair=repair))
    return con


def read(path: str | Table, storage_options: Mapping[str, Any] | None = None, *,
         strict: bool = False, repair: bool = False) -> duckdb.DuckDBPyRelation:
    """The committed error rows at `path` (an error table, local or global, or a target
    table whose error tables are then read) as a DuckDB relation: the RFC-20 columns plus
    flattened ones (created_at, commit_time, table_name, reason, fingerprint, day,
    source_instant, ...). Use ``.to_arrow_table()``, ``.df()`` or more SQL on it."""
    return connect(path, storage_options, strict=strict, repair=repair).sql(
        "SELECT * FROM errors")


def query(path: str | Table, sql: str, storage_options: Mapping[str, Any] | None = None, *,
          strict: bool = False, sandbox: bool = False) -> duckdb.DuckDBPyRelation:
    """Run `sql` over the view `errors` at `path`. This Python API runs DuckDB's full engine
    (the caller already runs code); ``sandbox=True`` runs it as `errortable query` does:
    one read-only statement that reads only the `errors` view (see docs/SECURITY.md)."""
    from markerstore.sql.sandbox import select

    if sandbox:
        return select(connect(path, storage_options, strict=strict), sql)
    return connect(path, storage_options, strict=strict).sql(sql)


def errors_view(table: Table, con: duckdb.DuckDBPyConnection) -> None:
    """`errors` in markerstore's SQL: the table's own error rows (empty if it has none). An
    error table that cannot be read leaves the view empty, with a logged warning, so the
    other views stay usable."""
    problem = register_table_errors(table, con)
    if problem is not None:
        log.warning("the errors view of %s is empty: its error table cannot be read: %s",
                    table.storage.url(), problem)


def register_table_errors(table: Table, con: duckdb.DuckDBPyConnection) -> str | None:
    """Create the `errors` view of `table` (its error tables' rows, filtered to its own;
    itself if it is an error table). When an error table cannot be read the view is empty
    and the problem is returned."""
    readers: list[tuple[ErrorTableReader, SourceFilter | str | None]]
    try:
        if is_error_table(table):
            readers = [(ErrorTableReader(table), None)]
        else:
            source = SourceFilter.of(table)
            readers = [(ErrorTableReader(Table(u, table.storage.storage_options)), source)
                       for u in error_tables_of(table)]
        register_errors(con, readers)
    except (MarkerStoreError, OSError) as exc:
        register_errors(con, [])
        return str(exc)
    return None


VIEWS = {"errors": errors_view}


def table_connect(table: Table, problems: dict[str, str] | None = None
                  ) -> duckdb.DuckDBPyConnection:
    """markerstore's SQL connection over `table` (``commits``, ``files``, ``markers``) plus
    ``errors``: the table's own error rows (the full DuckDB engine, like
    :func:`markerstore.sql.connect`, which says what `problems` collects)."""
    from markerstore.sql import connect as connect_views

    return connect_views(table, VIEWS, problems=problems)


def table_sql(table: Table, query: str) -> duckdb.DuckDBPyRelation:
    """Run `query` over :func:`table_connect`'s views."""
    return table_connect(table).sql(query)
