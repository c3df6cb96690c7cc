"""Retention: ``expire`` removes whole error commits older than a cutoff.

Expiry works by commit, never by file, so readers see a commit's error rows all or none
at every moment: first one completed ``expire`` instant on the error table records which
error instants (and files, and row counts) it removes; from then on readers skip those
instants; only then are the files deleted. A crash after the record and before the
deletes leaves files that no reader looks at, and the next expire deletes them. The
record stays on the error table's timeline as the history of what was expired.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from errortable.reading.reader import EXPIRE_OPERATION, expire_record, is_error_table
from errortable.writing.expired import expired_paths
from errortable.writing.taskwriter import OPERATION
from markerstore.errors import ConfigError, NotAnErrorTableError
from markerstore.formats import publish, referenced_paths
from markerstore.render.html import table_html
from markerstore.table import Table
from markerstore.timeline import parse_instant

log = logging.getLogger(__name__)

DONE_DIR = ".markerstore/expired"
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
MAX_DURATION = timedelta(days=365_000)  # a cutoff a thousand years back still fits a date


def parse_duration(text: str | timedelta) -> timedelta:
    """"30d", "12h", "90m", "45s", "2w" as a timedelta."""
    if isinstance(text, timedelta):
        return text
    match = _DURATION.match(str(text))
    if not match:
        raise ConfigError(f"expected a duration like 30d, 12h, 90m, 45s or 2w, got {text!r}")
    try:
        delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    except OverflowError:
        delta = MAX_DURATION + MAX_DURATION
    if delta > MAX_DURATION:
        raise ConfigError(f"duration {text!r} is too long (at most {MAX_DURATION.days}d)")
    return delta


@dataclass
class ExpireResult:
    """What an expire removed (or, with dry_run, would remove)."""

    error_table: str
    cutoff: str
    dry_run: bool
    expire_instant: str | None = None
    expired: list[dict[str, Any]] = field(default_factory=list)
    files_deleted: int = 0
    leftover_files_deleted: int = 0

    @property
    def rows(self) -> int:
        return sum(int(e.get("rows") or 0) for e in self.expired)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rows": self.rows}

    def _repr_html_(self) -> str:
        verb = "would expire" if self.dry_run else "expired"
        return (f"<b>{self.error_table}: {verb} {len(self.expired)} error commit(s), "
                f"{self.rows} row(s), older than {self.cutoff}</b>" + table_html(self.expired))


def _open(path: str | Table, storage_options: Mapping[str, Any] | None) -> Table:
    table = path if isinstance(path, Table) else Table(path, storage_options)
    if not is_error_table(table):
        raise NotAnErrorTableError(f"{table.storage.url()} is not an error table")
    return table


def expire(path: str | Table, older_than: str | timedelta,
           storage_options: Mapping[str, Any] | None = None, *, dry_run: bool = False,
           now: datetime | None = None) -> ExpireResult:
    """Expire every committed error instant older than `older_than` (by its instant time)."""
    table = _open(path, storage_options)
    cutoff = (now or datetime.now(timezone.utc)) - parse_duration(older_than)
    result = ExpireResult(table.storage.url(), cutoff.isoformat(timespec="seconds"), dry_run)
    already: dict[str, dict[str, Any]] = {}
    unfinished: dict[str, list[str]] = {}
    done = set(table.storage.ls(table.storage.path(DONE_DIR)))
    candidates = []
    for instant, meta in table.completed():
        if meta.get("operation") == EXPIRE_OPERATION:
            record = expire_record(table, instant, meta)  # checked before any delete
            already.update(record)
            if instant not in done:
                unfinished[instant] = [p for info in record.values()
                                       for p in info.get("files", [])]
        elif meta.get("operation") == OPERATION:
            candidates.append((instant, meta))
    for instant, meta in candidates:
        if instant in already or parse_instant(instant) >= cutoff:
            continue
        files = [f["path"] for f in meta.get("files", [])]
        result.expired.append({
            "error_instant": instant, "source_table": meta.get("source_table"),
            "source_instant": meta.get("source_instant"), "files": files,
            "rows": sum(int(f.get("rows") or 0) for f in meta.get("files", []))})
    if dry_run:
        return result
    for earlier, paths in unfinished.items():
        result.leftover_files_deleted += _delete(table, earlier, paths)
    if not result.expired:
        return result
    instant = table.start_commit(operation=EXPIRE_OPERATION, rollback_failed=False)
    try:
        table.commit(instant, [], metadata={
            "expired": {e["error_instant"]: {k: v for k, v in e.items() if k != "error_instant"}
                        for e in result.expired},
            "cutoff": result.cutoff})
    except BaseException:
        table.abort(instant)
        raise
    result.expire_instant = instant
    result.files_deleted = _delete(table, instant, [p for e in result.expired
                                                    for p in e["files"]])
    log.info("%s: expired %d error commit(s), %d row(s), in %s", table.storage.url(),
             len(result.expired), result.rows, instant)
    return result


def _delete(table: Table, expire_instant: str, paths: list[str]) -> int:
    """Delete an expire's files (missing ones are fine), then note that it is done, so
    later expires do not try again. First the table's formats publish the expire (their
    versions stop referencing the files), as every commit of the table before it."""
    publish(table, absent=expired_paths)
    # a format still referencing one (a snapshot after the expire): it stays
    kept = referenced_paths(table, release_before=expire_instant)
    paths = [p for p in paths if p not in kept]
    storage = table.storage
    count = storage.delete_many([storage.path(p) for p in paths], table.parallelism)
    storage.put(storage.path(DONE_DIR, expire_instant), b"")
    return count
