"""Checks of marker rows read back from storage (issue 11): the table's own files are
untrusted, so a marker row must name one table-relative data file before anything reads or
deletes what it names.

The rules in SQL (for DuckDB relations of marker rows) and over Arrow (for the few rows
reconcile and rollback act on): the partition is a table-relative path (or empty), the
file name is one path segment, the IO type is CREATE, MERGE or APPEND.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.errors import CorruptTableError
from markerstore.paths import control_class, path_problem
from markerstore.paths_arrow import bad_paths

IO_TYPES = ("CREATE", "MERGE", "APPEND")
# The data file a marker row names, relative to the table.
PATH_SQL = "CASE WHEN partition = '' THEN file ELSE partition || '/' || file END"
# A row whose file name or IO type cannot be a marker's (the partition is checked apart:
# there are few distinct ones). A file name is one path segment.
BAD_ROW_SQL = (
    "partition IS NULL OR file IS NULL OR io_type IS NULL "
    "OR io_type NOT IN ('CREATE', 'MERGE', 'APPEND') "
    f"OR file IN ('', '.', '..') OR regexp_matches(file, '[/\\\\{control_class('re2')}]')")
_BAD_ROWS_SQL = f"SELECT partition, file, io_type FROM m WHERE {BAD_ROW_SQL} LIMIT 1"

Locate = Callable[[str | None, str | None], str | None]


def check_marker_rows(relation: duckdb.DuckDBPyRelation, where: str,
                      locate: Locate | None = None) -> None:
    """CorruptTableError if a marker row read from storage names no valid table-relative
    data file (a partition with '..', an absolute one, a file name with a separator, an
    unknown IO type, ...). `where` names the marker folder; `locate(partition, file)`
    may name the very file that holds the bad row."""
    bad = relation.query("m", _BAD_ROWS_SQL)
    assert bad is not None
    rows = bad.fetchall()
    entry: tuple[Any, Any, Any] | None = rows[0] if rows else None
    if entry is None:
        parts = relation.query("m", "SELECT DISTINCT partition FROM m")
        assert parts is not None
        for (partition,) in parts.fetchall():
            if path_problem(partition, allow_empty=True) is not None:
                same = duckdb.ColumnExpression("partition") == duckdb.ConstantExpression(
                    partition)  # the value as a constant, never spliced into SQL text
                found = relation.filter(same).select("partition", "file", "io_type")
                entry = found.limit(1).fetchall()[0]
                break
    if entry is not None:
        raise_bad_row(entry, where, locate)


def check_row_table(rows: pa.Table, where: str, locate: Locate | None = None) -> None:
    """check_marker_rows over an Arrow table of rows (partition, file, io_type, path),
    vectorized: the rows reconcile or rollback is about to act on, checked all before the
    first delete."""
    if rows.num_rows == 0:
        return
    file_names = rows.column("file")
    io_types = rows.column("io_type")
    bad = pc.or_kleene(
        pc.or_kleene(pc.is_null(rows.column("partition")), pc.is_null(file_names)),
        pc.invert(pc.fill_null(pc.is_in(io_types, pa.array(IO_TYPES)), False)))
    bad = pc.or_kleene(bad, pc.fill_null(pc.match_substring_regex(
        file_names, r"^\.{0,2}$|[/\\" + control_class("re2") + "]"), True))
    bad = pc.or_kleene(bad, bad_paths(rows.column("path")))
    bad = pc.fill_null(bad, True)
    if pc.any(bad).as_py():
        first = rows.filter(bad).slice(0, 1).to_pylist()[0]
        raise_bad_row((first["partition"], first["file"], first["io_type"]), where, locate)


def raise_bad_row(entry: tuple[Any, Any, Any], where: str, locate: Locate | None) -> None:
    partition, file_name, io_type = entry
    problem = (path_problem(partition, allow_empty=True) if partition is not None
               else "is null")
    what = f"partition {partition!r} {problem}" if problem else \
        f"marker (partition {partition!r}, file {file_name!r}, io_type {io_type!r}) does " \
        "not name one data file of the table"
    source = (locate(partition, file_name) if locate is not None else None) or where
    raise CorruptTableError(source, what)


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
