"""The SQL sandbox reads no file through a link out of the table, and a query it runs is
bounded in time and memory, and stops on Ctrl-C with one line.

The attacks: an error file (or its folder) of a table replaced by a symbolic link to a
file outside the table, then `markerstore sql T "SELECT * FROM errors"`: the view read the
outside file. And a query that runs for ever (`range` of 10^12 rows) or allocates until
DuckDB's default of 80% of the machine's memory. Links exist on local disk only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import errortable
from markerstore import Table
from markerstore.cli.main import cli
from markerstore.errors import SqlInterruptedError, SqlLimitError
from markerstore.sql import sandbox
from tests.support.errortable_writes import batch, full_write

TOKEN = "OUTSIDETHETABLE7731"
ENDLESS = "SELECT count(*) FROM range(1000000000000) t(i) WHERE hash(i) = 42"
GREEDY = "SELECT length(string_agg(i::VARCHAR, ',')) FROM range(20000000) t(i)"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="markerstore", catch_exceptions=False)


def _error_file(errors: Path) -> Path:
    (found,) = [p for p in errors.rglob("*") if p.suffix in (".parquet", ".avro")]
    return found


@pytest.fixture(params=["parquet", "avro"])
def linked(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Table, Path]:
    """A table whose error file is a link to another table's error file, outside it, that
    holds rows with TOKEN."""
    options = {"markerstore.write.error.table.format": request.param}
    table = Table(str(tmp_path / "lake" / "t"))
    full_write(table, [batch(2, {"check": 1})], options)
    outside = Table(str(tmp_path / "elsewhere" / "o"))
    secret_rows = pa.table({"id": [f"{TOKEN}-{i}" for i in range(2)], "amount": ["-1", "-2"],
                            "day": ["2024-01-01"] * 2})
    full_write(outside, [secret_rows], options)
    own = _error_file(tmp_path / "lake" / "t_errors")
    own.unlink()
    own.symlink_to(_error_file(tmp_path / "elsewhere" / "o_errors"))
    return table, own


def test_an_error_file_linked_out_of_the_table_is_never_read(
        linked: tuple[Table, Path]) -> None:
    table, own = linked
    errors_url = f"{table.storage.url()}_errors"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = errortable.query(errors_url, "SELECT * FROM errors", sandbox=True).fetchall()
    assert TOKEN not in repr(rows) and rows == []
    assert any("resolves outside the table" in str(w.message) for w in caught)

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = run("sql", table.storage.url(), "SELECT * FROM errors")
    assert out.exit_code == 0, out.output
    assert TOKEN not in out.output and "(no rows)" in out.stdout


def test_a_folder_linked_out_of_the_table_is_never_read(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "lake" / "t"))
    full_write(table, [batch(2, {"check": 1})])
    folder = _error_file(tmp_path / "lake" / "t_errors").parent
    moved = tmp_path / "elsewhere" / folder.name
    moved.parent.mkdir()
    shutil.move(folder, moved)  # the very same file, now outside the table
    folder.symlink_to(moved, target_is_directory=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = errortable.query(f"{table.storage.url()}_errors", "SELECT * FROM errors",
                                sandbox=True).fetchall()
    assert rows == []
    assert any("resolves outside the table" in str(w.message) for w in caught)


def _connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    sandbox.lock(con, sandbox.Limits(memory_limit="64MB"))
    return con


def test_time_limit_stops_an_endless_query() -> None:
    con = _connection()
    limits = sandbox.Limits(time_limit_ms=300, memory_limit="64MB")
    started = time.monotonic()
    with pytest.raises(SqlLimitError, match=r"time limit of 0\.3 s"), \
            sandbox.limited(con, limits):
        sandbox.select(con, ENDLESS, limits).fetchall()
    assert time.monotonic() - started < 30


def test_memory_limit_stops_a_greedy_query() -> None:
    con = duckdb.connect()
    limits = sandbox.Limits(time_limit_ms=0, memory_limit="64MB")
    with pytest.raises(SqlLimitError, match="memory than the sandbox's limit of 64MB"), \
            sandbox.limited(con, limits):
        sandbox.select(con, GREEDY, limits).fetchall()


def test_ctrl_c_interrupts_a_query_with_one_error() -> None:
    con = _connection()
    done = threading.Event()
    handler = signal.getsignal(signal.SIGINT)  # Python's, or the one Spark's context set

    def press_ctrl_c() -> None:  # until the query stops: the first may come before it runs
        while not done.wait(0.2):
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    try:
        with pytest.raises(SqlInterruptedError, match="interrupted"), \
                sandbox.limited(con, sandbox.UNLIMITED_TIME):
            presser.start()
            sandbox.select(con, ENDLESS).fetchall()
    finally:
        done.set()
        presser.join()
    assert signal.getsignal(signal.SIGINT) is handler  # given back


def test_cli_limits_are_one_line_and_shown_in_help(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    full_write(table, [batch(2)])
    out = run("sql", table.storage.url(), ENDLESS, "--time-limit", "0.5")
    assert out.exit_code == 1, out.output
    assert out.stderr.count("\n") == 1 and "time limit of 0.5 s" in out.stderr
    out = run("sql", table.storage.url(), GREEDY, "--memory-limit", "64MB")
    assert out.exit_code == 1 and "limit of 64MB" in out.stderr, out.output
    out = run("sql", table.storage.url(), "SELECT 1", "--memory-limit", "lots")
    assert out.exit_code == 2 and "512MB" in out.stderr, out.output
    help_text = run("sql", "--help").stdout
    assert "--time-limit" in help_text and "--memory-limit" in help_text
    assert "[default: 300]" in help_text and "[default: 2GB]" in help_text


def _cpu(pid: int) -> float:
    """CPU seconds `pid` has spent, all its threads together (0 once it has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# A `markerstore sql` of a quick query spends under 2 CPU seconds in all (Python, imports,
# the views); past this the endless query is running (DuckDB runs it on the main thread,
# or on its workers: which one is DuckDB's choice).
IN_THE_QUERY_CPU_S = 3.5


def test_cli_ctrl_c_prints_one_line(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    full_write(table, [batch(2)])
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen([sys.executable, "-m", "markerstore.cli", "sql",
                                    table.storage.url(), ENDLESS], stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while (_cpu(process.pid) < IN_THE_QUERY_CPU_S and process.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.05)  # until the query runs
        while process.poll() is None and time.monotonic() < deadline:
            if not stderr.stat().st_size:
                process.send_signal(signal.SIGINT)
            time.sleep(0.3)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    text = stderr.read_text()
    assert process.returncode == 130, text
    assert text.count("\n") == 1 and "interrupted" in text and "Traceback" not in text
    assert stdout.read_text() == ""  # no partial answer, no progress bar
