"""The SQL sandbox of `markerstore sql`: the table's views and nothing else.

Each attack below reads or writes outside the views through DuckDB (a file read, a COPY
over the table's own timeline, ATTACH, EXPORT, INSTALL/LOAD, PRAGMA); each is refused with
one line and exit 2, and leaves every file as it was. `--unsafe-sql` gives the full
engine back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.errors import SqlRefusedError
from markerstore.sql import connect as connect_views
from markerstore.sql import sandbox
from markerstore.sql import sql as sql_views
from tests.support.files import marked_write
from tests.support.locations import Location
from tests.support.sandbox import SECRET


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="markerstore", catch_exceptions=False)


@pytest.fixture
def table(tmp_path: Path) -> Table:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["d=1/a.parquet"])
    table.commit(instant, [{"path": "d=1/a.parquet", "rows": 2}])
    return table


def timeline_files(table: Table) -> dict[str, bytes]:
    folder = Path(table.path) / ".markerstore" / "timeline"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def assert_refused(result: Result, *words: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("markerstore: error: "), result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0]
    assert SECRET not in result.output


@pytest.mark.parametrize("query", [
    "SELECT * FROM read_csv('{secret}')",
    "SELECT * FROM read_text('{secret}')",
    "SELECT * FROM '{secret}'",
    "SELECT count(*) FROM files WHERE path IN (SELECT name FROM read_csv('{secret}'))",
    "SELECT * FROM glob('{folder}/*')",
    "SELECT * FROM sniff_csv('{secret}')",
])
def test_reading_a_file_outside_the_views_is_refused(table: Table, secret: Path,
                                                     query: str) -> None:
    result = run("sql", table.path, query.format(secret=secret, folder=secret.parent))
    assert_refused(result, "--unsafe-sql")


@pytest.mark.parametrize("options", ["", " (FORMAT csv, HEADER false, USE_TMP_FILE false)"])
def test_copy_over_the_timeline_is_refused_and_the_timeline_untouched(table: Table,
                                                                      options: str) -> None:
    """The attack: COPY a crafted row over a timeline file; every later query failed."""
    before = timeline_files(table)
    completed = next(name for name in before if name.endswith(".commit"))
    timeline = Path(table.path) / ".markerstore" / "timeline"
    for target in (timeline / "99999999999999999.commit", timeline / completed):
        result = run("sql", table.path, f"COPY (SELECT '{{}}' AS x) TO '{target}'{options}")
        assert_refused(result, "COPY")
        # the same write hidden behind EXPLAIN ANALYZE (which executes what it explains)
        result = run("sql", table.path,
                     f"EXPLAIN ANALYZE COPY (SELECT '{{}}' AS x) TO '{target}'{options}")
        assert_refused(result, "EXPLAIN")
    assert timeline_files(table) == before
    after = run("sql", table.path, "SELECT count(*) AS n FROM commits", "--json")
    assert after.exit_code == 0 and '"n": 1' in after.output


def test_attach_export_install_load_are_refused(table: Table, tmp_path: Path) -> None:
    for query, word in ((f"ATTACH '{tmp_path / 'other.db'}' AS other", "ATTACH"),
                        (f"EXPORT DATABASE '{tmp_path / 'exported'}'", "EXPORT"),
                        ("INSTALL httpfs", "INSTALL"),
                        ("LOAD httpfs", "LOAD"),
                        ("SET enable_external_access = true", "SET"),
                        ("RESET lock_configuration", "RESET"),
                        ("CREATE TABLE x AS SELECT 1", "CREATE"),
                        ("CALL pragma_version()", "CALL"),
                        ("SELECT 1; SELECT 2", "one statement")):
        assert_refused(run("sql", table.path, query), word)
    assert not (tmp_path / "other.db").exists() and not (tmp_path / "exported").exists()


def test_pragma_threads_is_refused_at_once(table: Table) -> None:
    """`PRAGMA threads=1000000` hung the command: it is refused before DuckDB runs it."""
    out = subprocess.run([sys.executable, "-m", "markerstore.cli", "sql", table.path,
                          "PRAGMA threads=1000000"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "PRAGMA statements are not allowed" in out.stderr


@pytest.mark.parametrize("query", ["", ";", "  ; ;  "])
def test_an_empty_query_is_one_line(table: Table, query: str) -> None:
    assert_refused(run("sql", table.path, query), "empty query")


@pytest.mark.parametrize("query, code, words", [
    ("SELECT 'a'::INT", 1, "Conversion Error"),
    ("SELECT error('boom')", 1, "boom"),
    ("SELECT * FROM files WHERE size = 'x'::INT", 1, "Conversion Error"),
    ("SELEC 1", 2, "syntax error"),
    ("SELECT nope FROM files", 2, "nope"),
])
def test_duckdb_errors_are_one_line(table: Table, query: str, code: int, words: str) -> None:
    result = run("sql", table.path, query)
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "LINE 1" not in lines[0]


def test_read_only_queries_over_the_views_still_run(table: Table) -> None:
    for query in ("SELECT path, rows FROM files", "WITH f AS (SELECT * FROM files) "
                  "SELECT path, rows FROM f", "FROM files SELECT path, rows",
                  "DESCRIBE files", "SHOW TABLES", "SUMMARIZE files", "EXPLAIN SELECT 1",
                  "SELECT path, rows FROM files;"):
        result = run("sql", table.path, query)
        assert result.exit_code == 0, (query, result.output)
    assert "d=1/a.parquet" in run("sql", table.path, "SELECT path FROM files").output


def test_unsafe_sql_gives_the_full_engine(table: Table, secret: Path, tmp_path: Path) -> None:
    result = run("sql", table.path, "--unsafe-sql", f"SELECT name FROM read_csv('{secret}')")
    assert result.exit_code == 0 and SECRET in result.output
    out = tmp_path / "out.csv"
    result = run("sql", table.path, "--unsafe-sql", f"COPY (SELECT path FROM files) TO '{out}'")
    assert result.exit_code == 0, result.output
    assert "d=1/a.parquet" in out.read_text()


def test_the_python_api_is_the_full_engine_unless_sandboxed(table: Table,
                                                            secret: Path) -> None:
    """Table.sql runs the full engine (documented); sandbox.run on its connection is the
    CLI's sandbox."""
    assert sql_views(table, f"SELECT name FROM read_csv('{secret}')").fetchall() == [(SECRET,)]
    with pytest.raises(SqlRefusedError):
        sandbox.run(connect_views(table), f"COPY (SELECT 1) TO '{secret}'")
    con = connect_views(table)
    with pytest.raises(Exception, match="disabled by configuration"):
        sandbox.run(con, f"SELECT * FROM read_csv('{secret}')").fetchall()
    assert sandbox.run(con, "SELECT count(*) FROM files").fetchall() == [(1,)]


def test_sandboxed_views_on_every_storage(location: Location) -> None:
    """The views are built before the connection is locked: they work on local disk,
    memory:// and S3 with external access off."""
    table = Table(location.url, location.storage_options)
    done = table.start_commit(heartbeat=False)
    marked_write(table, done, ["d=1/a.parquet"])
    table.commit(done, [{"path": "d=1/a.parquet", "rows": 2}])
    pending = table.start_commit(heartbeat=False)
    marked_write(table, pending, ["d=2/b.parquet"])
    con = connect_views(table)
    assert sandbox.select(con, "SELECT count(*) FROM commits").fetchall() == [(2,)]
    assert sandbox.select(con, "SELECT path FROM files").fetchall() == [("d=1/a.parquet",)]
    assert sandbox.select(con, "SELECT path FROM markers").fetchall() == [("d=2/b.parquet",)]
    with pytest.raises(Exception, match="disabled by configuration"):
        sandbox.select(con, "SELECT * FROM read_text('/etc/hostname')").fetchall()


@pytest.mark.parametrize("query", [
    "EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'",
    "explain   analyse SELECT 1",
    "EXPLAIN COPY (SELECT 1) TO 'x.csv'",
    "EXPLAIN (FORMAT json) COPY (SELECT 1) TO 'x.csv'",
    "/* hidden */ EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'",
    "-- comment\nCOPY (SELECT 1) TO 'x.csv'",
    "PIVOT (SELECT 1 AS a) ON a",
    "SELECT 1; COPY (SELECT 1) TO 'x.csv'",
    "DETACH memory",
    "USE memory",
    "CHECKPOINT",
    "SET VARIABLE x = 1",
])
def test_check_refuses_everything_but_one_read_only_statement(query: str) -> None:
    with pytest.raises(SqlRefusedError):
        sandbox.check(query)


@pytest.mark.parametrize("query", ["SELECT 1", "EXPLAIN SELECT 1", "with a as (select 1) "
                                   "select * from a", "VALUES (1)", "DESCRIBE SELECT 1",
                                   "SUMMARIZE SELECT 1", "SELECT 1;", "FROM range(3)"])
def test_check_lets_read_only_statements_through(query: str) -> None:
    sandbox.check(query)
