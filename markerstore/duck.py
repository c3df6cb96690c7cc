"""One in-memory DuckDB database per process, handed out as cursors; and one
single-threaded connection per thread for the per-block work of Spark tasks.

Opening a DuckDB connection (`duckdb.connect()`) costs about 15 ms here; a cursor of an
open database costs about 0.01 ms. Reconcile runs at every commit (twice when a write has
an error table), so the fixed cost of its engine is a share of every small job's commit.

A cursor is a connection of its own: the Arrow tables registered in it, its temporary
views and its settings are its own, so threads and callers never see each other's names.
Nothing is created in the shared database itself. A forked child (a Spark Python worker
forks from its daemon) opens a database of its own: DuckDB's threads do not survive a
fork.
"""

from __future__ import annotations

import os
import threading

import duckdb

_lock = threading.Lock()
_database: duckdb.DuckDBPyConnection | None = None
_pid = 0
_local = threading.local()


def cursor() -> duckdb.DuckDBPyConnection:
    """A new connection to the process's shared in-memory database (close it, or let it
    be collected, when done)."""
    global _database, _pid
    with _lock:
        if _database is None or _pid != os.getpid():
            _database, _pid = duckdb.connect(), os.getpid()
        return _database.cursor()


def local() -> duckdb.DuckDBPyConnection:
    """This thread's own single-threaded DuckDB connection, opened once per process and
    thread: Spark runs one task per core, so a task's queries on small blocks run on its
    own core, and a reused Python worker pays the connection's 15 ms once, not per task.
    Callers register their Arrow tables under names of their own and unregister them."""
    con = getattr(_local, "con", None)
    if con is None or getattr(_local, "pid", 0) != os.getpid():
        con = duckdb.connect(config={"threads": 1})
        _local.con, _local.pid = con, os.getpid()
    return con
