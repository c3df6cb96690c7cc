"""`markerstore demo`: the core end to end on local disk, saying what each step proves."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

import click

from errortable import ErrorTables
from errortable import connect as connect_errors
from errortable import table_sql as sql_views
from markerstore.commit import recover
from markerstore.markers import DirectWriteMarkers
from markerstore.render.text import visible
from markerstore.table import Table


def _step(number: int, title: str) -> None:
    click.echo()
    click.secho(f"[{number}] {title}", bold=True)


def _proved(text: str) -> None:
    click.secho(f"    proved: {text}", fg="green")


def _fail_first_attempt(step: str, attempt: Any, files: list[Any]) -> None:
    """Task hook: the first attempt of Spark partition 1 dies after writing its files."""
    if step == "committed" and attempt.partition_id == 1 and attempt.attempt_number == 0:
        os._exit(3)


def run_demo(folder: str, rows: int = 100_000, report_folder: str | None = None) -> None:
    """The demo's steps, each saying what it proved; the report goes to `report_folder`
    (default: `folder`)."""
    url = os.path.join(folder, "events")
    table = _ingest_step(os.path.join(folder, "source"), url, rows)
    _sql_step(table)
    _killed_writer_step(table)
    _report_step(table, report_folder or folder)


def _ingest_step(source: str, url: str, rows: int) -> Table:
    """Steps 1 and 2: generate a sample and ingest it with Spark while one task dies."""
    from markerstore.cli import sample
    from markerstore.ingest.pipeline import ingest, spark_session

    _step(1, f"Generate a sample: {rows:,} JSON lines, about 1% bad")
    info = sample.generate(source, rows=rows)
    click.echo(f"    {source}: {len(info.paths)} files; bad rows by kind: {info.bad}")

    _step(2, "Ingest it with Spark (local[2,4]); one task dies after writing its files")
    started = time.time()
    # The task failure is injected on purpose: Spark's log of it is switched off.
    spark = spark_session("local[2,4]", log_level="OFF")
    result = ingest(source, url, schema=sample.SCHEMA_DDL, checks=sample.CHECKS,
                    key=sample.KEY, partition_by=sample.PARTITION_BY, markers="batched",
                    spark=spark, progress=False, _task_hook=_fail_first_attempt)
    summary = result.summary()
    for key in ("instant", "rows_read", "rows_written", "error_records_by_reason",
                "files_committed", "files_cleaned"):
        click.echo(f"    {key}: {summary[key]}")
    click.echo(f"    took {time.time() - started:.1f} s")
    table = Table(url)
    data_files = [p for p in table.storage.find(url) if p.endswith(".parquet")]
    committed = len(table.snapshot().files)
    assert len(data_files) == committed
    rows, errors = read_back(table, result.commit.instant, info.rows,
                             {k: v for k, v in info.bad.items() if v})
    _proved(f"the dead attempt's {result.commit.files_cleaned} file(s) were deleted from "
            f"its markers: the table holds exactly the {committed} committed files")
    _proved(f"rows in = rows written + error rows, counted in the committed files: "
            f"{info.rows:,} = {rows:,} + {sum(errors.values()):,}, and the error table holds "
            f"one row per bad input row ({errors})")
    return table


def _sql_step(table: Table) -> None:
    """Step 3: the SQL audits."""
    _step(3, "SQL audits with DuckDB: commits, files, errors")
    for query in (
        "SELECT instant, state, num_files, num_rows, error_records FROM commits",
        "SELECT partition, count(*) AS files, sum(rows) AS rows FROM files "
        "GROUP BY 1 ORDER BY 1",
        "SELECT reason, fingerprint, count(*) AS n, any_value(message) AS example "
        "FROM errors GROUP BY 1, 2 ORDER BY n DESC LIMIT 5",
    ):
        click.echo(f"    > {query}")
        for row in sql_views(table, query).fetchall():
            click.echo("      " + " | ".join(_short(v) for v in row))
    _proved("commits, files and error rows are queryable with SQL, grouped by fingerprint")


def _killed_writer_step(table: Table) -> None:
    """Step 4: a writer killed mid-write, rolled back by the next one from its markers."""
    url = table.path
    _step(4, "A writer process killed in the middle of its write")
    script = textwrap.dedent(f"""
        import os
        from markerstore import Table
        t = Table({url!r})
        i = t.start_commit()
        m = t.markers(i)
        for n in range(3):
            m.create("day=2026-11-22", f"part-{{n:05d}}_{{n}}-2-0_{{i}}.parquet")
            t.storage.put(t.storage.path("day=2026-11-22",
                                         f"part-{{n:05d}}_{{n}}-2-0_{{i}}.parquet"), b"partial")
        print(i, flush=True)
        os._exit(9)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False)
    dead = out.stdout.strip()
    click.echo(f"    writer of instant {dead} died with exit code {out.returncode}, leaving "
               f"{len(table.storage.find(table.storage.path('day=2026-11-22')))} partial files")
    started = time.time()
    results = recover(Table(url), error_tables=ErrorTables())
    deleted = sum(len(r.deleted) for r in results)
    click.echo(f"    the next writer rolled back {[r.instant for r in results]}: {deleted} "
               f"files deleted in {time.time() - started:.2f} s, from markers alone")
    left = table.storage.find(table.storage.path("day=2026-11-22"))
    _proved(f"no partial file is left ({len(left)}), the failed instant is "
            f"{table.state(dead)}, and the committed data is untouched "
            f"({table.snapshot().dataset().count_rows():,} rows read back)")
    assert not DirectWriteMarkers(table.storage, dead, initialize=False).exists()


def _report_step(table: Table, folder: str) -> None:
    """Last: the table's report, a self-contained HTML page."""
    from markerstore.audit import build

    _step(5, "The table's report (markerstore report)")
    report = build(table)
    path = report.write(os.path.join(folder, "markerstore-demo-report.html"))
    click.echo(f"    written to {path} ({report.to_dict()['verdict']['summary']})")


def read_back(table: Table, instant: str, source_rows: int, bad: dict[str, int]
              ) -> tuple[int, dict[str, int]]:
    """The rows of `instant`'s committed data files and its committed error rows by reason,
    read back as a reader reads them (the snapshot's files with pyarrow, the error files
    with DuckDB), never the counts the writers reported. They must account for every
    source row: `source_rows` rows in all, `bad` error rows by reason; else the demo
    stops, saying what the table holds."""
    import pyarrow.dataset as ds

    snapshot = table.snapshot()
    paths = [table.storage.path(f.path) for f in snapshot.files if f.instant == instant]
    rows = ds.dataset(paths, filesystem=table.storage.fs, format="parquet").count_rows() \
        if paths else 0
    found = connect_errors(table, strict=True).execute(
        "SELECT reason, count(*) FROM errors WHERE source_instant = ? GROUP BY 1 ORDER BY 1",
        [instant]).fetchall()
    errors = {str(reason): int(n) for reason, n in found}
    if rows + sum(errors.values()) != source_rows or errors != bad:
        raise click.ClickException(
            f"not proved: {source_rows:,} rows in ({bad} bad), but the committed files hold "
            f"{rows:,} rows and {sum(errors.values()):,} error rows {errors}")
    return rows, errors


def _short(value: Any, width: int = 60) -> str:
    text = "" if value is None else visible(str(value).splitlines()[0]) if str(value) else ""
    return text if len(text) <= width else text[: width - 1] + "…"


@click.command()
@click.option("--folder", type=click.Path(file_okay=False), default=None,
              help="Where to put the demo table (default: a temporary folder).")
@click.option("--rows", type=click.IntRange(1000), default=100_000, show_default=True,
              help="Rows in the generated sample.")
def demo(folder: str | None, rows: int) -> None:
    """Run the end-to-end demo (Spark, local disk) and say what each step proves."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        run_demo(folder, rows)
    else:
        with tempfile.TemporaryDirectory(prefix="markerstore-demo-") as tmp:
            run_demo(tmp, rows, report_folder=tempfile.gettempdir())  # the page outlives tmp
    click.echo()
    click.secho("demo finished", bold=True)


def register(group: click.Group) -> None:
    group.add_command(demo)
