"""`markerstore expire TABLE`: delete the files replaces replaced once their retention has
passed (:func:`markerstore.commit.retention.expire`)."""

from __future__ import annotations

from typing import Any

import click

from markerstore.cli.main import emit, json_flag, open_table, output, storage_option_flag
from markerstore.render.text import visible


@click.command()
@click.argument("table")
@click.option("--retention", metavar="DURATION", default=None,
              help="Keep what was replaced less than this ago (7d, 12h, 30m, 0). Default: "
                   "the table's markerstore.table.replaced_files.retention (7d).")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; change nothing.")
@storage_option_flag
@json_flag
def expire(table: str, retention: str | None, dry_run: bool,
           storage_options: tuple[str, ...], as_json: bool) -> None:
    """Delete the files that replaces of TABLE replaced more than the retention ago, once
    every table format holds the replace and no retained Delta version or Iceberg snapshot
    references them; expire Iceberg's snapshots superseded before then. Until then those
    files keep time travel working: snapshot(as_of=...), Delta's older versions, Iceberg's
    older snapshots. A later write does the same on its own."""
    from markerstore.commit.retention import expire as run_expire
    from markerstore.errors import ConfigError
    from markerstore.option_values import duration

    if retention is not None:
        try:
            retention = duration(retention)
        except ValueError as exc:
            raise ConfigError(f"--retention: {exc}") from None
    report = run_expire(open_table(table, storage_options), retention=retention,
                        dry_run=dry_run, snapshots=True)
    output(report, as_json, lambda _: _text(report))


def _text(report: Any) -> None:
    rows = [{"path": p, "action": "would delete" if report.dry_run else "deleted"}
            for p in report.deleted]
    rows += [{"path": p, "action": "kept: a format's retained version references it"}
             for p in report.referenced]
    if rows:
        emit(rows, False, ["path", "action"])
    click.echo(f"{visible(report.table)}: {len(report.deleted)} file(s) "
               f"{'to delete' if report.dry_run else 'deleted'} of replaces before "
               f"{report.cutoff} (retention {report.retention}); "
               f"{len(report.retained)} replace(s) within the retention"
               + (f"; {len(report.unpublished)} not yet published to every format"
                  if report.unpublished else ""))


def register(group: click.Group) -> None:
    group.add_command(expire)
