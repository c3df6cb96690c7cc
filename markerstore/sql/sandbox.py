"""The SQL sandbox: a DuckDB connection that can read a table's views and nothing else.

The commands that run SQL a user typed (`markerstore sql`, `errortable query`,
`errortable replay --where`) build the views first (which read the table's own files),
then close the connection with :func:`lock`:

- ``enable_external_access = false``: no file, URL or directory outside the paths the
  views themselves read (registered with :func:`allow_paths`: the local Parquet error
  files the `errors` view scans lazily, then set as ``allowed_paths``), no ``ATTACH``,
  ``INSTALL``, ``LOAD``, no extension auto-loading;
- ``python_enable_replacements = false``: no Python variable is scanned by name;
- ``temp_directory`` a private folder (created 0700, removed with the connection) and
  ``max_temp_directory_size`` the memory limit: what a query spills to disk is bounded
  like its memory, and never lands in the working directory (DuckDB's default ``.tmp``);
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
import shutil
import signal
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import duckdb

from markerstore import config
from markerstore.errors import SqlInterruptedError, SqlLimitError, SqlRefusedError

# What the sandbox runs: read-only statements. EXPLAIN is let through only when what it
# explains is one of these and it does not ANALYZE (which executes the statement).
READ_ONLY = frozenset({duckdb.StatementType.SELECT})
_EXPLAIN = re.compile(r"^\s*EXPLAIN\b\s*", re.IGNORECASE)
_ANALYZE = re.compile(r"^ANALY[SZ]E\b", re.IGNORECASE)
_FIRST_WORD = re.compile(r"^\s*([A-Za-z_]+)")

LOCKDOWN = (
    "SET enable_progress_bar = false",  # DuckDB's bar would go to the command's stdout
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET python_enable_replacements = false",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)


@dataclass(frozen=True)
class Limits:
    """What a sandboxed query may spend: wall-clock time (0: no limit) and DuckDB's
    memory_limit. Defaults: the options `markerstore.sql.sandbox.*` (config/sql.py)."""

    time_limit_ms: int = config.OPTIONS[config.SQL_TIME_LIMIT_MS].default
    memory_limit: str = config.OPTIONS[config.SQL_MEMORY_LIMIT].default

    @classmethod
    def of(cls, time_limit_s: float | None = None, memory_limit: str | None = None) -> Limits:
        """Limits from a command's flags (None: the default); bad values are ConfigError."""
        options: dict[str, Any] = {}
        if time_limit_s is not None:
            options[config.SQL_TIME_LIMIT_MS] = round(time_limit_s * 1000)
        if memory_limit is not None:
            options[config.SQL_MEMORY_LIMIT] = memory_limit
        settings = config.resolve(options)
        return cls(settings[config.SQL_TIME_LIMIT_MS], settings[config.SQL_MEMORY_LIMIT])


UNLIMITED_TIME = Limits(time_limit_ms=0)


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


def lock(con: duckdb.DuckDBPyConnection, limits: Limits | None = None
         ) -> duckdb.DuckDBPyConnection:
    """Close `con` to everything but its views (and the paths they read), under the
    memory limit of `limits` (default: the option's), which bounds its temporary files
    too; idempotent."""
    if not is_locked(con):
        allowed = sorted(_ALLOWED.pop(con, set()))
        if allowed:
            con.execute("SET allowed_paths = $paths", {"paths": allowed})
        memory = (limits or Limits()).memory_limit
        con.execute("SET memory_limit = $limit", {"limit": memory})
        spill = tempfile.mkdtemp(prefix="markerstore-sql-")  # mode 0700: this user's only
        weakref.finalize(con, shutil.rmtree, spill, True)
        con.execute("SET temp_directory = $folder", {"folder": spill})
        con.execute("SET max_temp_directory_size = $limit", {"limit": memory})
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


def run(con: duckdb.DuckDBPyConnection, query: str, *, unsafe: bool = False,
        limits: Limits | None = None) -> duckdb.DuckDBPyRelation | None:
    """Run `query` on `con`: checked and locked (the sandbox, with the memory limit of
    `limits`) unless `unsafe`. Returns the relation (None for a statement without a result,
    only possible when `unsafe`); fetch it inside :func:`limited` for the time limit."""
    if not isinstance(query, str) or not query.strip().strip(";").strip():
        raise SqlRefusedError("empty query: give one SELECT statement")
    if not unsafe:
        check(query, con)
        lock(con, limits)
    elif not is_locked(con):
        con.execute("SET enable_progress_bar = false")
    return con.sql(query)


def select(con: duckdb.DuckDBPyConnection, query: str, limits: Limits | None = None
           ) -> duckdb.DuckDBPyRelation:
    """Run `query` in the sandbox (checked, `con` locked) and return its relation."""
    relation = run(con, query, limits=limits)
    assert relation is not None  # check() lets only statements with a result through
    return relation


@contextmanager
def limited(con: duckdb.DuckDBPyConnection, limits: Limits | None = None) -> Iterator[None]:
    """While a query of `con` runs (fetch its rows inside): interrupt it past the time
    limit (SqlLimitError), or on Ctrl-C (SqlInterruptedError: one line, not a traceback);
    past the memory limit it fails with SqlLimitError. Ctrl-C is caught only on the main
    thread (the only one that receives signals)."""
    limits = limits or Limits()
    stopped: list[str] = []

    def stop(why: str) -> None:
        stopped.append(why)
        con.interrupt()

    timer = threading.Timer(limits.time_limit_ms / 1000, stop, ("time",)) \
        if limits.time_limit_ms > 0 else None
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: stop("ctrl-c")) if main else None
    if timer is not None:
        timer.start()
    try:
        yield
    except (duckdb.InterruptException, RuntimeError) as exc:
        if "time" in stopped:
            raise SqlLimitError(
                f"the query ran longer than the sandbox's time limit of "
                f"{limits.time_limit_ms / 1000:g} s ({config.SQL_TIME_LIMIT_MS}, or "
                "--time-limit)") from None
        if stopped or "interrupt" in str(exc).lower():
            raise SqlInterruptedError("the query was interrupted (Ctrl-C)") from None
        raise
    except duckdb.OutOfMemoryException as exc:
        disk = " and as much temporary disk" if "max_temp_directory_size" in str(exc) else ""
        raise SqlLimitError(f"the query needs more memory{disk} than the sandbox's limit of "
                            f"{limits.memory_limit} ({config.SQL_MEMORY_LIMIT}, or "
                            "--memory-limit)") from None
    finally:
        if timer is not None:  # ended before the process may end (daemon threads that
            timer.cancel()      # outlive it abort the process in DuckDB's code)
            timer.join()
        if main:
            signal.signal(signal.SIGINT, previous)
