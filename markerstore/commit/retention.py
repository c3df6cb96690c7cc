"""Time travel: the files a replace replaced stay on storage for a retention
(``markerstore.table.replaced_files.retention``, 7 days by default, as Delta's
``delta.deletedFileRetentionDuration``), so that ``snapshot(as_of=...)``, Delta's older
versions and Iceberg's older snapshots keep reading them; ``0`` deletes them once the
replace is published.

Once a replace is published to the table's formats, its cleanup records it in
``.markerstore/retained/<instant>_<published at, ms>`` (one empty file: the listing is the
index, so a write costs one LIST, whatever the history). :func:`expire` takes the entries
whose retention has passed, expires Iceberg's snapshots that were superseded before the
cutoff (those are the snapshots that still reference the files), and deletes the files
the replace recorded as replaced that no format's retained version references, then the
entry. Every write's cleanup calls it (which also expires Iceberg's snapshots superseded
before the cutoff once :data:`~markerstore.formats.iceberg.EXPIRE_BATCH` of them are due,
appends' too: so the metadata each commit reads and writes holds the retention's
snapshots, not the whole history), and so do ``markerstore expire`` (which expires them
whenever one is due) and ``markerstore verify --repair``.

Nothing is deleted that a completed commit references within the retention: a file is
deleted only when the commit that replaced it is older than the retention, every format
holds that commit, no retained Delta version or Iceberg snapshot references the file, and
the file is named for an instant before the one that replaced it (a replace never replaces
a file of its own, or a later one).
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from markerstore import config
from markerstore.commit.names import parse_path
from markerstore.formats import FormatPublisher, publishers_of, referenced_paths
from markerstore.formats.base import TimelineView
from markerstore.formats.publish import expire_snapshots, missing_instants, release_point
from markerstore.option_values import duration_seconds
from markerstore.table import Table
from markerstore.timeline import META_DIR

log = logging.getLogger(__name__)

RETAINED_DIR = f"{META_DIR}/retained"


@dataclass
class ExpireReport:
    """What an expire deleted (or, with dry_run, would delete), and what it kept."""

    table: str
    retention: str
    cutoff: str                          # files replaced before this time may go (UTC)
    dry_run: bool
    deleted: list[str] = field(default_factory=list)
    referenced: list[str] = field(default_factory=list)  # past it, a format still has them
    released: list[str] = field(default_factory=list)    # replaces whose files are all gone
    retained: list[str] = field(default_factory=list)    # replaces within the retention
    unpublished: list[str] = field(default_factory=list)  # past it, a format lacks them

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def retention_seconds(table: Table, retention: str | float | None = None) -> float:
    """The retention to apply: `retention` if given, else the table's option."""
    return duration_seconds(table.settings[config.TABLE_RETENTION]
                            if retention is None else retention)


def retain(table: Table, instant: str, now: float | None = None) -> None:
    """Record that the files replace `instant` replaced stay for the retention, counted
    from `now` (its publish)."""
    at = int((time.time() if now is None else now) * 1000)
    table.storage.put(table.storage.path(RETAINED_DIR, f"{instant}_{at}"), b"")


def retained_entries(table: Table) -> dict[str, tuple[int, list[str]]]:
    """Each recorded replace: instant -> (earliest record time in ms, its entry names)."""
    found: dict[str, tuple[int, list[str]]] = {}
    for name in table.storage.ls(table.storage.path(RETAINED_DIR)):
        instant, _, at = name.partition("_")
        if not at.isdigit() or len(instant) != 17 or not instant.isdigit():
            continue  # not an entry of ours
        first, names = found.get(instant, (int(at), []))
        found[instant] = (min(first, int(at)), [*names, name])
    return found


def _cutoff_text(cutoff_ms: int) -> str:
    moment = _dt.datetime.fromtimestamp(cutoff_ms / 1000, _dt.timezone.utc)
    return moment.isoformat(timespec="seconds")


def _replaced(table: Table, instant: str) -> list[str]:
    """The files replace `instant` recorded as replaced, each named for an earlier instant
    and none its own (anything else is not deleted, and is logged)."""
    meta = table.commit_metadata(instant)
    own = {entry["path"] for entry in meta.get("files", [])}
    files = []
    for path in meta.get("replaced_files") or []:
        named = parse_path(path)
        if path in own or named is None or named.instant >= instant:
            log.warning("%s: instant %s records %s as replaced, which is not a file of an "
                        "earlier instant: it is not deleted", table, instant, path)
            continue
        files.append(path)
    return files


def snapshots_due(publishers: list[FormatPublisher], cutoff_ms: int) -> bool:
    """Whether a format keeps enough snapshots superseded before `cutoff_ms` (epoch ms)
    to expire them now (:meth:`IcebergPublisher.snapshots_due`)."""
    for publisher in publishers:
        due = getattr(publisher, "snapshots_due", None)
        if due is not None and due(cutoff_ms):
            return True
    return False


def expire(table: Table, *, retention: str | float | None = None, now: float | None = None,
           dry_run: bool = False, publishers: list[FormatPublisher] | None = None,
           snapshots: bool = False, view: TimelineView | None = None) -> ExpireReport:
    """Delete the files of replaces older than the retention that no format's retained
    version references (Iceberg's snapshots superseded before the cutoff expired first);
    `snapshots`: expire those Iceberg snapshots even when no replace is due; `view`: the
    timeline as the caller just listed it (else listed now). Idempotent."""
    seconds = retention_seconds(table, retention)
    cutoff_ms = int(((time.time() if now is None else now) - seconds) * 1000)
    shown = table.settings[config.TABLE_RETENTION] if retention is None else str(retention)
    report = ExpireReport(table.storage.url(), shown, _cutoff_text(cutoff_ms), dry_run)
    entries = retained_entries(table)
    due = sorted(i for i, (at, _) in entries.items() if at <= cutoff_ms)
    report.retained = sorted(set(entries) - set(due))
    if not due and not snapshots and publishers is None:
        return report
    publishers = publishers_of(table) if publishers is None else publishers
    if not due and not snapshots and not snapshots_due(publishers, cutoff_ms):
        return report
    # a format that lacks a replace still reads the files it replaced
    view = TimelineView.of(table.timeline()) if view is None else view
    try:
        unpublished = {i for publisher in publishers
                       for i in missing_instants(publisher, view)} & set(due)
    except Exception as exc:  # a format that cannot be read may still reference any
        log.warning("%s: a table format cannot be read (%s): no replaced file is deleted",
                    table, exc)
        unpublished = set(due)
    report.unpublished = sorted(unpublished)
    due = [i for i in due if i not in unpublished]
    release = release_point(publishers, cutoff_ms)
    if not due:  # no replaced file to delete: the snapshots expire, no file is looked up
        if release is not None and not dry_run:
            expire_snapshots(table, publishers, release, view)
        return report
    kept = (referenced_paths(table, publishers, since=release) if dry_run else
            referenced_paths(table, publishers, release_before=release, view=view))
    for instant in due:
        files = _replaced(table, instant)
        gone = [p for p in files if p not in kept]
        report.referenced += [p for p in files if p in kept]
        report.deleted += gone
        if dry_run:
            continue
        table.storage.delete_many([table.storage.path(p) for p in gone], table.parallelism)
        if len(gone) == len(files):
            table.storage.delete_many([table.storage.path(RETAINED_DIR, name)
                                       for name in entries[instant][1]], table.parallelism)
            report.released.append(instant)
    if report.deleted and not dry_run:
        log.info("%s: %d replaced file(s) past the retention (%s) deleted", table,
                 len(report.deleted), shown)
    return report
