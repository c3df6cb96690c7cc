"""`markerstore sweep TABLE`: abort orphaned multipart uploads of failed writes."""

from __future__ import annotations

import click

from markerstore.cli.main import json_flag, open_table, output, storage_option_flag


@click.command()
@click.argument("table")
@click.option("--dry-run", is_flag=True, help="List what would be aborted; change nothing.")
@storage_option_flag
@json_flag
def sweep(table: str, dry_run: bool, storage_options: tuple[str, ...], as_json: bool) -> None:
    """Abort orphaned multipart uploads of TABLE's failed writes (rolled back, or completed
    but left behind by a task that outlived its job), and delete the staging areas and
    plans those writes left. Uploads of live or failed-but-unrecovered writes, and of
    anything that is not this table's, are listed and left alone: run `markerstore
    rollback` first to recover failed writes."""
    from markerstore.commit import sweep as run_sweep

    report = run_sweep(open_table(table, storage_options), dry_run=dry_run)
    rows = [{"kind": r["kind"], "instant": r.get("instant"), "state": r.get("state"),
             "key": r.get("key"), "upload_id": r.get("upload_id"), "action": r["action"]}
            for r in report.rows]
    output(rows, as_json, columns=["kind", "instant", "state", "key", "action"])


def register(group: click.Group) -> None:
    group.add_command(sweep)
