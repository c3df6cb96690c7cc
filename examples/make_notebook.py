"""Writes examples/audit.ipynb (kept as code so its cells are reviewed like code)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    new_markdown_cell(
        "# Auditing a write with markerstore\n\n"
        "Ingest a generated sample (about 1% bad rows) with Spark, then explore what the "
        "write left behind with DuckDB and pandas: the commit, its files, the error table "
        "and the markers of a write in flight."),
    new_code_cell(
        "import os, sys, tempfile\n"
        "os.environ.setdefault('PYSPARK_PYTHON', sys.executable)\n"
        "import errortable\n"
        "from markerstore import Table\n"
        "from markerstore.sql import sql\n"
        "from markerstore.cli import sample\n"
        "from markerstore.ingest.pipeline import ingest\n\n"
        "folder = tempfile.mkdtemp(prefix='audit-')\n"
        "info = sample.generate(f'{folder}/source', rows=20_000, files=2)\n"
        "info.bad"),
    new_code_cell(
        "result = ingest(f'{folder}/source', f'{folder}/events', schema=sample.SCHEMA_DDL,\n"
        "                checks=sample.CHECKS, key=sample.KEY, partition_by=sample.PARTITION_BY,\n"
        "                master='local[2]', progress=False)\n"
        "result"),
    new_markdown_cell("The commit shows its rows and bytes per partition and its error "
                      "records by reason, drawn by the same code as `markerstore report`."),
    new_code_cell("result.commit"),
    new_markdown_cell("## The error table\n\nEvery bad row is an RFC-20 `ErrorRecord`, "
                      "committed with the data. `errortable.read` returns a DuckDB relation; "
                      "`errortable.stats` counts it, with its charts."),
    new_code_cell("errortable.stats(f'{folder}/events_errors', top=5)"),
    new_code_cell(
        "errors = errortable.read(f'{folder}/events_errors')\n"
        "errors.query('e', 'SELECT reason, source_line, message, record FROM e LIMIT 5').df()"),
    new_code_cell(
        "top = errors.query('e', 'SELECT reason, fingerprint, count(*) AS n, '\n"
        "                        'any_value(message) AS example FROM e GROUP BY ALL '\n"
        "                        'ORDER BY n DESC').df()\n"
        "top"),
    new_markdown_cell("## Commits and files"),
    new_code_cell(
        "table = Table(f'{folder}/events')\n"
        "sql(table, 'SELECT instant, state, num_files, num_rows, error_records FROM commits').df()"),
    new_code_cell(
        "sql(table, 'SELECT partition, count(*) AS files, sum(rows) AS rows, sum(size) AS bytes '\n"
        "          'FROM files GROUP BY 1 ORDER BY 1').df()"),
    new_markdown_cell("## Markers of a write in flight, and its rollback"),
    new_code_cell(
        "instant = table.start_commit()\n"
        "markers = table.markers(instant)\n"
        "for n in range(3):\n"
        "    markers.create('day=2026-11-30', f'part-{n}_{n}-9-0_{instant}.parquet', 'CREATE')\n"
        "inflight = sql(table, 'SELECT instant, partition, file, io_type FROM markers').df()\n"
        "rolled_back = table.rollback(instant, force=True)\n"
        "inflight"),
    new_markdown_cell("## The table, and its report\n\n"
                      "`Table` shows its newest commits as charts. `markerstore.audit.build` "
                      "is `markerstore report`: the same page as the command writes, here "
                      "in the notebook, and its figures as data (`to_dict()`, the command's "
                      "`--json`)."),
    new_code_cell("table"),
    new_code_cell(
        "from markerstore.audit import build\n"
        "report = build(table)\n"
        "report.write(f'{folder}/report.html')\n"
        "report"),
    new_code_cell(
        "# What the audit must show (the tests run this notebook).\n"
        "figures = report.to_dict()\n"
        "assert figures['commits']['rolled_back'] == 1 and figures['verdict']['healthy']\n"
        "counts = top.groupby('reason')['n'].sum().to_dict()\n"
        "assert counts == {k: v for k, v in info.bad.items() if v}, counts\n"
        "assert result.rows_read == info.rows == result.commit.rows_written + sum(counts.values())\n"
        "assert len(inflight) == 3 and table.state(instant) == 'rolledback'\n"
        "print('audit consistent:', result.commit.rows_written, 'rows,', sum(counts.values()),"
        " 'error rows')"),
]


def main() -> None:
    notebook = new_notebook(cells=CELLS, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    Path(__file__).with_name("audit.ipynb").write_text(nbformat.writes(notebook))


if __name__ == "__main__":
    main()
