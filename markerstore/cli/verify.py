"""`markerstore verify TABLE`: an fsck of a table and its error tables
(:func:`markerstore.audit.verify_all`)."""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

from markerstore.audit.verify import LAST_VERIFY_FILE, record_last_verify, verify_all
from markerstore.cli.main import emit, json_flag, open_table, output, storage_option_flag
from markerstore.commit.verify import VerifyReport, parse_grace
from markerstore.render.text import visible

COLUMNS = ["kind", "path", "size", "instant", "action"]


@click.command()
@click.argument("table")
@click.option("--repair", is_flag=True,
              help="Delete orphans older than the grace period (never a file of an inflight "
                   "instant or one a completed commit references), abort orphaned uploads, "
                   "delete what terminal instants left and the files replaces replaced more "
                   "than the retention ago; publish what a table format lacks, and make a "
                   "format another tool committed to, or one that is lost or moved, hold the "
                   "timeline's files again. Without it nothing of the table's data or state "
                   "is changed.")
@click.option("--grace", default="1d", show_default=True, metavar="DURATION",
              help="Orphans younger than this are reported, never deleted (1d, 12h, 30m, 0).")
@click.option("--record/--no-record", default=True, show_default=True,
              help=f"Keep a summary of the result (time, verdict, counts) in "
                   f"{LAST_VERIFY_FILE} for `markerstore report` (best effort: skipped "
                   "where the table is read-only).")
@storage_option_flag
@json_flag
def verify(table: str, repair: bool, grace: str, record: bool,
           storage_options: tuple[str, ...], as_json: bool) -> None:
    """Compare what is on storage with what the timeline says, for TABLE and its error
    tables: orphan files, committed files missing or of the wrong size, open uploads of
    finished writes, marker folders, plans, staging areas and heartbeats left by finished
    instants, an unreadable table id; and each table format (Delta, Iceberg) against the
    timeline: instants it lacks, a format that cannot be read, another tool's versions or
    snapshots, a log, metadata or catalog entry that is lost, a table that moved. A folder
    with its own .markerstore/ is another table: it is skipped and listed (kind
    nested_table), and nothing of it is deleted. Exit 0 when consistent, 1 with the
    findings."""
    period = parse_grace(grace)
    opened = open_table(table, storage_options)
    reports = verify_all(opened, repair=repair, grace=period)
    if record:
        record_last_verify(opened, reports, repair=repair, grace=period)
    findings = [f.to_dict() for r in reports for f in r.findings]
    output(findings, as_json, functools.partial(_verify_text, reports))
    if not all(r.consistent for r in reports):
        sys.exit(1)  # not click's Exit: the group runs without standalone mode


def _verify_text(reports: list[VerifyReport], findings: list[dict[str, Any]]) -> None:
    """The findings as a table, or one line per consistent table checked (and one per
    nested table it skipped)."""
    if not all(r.consistent for r in reports):
        emit(findings, False, COLUMNS)
        return
    for report in reports:
        click.echo(f"{visible(report.table)}: consistent ({report.files_listed} files on storage, "
                   f"{report.committed_files} committed)")
    if findings:  # notices only: the nested tables skipped
        emit(findings, False, COLUMNS)


def register(group: click.Group) -> None:
    group.add_command(verify)
