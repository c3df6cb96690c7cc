"""The SQL sandbox: a DuckDB connection that can read a table's views and nothing else.

The commands that run SQL a user typed (`markerstore sql`, `errortable query`,
`errortable replay --where`) build the views first (which read the table's own files),
then close the connection with :func:`lock`:

- ``enable_external_access = false``: no file, URL or directory outside the paths the
  views themselves read (registered with :func:`allow_paths`: the local Parquet error
  files the `errors` view scans lazily, then set as ``allowed_paths``), no ``ATTACH``,
  ``INSTALL``, ``LOAD``, no extension auto-loading;
- ``python_enable_replacements = false``: no Python variable is scanned by name;
- ``lock_configuration = true``: no ``SET``/``PRAGMA``/``RESET`` can undo any of it.

Before a query runs, :func:`check` parses it and refuses anything but one read-only
statement (``SELECT``/``WITH``/``VALUES``/``FROM``/``DESCRIBE``/``SHOW``/``SUMMARIZE``
and a plain ``EXPLAIN`` of those), so ``COPY``, ``EXPORT``, ``CREATE``, ``PRAGMA``,
``SET``, ``CALL`` ... are refused with a one-line :class:`SqlRefusedError` even on a path
the views may read. :func:`run` does both; with ``unsafe=True`` it is DuckDB's full
engine (``--unsafe-sql``).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable

import duckdb

from markerstore.errors import SqlRefusedError

# What the sandbox runs: read-only statements. EXPLAIN is let through only when what it
# explains is one of these and it does not ANALYZE (which executes the statement).
READ_ONLY = frozenset({duckdb.StatementType.SELECT})
_EXPLAIN = re.compile(r"^\s*EXPLAIN\b\s*", re.IGNORECASE)
_ANALYZE = re.compile(r"^ANALY[SZ]E\b", re.IGNORECASE)
_FIRST_WORD = re.compile(r"^\s*([A-Za-z_]+)")

LOCKDOWN = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET python_enable_replacements = false",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)


# Files each connection's views read lazily, set as DuckDB's allowed_paths when it is
# locked (so a connection that is never locked pays nothing for them).
_ALLOWED: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, set[str]] = \
    weakref.WeakKeyDictionary()


def allow_paths(con: duckdb.DuckDBPyConnection, paths: Iterable[str]) -> None:
    """Let `con`, once locked, read these files (a view that scans them lazily). Only
    read: writing statements never pass :func:`check`."""
    new = set(paths)
    if new:
        _ALLOWED.setdefault(con, set()).update(new)


def is_locked(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute("SELECT current_setting('lock_configuration')").fetchall()
    return bool(rows and rows[0][0])


def lock(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Close `con` to everything but its views (and the paths they read); idempotent."""
    if not is_locked(con):
        allowed = sorted(_ALLOWED.pop(con, set()))
        if allowed:
            con.execute("SET allowed_paths = $paths", {"paths": allowed})
        for statement in LOCKDOWN:
            con.execute(statement)
    return con


def _statement_type(con: duckdb.DuckDBPyConnection, query: str) -> duckdb.StatementType:
    statements = con.extract_statements(query)
    if not statements:
        raise SqlRefusedError("empty query: give one SELECT statement")
    if len(statements) > 1:
        raise SqlRefusedError(f"one statement only, got {len(statements)}")
    return statements[0].type


def check(query: str, con: duckdb.DuckDBPyConnection | None = None) -> None:
    """Refuse (SqlRefusedError) anything but one read-only statement. A syntax error is
    DuckDB's own ParserException. Only parses: `con` (default: a new in-memory one) runs
    nothing."""
    if not isinstance(query, str) or not query.strip().strip(";").strip():
        raise SqlRefusedError("empty query: give one SELECT statement")
    con = con if con is not None else duckdb.connect()
    kind = _statement_type(con, query)
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN.sub("", query, count=1)
        if inner != query and not _ANALYZE.match(inner) and inner.strip():
            try:
                kind = _statement_type(con, inner)
            except (SqlRefusedError, duckdb.Error):
                pass
            else:
                if kind in READ_ONLY:
                    return
        raise SqlRefusedError("only a plain EXPLAIN of a SELECT is allowed (no EXPLAIN "
                              "ANALYZE); rerun with --unsafe-sql for the full engine")
    if kind not in READ_ONLY:
        word = _FIRST_WORD.match(query)
        name = word.group(1).upper() if word else kind.name
        raise SqlRefusedError(f"{name} statements are not allowed: only a read-only query "
                              "(SELECT) over the table's views runs; rerun with --unsafe-sql "
                              "for the full engine")


def run(con: duckdb.DuckDBPyConnection, query: str, *, unsafe: bool = False
        ) -> duckdb.DuckDBPyRelation | None:
    """Run `query` on `con`: checked and locked (the sandbox) unless `unsafe`. Returns the
    relation (None for a statement without a result, only possible when `unsafe`)."""
    if not isinstance(query, str) or not query.strip().strip(";").strip():
        raise SqlRefusedError("empty query: give one SELECT statement")
    if not unsafe:
        check(query, con)
        lock(con)
    return con.sql(query)


def select(con: duckdb.DuckDBPyConnection, query: str) -> duckdb.DuckDBPyRelation:
    """Run `query` in the sandbox (checked, `con` locked) and return its relation."""
    relation = run(con, query)
    assert relation is not None  # check() lets only statements with a result through
    return relation
