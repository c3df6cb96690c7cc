"""`markerstore demo`: the core end to end on local disk, saying what each step proves."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time

import click
import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.markers import DirectWriteMarkers
from markerstore.table import DataFile, Table


def _step(number: int, title: str) -> None:
    click.echo()
    click.secho(f"[{number}] {title}", bold=True)


def _proved(text: str) -> None:
    click.secho(f"    proved: {text}", fg="green")


def _write_parquet(table: Table, path: str, start: int, rows: int) -> DataFile:
    data = pa.table({"id": pa.array(range(start, start + rows), pa.int64()),
                     "value": pa.array([f"v{i}" for i in range(start, start + rows)])})
    with table.storage.open_write(table.storage.path(path)) as handle:
        pq.write_table(data, handle)
    return DataFile(path, rows=rows)


def run_demo(folder: str) -> None:
    url = os.path.join(folder, "events")
    table = Table(url)
    click.echo(f"table: {url}")

    _step(1, "A write whose first task attempt fails after writing its file")
    instant = table.start_commit()
    markers = table.markers(instant)
    winners = []
    for task, (start, rows) in enumerate([(0, 600), (600, 400)]):
        for attempt in range(2 if task == 0 else 1):
            name = f"part-{task:05d}_{task}-1-{attempt}_{instant}.parquet"
            markers.create("day=2026-11-21", name, "CREATE")  # the marker first
            written = _write_parquet(table, f"day=2026-11-21/{name}", start, rows)
            if task == 0 and attempt == 0:
                click.echo(f"    task {task} attempt {attempt}: wrote {name}, then failed")
                continue
            click.echo(f"    task {task} attempt {attempt}: wrote {name}")
            winners.append(written)
    click.echo(f"    markers: {len(markers.all())} for {len(winners)} winning files")
    meta = table.commit(instant, winners)
    click.echo(f"    committed {meta['counts']['files']} files, {meta['counts']['rows']} rows; "
               f"reconcile deleted {meta['counts']['files_cleaned']} duplicate")
    data_files = [p for p in table.storage.find(url) if p.endswith(".parquet")]
    rows = pq.read_table(data_files).num_rows
    _proved(f"the table holds exactly the winning files ({len(data_files)}) and "
            f"{rows} rows, no duplicate of the failed attempt")

    _step(2, "SQL audits with DuckDB")
    for query in ("SELECT instant, state, num_files, num_rows FROM commits",
                  "SELECT partition, file, rows, size FROM files ORDER BY file"):
        click.echo(f"    > {query}")
        relation = table.sql(query)
        for row in relation.fetchall():
            click.echo(f"      {row}")
    _proved("commits and files are queryable with SQL; markers are gone after commit")

    _step(3, "A writer process killed in the middle of its write")
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
    results = Table(url).rollback_failed()
    deleted = sum(len(r.deleted_files) for r in results)
    click.echo(f"    the next writer rolled back {[r.instant for r in results]}: {deleted} "
               f"files deleted in {time.time() - started:.2f} s, from markers alone")
    left = table.storage.find(table.storage.path("day=2026-11-22"))
    _proved(f"no partial file is left ({len(left)}), the failed instant is "
            f"{table.state(dead)}, and the committed data is untouched "
            f"({table.sql('SELECT sum(rows) FROM files').fetchall()[0][0]} rows)")
    assert not DirectWriteMarkers(table.storage, dead, initialize=False).exists()


@click.command()
@click.option("--folder", type=click.Path(file_okay=False), default=None,
              help="Where to put the demo table (default: a temporary folder).")
def demo(folder: str | None) -> None:
    """Run the end-to-end demo on local disk and say what each step proves."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        run_demo(folder)
    else:
        with tempfile.TemporaryDirectory(prefix="markerstore-demo-") as tmp:
            run_demo(tmp)
    click.echo()
    click.secho("demo finished", bold=True)


def register(group: click.Group) -> None:
    group.add_command(demo)
