"""The SQL sandbox of `errortable query`, `errortable replay --where` and the `errors` view
of `markerstore sql`: the committed error rows and nothing else; `--unsafe-sql` gives the
full engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import errortable
from markerstore import Table
from markerstore.cli.errortable import cli
from markerstore.cli.main import cli as markerstore_cli
from markerstore.config import ERROR_TABLE_FORMAT as FORMAT
from markerstore.errors import SqlRefusedError
from tests.support.errortable_writes import batch, full_write
from tests.support.locations import Location
from tests.support.sandbox import SECRET


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="errortable", catch_exceptions=False)


@pytest.fixture(params=["avro", "parquet"])
def written(tmp_table: Table, request: pytest.FixtureRequest) -> Any:
    """Error rows in Avro (decoded into Arrow) or Parquet (read lazily by DuckDB itself,
    so the locked connection must still be allowed to read exactly those files)."""
    return full_write(tmp_table, [batch(2, {"cast": 2, "check": 1})], {FORMAT: request.param})


def assert_refused(result: Result, word: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("errortable: error: "), result.stderr
    assert word in lines[0] and SECRET not in result.output


def test_query_reads_the_errors_view_in_the_sandbox(written: Any) -> None:
    result = run("query", written.commit.url, "SELECT reason, count(*) AS n FROM errors "
                                              "GROUP BY 1 ORDER BY 1", "--json")
    assert result.exit_code == 0, result.output
    assert '"cast"' in result.output and '"n": 2' in result.output
    # through the target table too, and through `markerstore sql`'s errors view
    via_target = run("query", written.target.path, "SELECT count(*) AS n FROM errors")
    assert via_target.exit_code == 0 and via_target.output.split() == ["n", "3"]
    ms = CliRunner().invoke(markerstore_cli, ["sql", written.target.path,
                                              "SELECT count(*) AS n FROM errors"],
                            prog_name="markerstore", catch_exceptions=False)
    assert ms.exit_code == 0 and ms.output.split() == ["n", "3"], ms.output


@pytest.mark.parametrize("query, word", [
    ("SELECT * FROM read_csv('{secret}')", "--unsafe-sql"),
    ("SELECT * FROM read_text('{secret}')", "--unsafe-sql"),
    ("COPY (SELECT * FROM errors) TO '{out}'", "COPY"),
    ("COPY (SELECT 1 AS x) TO '{error_file}' (FORMAT csv, USE_TMP_FILE false)", "COPY"),
    ("EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{error_file}' (FORMAT csv, "
     "USE_TMP_FILE false)", "EXPLAIN"),
    ("ATTACH '{out}' AS other", "ATTACH"),
    ("EXPORT DATABASE '{out}'", "EXPORT"),
    ("INSTALL httpfs", "INSTALL"),
    ("PRAGMA threads=1000000", "PRAGMA"),
])
def test_query_attacks_are_refused(written: Any, secret: Path, tmp_path: Path, query: str,
                                   word: str) -> None:
    error_files = sorted(p for p in Path(written.commit.url).rglob("*")
                         if p.suffix in (".avro", ".parquet"))
    before = {p: p.read_bytes() for p in error_files}
    out = tmp_path / "out"
    sql = query.format(secret=secret, out=out, error_file=error_files[0])
    assert_refused(run("query", written.commit.url, sql), word)
    assert {p: p.read_bytes() for p in error_files} == before
    assert not out.exists()
    # the markerstore command on the target table refuses it the same way
    ms = CliRunner().invoke(markerstore_cli, ["sql", written.target.path, sql],
                            prog_name="markerstore", catch_exceptions=False)
    assert ms.exit_code == 2 and word in ms.stderr and SECRET not in ms.output
    assert {p: p.read_bytes() for p in error_files} == before


def test_replay_where_cannot_read_a_file(written: Any, secret: Path) -> None:
    """The attack: a subquery in --where reads any file (here it also selects every row)."""
    target = written.target
    before = [i.instant for i in target.timeline()]
    where = f"uid IN (SELECT uid FROM errors) AND EXISTS (SELECT * FROM read_text('{secret}'))"
    assert_refused(run("replay", written.commit.url, "--where", where), "--unsafe-sql")
    assert [i.instant for i in target.timeline()] == before  # nothing replayed
    with pytest.raises(Exception, match="disabled by configuration"):
        errortable.replay(written.commit.url, where)
    # a COPY smuggled into the condition is not one condition, so never runs
    smuggled = f"true) TO '{secret}'; COPY (SELECT 1"
    assert run("replay", written.commit.url, "--where", smuggled).exit_code == 2
    assert SECRET in secret.read_text()


def test_unsafe_sql_gives_the_full_engine(written: Any, secret: Path) -> None:
    result = run("query", written.commit.url, "--unsafe-sql",
                 f"SELECT name FROM read_csv('{secret}')")
    assert result.exit_code == 0 and SECRET in result.output
    where = f"reason = 'check' AND EXISTS (SELECT * FROM read_text('{secret}'))"
    replayed = run("replay", written.commit.url, "--where", where, "--unsafe-sql", "--json")
    assert replayed.exit_code == 0, replayed.output
    assert '"written_rows": 1' in replayed.output


def test_python_query_is_full_unless_sandboxed(written: Any, secret: Path) -> None:
    sql = f"SELECT name FROM read_csv('{secret}')"
    assert errortable.query(written.commit.url, sql).fetchall() == [(SECRET,)]
    with pytest.raises(Exception, match="disabled by configuration"):
        errortable.query(written.commit.url, sql, sandbox=True).fetchall()
    with pytest.raises(SqlRefusedError):
        errortable.query(written.commit.url, "PRAGMA threads=4", sandbox=True)
    assert errortable.query(written.commit.url, "SELECT count(*) FROM errors",
                            sandbox=True).fetchall() == [(3,)]


def test_sandboxed_errors_view_on_every_storage(location: Location) -> None:
    """Parquet error rows on S3 and memory:// are scanned through Arrow, on local disk by
    DuckDB: both work in a locked connection."""
    target = Table(location.url, location.storage_options)
    write = full_write(target, [batch(1, {"cast": 1, "check": 1})], {FORMAT: "parquet"})
    rows = errortable.query(write.commit.url, "SELECT reason FROM errors ORDER BY 1",
                            location.storage_options, sandbox=True).fetchall()
    assert rows == [("cast",), ("check",)]
