"""A table's formats against its timeline, beyond the instants they hold: another tool's
commits, and formats that are lost or moved. ``verify`` reports them; ``verify --repair``
makes each format hold the timeline's files again.

``format_foreign_commit``  a Delta version or Iceberg snapshot another tool wrote after
                           markerstore's last one (``write_deltalake``, pyiceberg's
                           ``append``, a compaction). Writes refuse to start while it is
                           there (:func:`refuse_foreign_commits`); repair publishes one
                           version/snapshot holding exactly the timeline's files (the other
                           tool's files stay on storage, unreferenced: ``orphan_file``
                           findings not named as markerstore's, never deleted).
``format_lost``            the format's log or metadata is gone (``_delta_log/`` or
                           ``metadata/`` deleted, or never published). Repair rebuilds it
                           from the timeline: one version/snapshot of the files as of the
                           latest completed instant no write in flight precedes, the
                           instants up to it as held, then the later instants as usual.
``format_catalog_lost``    Iceberg's catalog lost the table's entry (``catalog.db``
                           deleted) while ``metadata/`` holds its metadata: repair registers
                           the latest metadata file again.
``format_moved``           the table folder moved with its embedded Iceberg catalog, whose
                           metadata holds the old absolute paths: repair rebuilds it here
                           (the old metadata files stay in ``metadata/``, unreferenced).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, cast

from markerstore.errors import ForeignCommitError, MarkerStoreError
from markerstore.formats.base import OVERWRITE, CommitToPublish, FormatPublisher, PublishedFile
from markerstore.formats.commits import hive_partition, table_schema
from markerstore.formats.publish import (
    FormatOutcome,
    publish,
    publishers_of,
    refuse_foreign_commits,
)
from markerstore.table import Table
from markerstore.timeline import COMPLETED, INFLIGHT, REQUESTED

log = logging.getLogger(__name__)

WHAT = {"delta": ("Delta", "version"), "iceberg": ("Iceberg", "snapshot")}


class _Restorable(Protocol):
    """A publisher that can hold the timeline's files again (Delta's, Iceberg's)."""

    def restore(self, commit: CommitToPublish, instants: list[str]) -> str: ...

    def register(self) -> str: ...


def refuse_foreign_commits_of(table: Table, publishers: list[FormatPublisher] | None = None
                              ) -> None:
    """ForeignCommitError, in one line, where a format of `table` holds another tool's
    commits after markerstore's last one (a write calls it before it starts)."""
    for publisher in publishers_of(table) if publishers is None else publishers:
        try:
            refuse_foreign_commits(table, publisher)
        except ForeignCommitError:
            raise
        except Exception as exc:  # a format that cannot be read: its publish reports it
            log.warning("%s: %s cannot be read to look for another tool's commits (%s)",
                        table, publisher.name, exc)


def restore_point(table: Table) -> str | None:
    """The latest completed instant that no requested or inflight instant precedes (a
    format rebuilt up to it never misses an older write that completes later)."""
    infos = table.timeline()
    live = [i.instant for i in infos if i.state in (REQUESTED, INFLIGHT)]
    done = [i.instant for i in infos if i.state == COMPLETED
            and (not live or i.instant < min(live))]
    return done[-1] if done else None


def timeline_commit(table: Table, through: str) -> CommitToPublish | None:
    """The timeline's files as of `through`, as one commit to publish (None: no file)."""
    files = table.snapshot(as_of=through).files
    if not files:
        return None
    partition_by = tuple(table.requested_info(through).get("partition_by") or ()) \
        or tuple(hive_partition(files[0].path))
    added = tuple(PublishedFile(f.path, int(f.size or 0), f.rows, hive_partition(f.path))
                  for f in files)
    schema = table_schema(table, [files[0].path], partition_by)
    return CommitToPublish(through, OVERWRITE, added, (), partition_by, schema)


def _restore(table: Table, publisher: FormatPublisher) -> str:
    """Make `publisher`'s format hold the timeline's files as of :func:`restore_point`,
    then publish the later instants. Returns what was published."""
    through = restore_point(table)
    commit = None if through is None else timeline_commit(table, through)
    if through is None or commit is None:
        _published(publish(table, [publisher]).get(publisher.name))
        return "published every completed instant"
    completed = [i for i in _completed(table) if i <= through]
    published = cast(_Restorable, publisher).restore(commit, completed)
    later = _published(publish(table, [publisher]).get(publisher.name))
    noun = WHAT.get(publisher.name, (publisher.name, "version"))[1]
    return (f"{published}: a {noun} holding the {len(commit.added)} file(s) of instant "
            f"{through}" + (f", then {len(later)} later instant(s)" if later else ""))


def _published(outcome: FormatOutcome | None) -> list[str]:
    """The instants `outcome` published; MarkerStoreError where the format still lacks
    some (the repair did not make it hold the timeline's files)."""
    if outcome is None:
        return []
    if not outcome.ok:
        raise MarkerStoreError(f"{outcome.text()}: {len(outcome.pending)} completed "
                               "instant(s) not published")
    return outcome.published


def _completed(table: Table) -> list[str]:
    return [i.instant for i in table.timeline() if i.state == COMPLETED]


def _finding(kind: str, publisher: FormatPublisher, path: str, action: str) -> dict[str, Any]:
    return {"kind": kind, "format": publisher.name, "path": path, "instant": None,
            "action": action}


def _problem(table: Table, publisher: FormatPublisher, repair: bool
             ) -> dict[str, Any] | None:
    """The finding of a lost, moved or unregistered format (repaired with `repair`)."""
    problem = getattr(publisher, "problem", None)
    with_files = [i for i, meta in table.completed() if meta.get("files")]
    found = problem(with_files) if problem is not None else None
    if found is None:
        return None
    kind, detail = found["kind"], found["detail"]
    if kind == "format_catalog_lost":
        done = cast(_Restorable, publisher).register() if repair else None
        action = f"{detail}: {done}" if done else f"{detail}: would register it again"
    else:
        done = _restore(table, publisher) if repair else None
        action = (f"{detail}: rebuilt from the timeline, {done}" if done else
                  f"{detail}: would rebuild it from the timeline (one "
                  f"{WHAT.get(publisher.name, ('', 'version'))[1]} of the files as of the "
                  "latest completed instant, then the later instants)")
    return _finding(kind, publisher, found["path"], action)


def _foreign(table: Table, publisher: FormatPublisher, repair: bool) -> dict[str, Any] | None:
    """The finding of another tool's commits (restored over with `repair`)."""
    foreign_commits = getattr(publisher, "foreign_commits", None)
    found = foreign_commits() if foreign_commits is not None else []
    if not found:
        return None
    name, noun = WHAT.get(publisher.name, (publisher.name, "version"))
    named = ", ".join(f"{name} {c['id']} ({c['what']})" for c in found)
    if repair:
        action = (f"{named} not written by markerstore: {_restore(table, publisher)} (the "
                  "other tool's files stay on storage, unreferenced)")
    else:
        action = (f"{named} not written by markerstore: writes refuse to publish over it; "
                  f"would publish a {noun} holding the timeline's files again")
    return _finding("format_foreign_commit", publisher,
                    f"{publisher.name} {found[0]['id']}", action)


def check_outside_changes(table: Table, *, repair: bool = False
                          ) -> tuple[list[dict[str, Any]], set[str]]:
    """For ``verify``: the findings of foreign commits and lost or moved formats (each
    with the action taken: with `repair`, the format holds the timeline's files again),
    and the names of the formats still in that state (left out of the other checks)."""
    findings: list[dict[str, Any]] = []
    broken: set[str] = set()
    for publisher in publishers_of(table):
        try:
            found = _problem(table, publisher, False) or _foreign(table, publisher, False)
        except Exception as exc:  # unreadable: the drift check reports it (format_error)
            log.info("%s: %s cannot be read to look for outside changes: %s", table,
                     publisher.name, exc)
            continue
        if found is None:
            continue
        seen = found
        if repair:
            try:
                found = _problem(table, publisher, True) or _foreign(table, publisher, True)
            except Exception as exc:
                log.warning("%s: repairing %s failed: %s", table, publisher.name, exc)
                found = _finding(seen["kind"], publisher, seen["path"],
                                 f"repair failed: {type(exc).__name__}: {exc}")
                broken.add(publisher.name)
        else:
            broken.add(publisher.name)
        findings.append(found or seen)
    return findings, broken
