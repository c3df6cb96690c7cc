"""`markerstore report TABLE`: a table's health at a glance, as a self-contained HTML page
(or ``--json``)."""

from __future__ import annotations

import json
import os

import click

from markerstore.cli.main import json_flag, open_table, storage_option_flag
from markerstore.render.text import visible


@click.command()
@click.argument("table")
@click.option("-o", "--output", "out", metavar="FILE", default="report.html",
              show_default=True, help="Where to write the HTML page (a local file).")
@click.option("--since", metavar="WHEN",
              help="Only commits from then on: a duration back from now (7d, 12h), a date "
                   "(2026-11-01), a time or an instant id.")
@click.option("--verify", "run_verify", is_flag=True,
              help="Also run markerstore verify's checks (lists the whole table) and show "
                   "its findings.")
@storage_option_flag
@json_flag
def report(table: str, out: str, since: str | None, run_verify: bool,
           storage_options: tuple[str, ...], as_json: bool) -> None:
    """Write a self-contained HTML report of TABLE: commits over time, data quality (error
    rows by reason, checks, top fingerprints with an example), layout (partitions, file
    sizes), markers and recovery (with each table format's position and backlog), and a
    one-line verdict. Charts are inline SVG: the page fetches nothing. With --json, print
    the same figures instead."""
    from markerstore.audit.report import build, parse_since

    parse_since(since)  # a bad --since is refused before the table is read
    result = build(open_table(table, storage_options), since=since, verify=run_verify)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, default=str))
        return
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise click.UsageError(f"-o {out}: folder {folder} does not exist")
    path = result.write(out)
    verdict = result.to_dict()["verdict"]["summary"]
    click.echo(f"{visible(path)}: report of {visible(result.to_dict()['table']['url'])} "
               f"({verdict})")


def register(group: click.Group) -> None:
    group.add_command(report)
