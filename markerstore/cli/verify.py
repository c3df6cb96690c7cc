"""`markerstore verify TABLE`: an fsck of a table and its error tables.

Composes the commit protocol's check (:mod:`markerstore.commit.verify`) with what only
the error table knows: which error tables a table has, and which files its expire
commits removed.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

import click

from markerstore.cli.main import emit, json_flag, open_table, output, storage_option_flag
from markerstore.commit.verify import GRACE_DEFAULT, VerifyReport, parse_grace
from markerstore.errors import ConfigError
from markerstore.table import Table
from markerstore.timeline import META_DIR

COLUMNS = ["kind", "path", "size", "instant", "action"]


def _expired_files(meta: Mapping[str, Any]) -> Iterable[str]:
    """The files an error table's expire commit removed (expected absent)."""
    from errortable.reader import EXPIRE_OPERATION

    if meta.get("operation") != EXPIRE_OPERATION:
        return []
    return [str(p) for info in (meta.get("expired") or {}).values()
            for p in info.get("files", [])]


def verify_all(path: str | Table, storage_options: Mapping[str, Any] | None = None, *,
               repair: bool = False, grace: str | timedelta = GRACE_DEFAULT
               ) -> list[VerifyReport]:
    """Verify the table at `path` and every error table it has (or, if `path` is an error
    table, that one): one report each."""
    from markerstore.commit.verify import verify

    table = path if isinstance(path, Table) else Table(path, storage_options)
    if not table.storage.exists(table.storage.path(META_DIR)):
        raise ConfigError(f"{table.storage.url()} is not a markerstore table (it has no "
                          f"{META_DIR} folder)")
    from errortable.reader import error_tables_of, is_error_table

    if is_error_table(table):
        return [verify(table, repair=repair, grace=grace, absent=_expired_files)]
    reports = [verify(table, repair=repair, grace=grace)]
    for url in error_tables_of(table):
        error_table = Table(url, table.storage.storage_options)
        if is_error_table(error_table):
            reports.append(verify(error_table, repair=repair, grace=grace,
                                  absent=_expired_files))
    return reports


@click.command()
@click.argument("table")
@click.option("--repair", is_flag=True,
              help="Delete orphans older than the grace period (never a file of an inflight "
                   "instant or one a completed commit references), abort orphaned uploads, "
                   "delete what terminal instants left. Without it nothing is changed.")
@click.option("--grace", default="1d", show_default=True, metavar="DURATION",
              help="Orphans younger than this are reported, never deleted (1d, 12h, 30m, 0).")
@storage_option_flag
@json_flag
def verify(table: str, repair: bool, grace: str, storage_options: tuple[str, ...],
           as_json: bool) -> None:
    """Compare what is on storage with what the timeline says, for TABLE and its error
    tables: orphan files, committed files missing or of the wrong size, open uploads of
    finished writes, marker folders, plans, staging areas and heartbeats left by finished
    instants, an unreadable table id. A folder with its own .markerstore/ is another
    table: it is skipped and listed (kind nested_table), and nothing of it is deleted.
    Exit 0 when consistent, 1 with the findings."""
    period = parse_grace(grace)
    reports = verify_all(open_table(table, storage_options), repair=repair, grace=period)
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
        click.echo(f"{report.table}: consistent ({report.files_listed} files on storage, "
                   f"{report.committed_files} committed)")
    if findings:  # notices only: the nested tables skipped
        emit(findings, False, COLUMNS)


def register(group: click.Group) -> None:
    group.add_command(verify)
