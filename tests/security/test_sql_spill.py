"""The SQL sandbox's memory limit bounds what a query spills to disk too: DuckDB's
temporary files go to a private folder (0700, removed with the connection), never to the
working directory's `.tmp`, and at most as much as the memory limit
(`max_temp_directory_size`); past it the query fails in one line."""

from __future__ import annotations

import gc
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.errors import SqlLimitError
from markerstore.sql import sandbox
from tests.support.files import marked_write

LIMIT = "64MB"
LIMIT_BYTES = 64 * 1000 * 1000


def distinct(rows: int) -> str:
    """A query whose hash table outgrows 64MB: DuckDB spills it."""
    return (f"SELECT count(*) AS n FROM (SELECT DISTINCT range::VARCHAR || "
            f"'{'x' * 30}' AS s FROM range({rows}))")


def spilled(folder: str) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with suppress(OSError):
                total += os.path.getsize(os.path.join(root, name))
    return total


@contextmanager
def peak_of(folder: str) -> Iterator[list[int]]:
    """The largest size of `folder`'s files seen (sampled every 20 ms) while inside."""
    peak, done = [0], threading.Event()

    def watch() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], spilled(folder))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield peak
    finally:
        done.set()
        watcher.join()


def locked() -> tuple[duckdb.DuckDBPyConnection, str]:
    con = duckdb.connect()
    con.execute("SET threads = 1")  # the spill of one thread: the same on any machine
    sandbox.lock(con, sandbox.Limits(time_limit_ms=0, memory_limit=LIMIT))
    folder = con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
    return con, folder


def test_a_spilling_query_stays_in_a_private_folder_within_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    con, folder = locked()
    assert not folder.startswith(str(tmp_path)) and os.path.isdir(folder)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    size = con.execute("SELECT current_setting('max_temp_directory_size')").fetchall()[0][0]
    assert size.replace(" ", "") in ("61.0MiB", "64.0MB"), size
    with peak_of(folder) as peak, sandbox.limited(con):
        assert sandbox.select(con, distinct(1_000_000)).fetchall() == [(1_000_000,)]
    assert 0 < peak[0] <= LIMIT_BYTES  # it did spill, and no more than the limit
    assert not (tmp_path / ".tmp").exists()
    del con
    gc.collect()
    assert not os.path.exists(folder)  # removed with the connection


def test_a_query_that_needs_more_fails_in_one_line(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    con, folder = locked()
    with peak_of(folder) as peak, \
            pytest.raises(SqlLimitError, match="temporary disk than the sandbox's limit"), \
            sandbox.limited(con):
        sandbox.select(con, distinct(5_000_000)).fetchall()
    assert peak[0] <= LIMIT_BYTES


def test_cli_sql_spills_within_its_memory_limit(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    table.commit(instant, ["p/a.parquet"])
    out = CliRunner().invoke(cli, ["sql", table.path, distinct(5_000_000),
                                   "--memory-limit", LIMIT])
    assert out.exit_code == 1, out.output
    assert out.stderr.count("\n") == 1 and f"limit of {LIMIT}" in out.stderr
    assert not (tmp_path / ".tmp").exists()
