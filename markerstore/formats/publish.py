"""Publishing completed instants to the table's formats, in the instants' order.

:func:`open_publisher` maps a format's name to its publisher, importing its module only
then (an install hint where its package is missing); nothing is registered by importing
anything. :func:`publish` brings every format of a table up to its timeline: each
completed instant a format does not hold yet becomes one version/snapshot, oldest
instant first. Job commit calls it after the completed instant and before the files a
replace replaced are deleted (:func:`markerstore.commit.cleanup.post_commit`); recovery
calls it for what a crash left unpublished (roll forward), so it is idempotent.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Collection
from typing import Any

from markerstore.errors import ConfigError, ForeignCommitError
from markerstore.formats.base import FormatPublisher, PublishDeferred
from markerstore.formats.commits import Absent, commit_to_publish
from markerstore.table import Table
from markerstore.timeline import COMPLETED

log = logging.getLogger(__name__)

# Format name -> (its module, the package it needs, the extra that installs it).
FORMATS: dict[str, tuple[str, str, str]] = {
    "delta": ("markerstore.formats.delta", "deltalake", "delta"),
    "iceberg": ("markerstore.formats.iceberg", "pyiceberg", "iceberg"),
}


def open_publisher(name: str, table: Table) -> FormatPublisher:
    """The publisher of format `name` for `table`: ``<module>.publisher(table)`` (or its
    ``<Name>Publisher(table)`` class). ConfigError naming the extra to install when the
    format's package is missing."""
    if name not in FORMATS:
        raise ConfigError(f"unknown table format {name!r}; known: {', '.join(FORMATS)}")
    module_name, package, extra = FORMATS[name]
    if importlib.util.find_spec(package) is None:
        raise ConfigError(f"table {table.storage.url()} publishes {name}, which needs the "
                          f"{package} package: pip install 'markerstore[{extra}]'")
    if importlib.util.find_spec(module_name) is None:
        raise ConfigError(f"table {table.storage.url()} publishes {name}, which this "
                          f"version of markerstore cannot publish ({module_name} is missing)")
    module: Any = importlib.import_module(module_name)
    factory = getattr(module, "publisher", None) or getattr(
        module, f"{name.capitalize()}Publisher")
    return factory(table)


def publishers_of(table: Table) -> list[FormatPublisher]:
    """A publisher for each format the table publishes (none for a table without)."""
    return [open_publisher(name, table) for name in table.formats()]


def publish(table: Table, publishers: list[FormatPublisher] | None = None, *,
            absent: Absent | None = None) -> dict[str, list[str]]:
    """Publish every completed instant that a format of `table` does not hold yet, oldest
    first, and return the instants published now, by format. Idempotent; a failure
    raises (the instants stay the source of truth: the next call publishes the rest).
    `absent` names, per commit metadata, files a commit removed besides its
    ``replaced_files`` (an error table's expire)."""
    publishers = publishers_of(table) if publishers is None else publishers
    if not publishers:
        return {}
    completed = _completed_instants(table)
    done: dict[str, list[str]] = {}
    for publisher in publishers:
        refuse_foreign_commits(table, publisher)
        # Only the missing instants' metadata is read: one GET each, none for the rest.
        missing = [(i, table.commit_metadata(i))
                   for i in missing_instants(publisher, completed)]
        published, deferred = [], []
        for instant, meta in missing:
            try:
                publisher.publish(commit_to_publish(table, instant, meta, absent))
                published.append(instant)
            except PublishDeferred:
                deferred.append((instant, meta))
        for instant, meta in deferred:  # once a later instant has made the format's table
            try:
                publisher.publish(commit_to_publish(table, instant, meta, absent))
                published.append(instant)
            except PublishDeferred as exc:
                log.info("%s: %s; published with a later commit", table, exc)
        done[publisher.name] = published
        if published:
            log.info("%s: %d instant(s) published to %s", table, len(published),
                     publisher.name)
    return done


def refuse_foreign_commits(table: Table, publisher: FormatPublisher) -> None:
    """ForeignCommitError (one line) where the format holds another tool's version or
    snapshot after markerstore's last one: nothing is published over it."""
    foreign_commits = getattr(publisher, "foreign_commits", None)
    found = foreign_commits() if foreign_commits is not None else []
    if not found:
        return
    named = ", ".join(f"{c['id']} ({c['what']})" for c in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    raise ForeignCommitError(
        f"{publisher.name}: {named}{more} of table {table.storage.url()} was not written by "
        "markerstore, which publishes nothing over it: `markerstore verify --repair` "
        "publishes one that holds the timeline's files again (the other tool's files stay "
        "on storage, unreferenced), or undo it with that tool")


def _completed_instants(table: Table) -> list[str]:
    return [i.instant for i in table.timeline() if i.state == COMPLETED]


def missing_instants(publisher: FormatPublisher, instants: list[str]) -> list[str]:
    """Those of `instants` the format does not hold. A publisher with ``held_among`` (Delta:
    each instant's app transaction, in the log's latest state, which Delta's log cleanup
    keeps) answers for the instants at once; any other, from its published instants."""
    held_among = getattr(publisher, "held_among", None)
    held = held_among(instants) if held_among is not None else publisher.published_instants()
    return [i for i in instants if i not in held]


def referenced_paths(table: Table, publishers: list[FormatPublisher] | None = None, *,
                     release_before: str | None = None, since: str | None = None
                     ) -> set[str]:
    """Table-relative paths of every file a retained version/snapshot of a format of
    `table` references (nothing of markerstore's deletes one). With `release_before`, an
    instant every completed instant up to which the formats hold, a format that keeps
    older snapshots' files (Iceberg) first expires its snapshots of the instants before
    it, as Delta's latest version references only the live files; with `since`, the
    paths are those that would be referenced once they were expired (nothing changes)."""
    publishers = publishers_of(table) if publishers is None else publishers
    if release_before is not None:
        for publisher in publishers:
            expire_before = getattr(publisher, "expire_before", None)
            if expire_before is not None:
                expire_before(release_before)
    return {p for publisher in publishers for p in _referenced(publisher, since)}


def _referenced(publisher: FormatPublisher, since: str | None) -> set[str]:
    referenced_since = getattr(publisher, "referenced_paths_since", None)
    if since is None or referenced_since is None:
        return publisher.referenced_paths()
    return set(referenced_since(since))


def release_point(publishers: list[FormatPublisher], cutoff_ms: int) -> str | None:
    """The oldest instant a format must keep a snapshot of for time travel back to
    `cutoff_ms` (epoch ms; Iceberg: the snapshot current then); None: keep every one."""
    points = []
    for publisher in publishers:
        retained_from = getattr(publisher, "retained_from", None)
        point = retained_from(cutoff_ms) if retained_from is not None else None
        if point is not None:
            points.append(point)
    return min(points) if points else None


def drift(table: Table, publishers: list[FormatPublisher] | None = None
          ) -> list[dict[str, Any]]:
    """Where a format and the timeline disagree: a completed instant the format does not
    hold (``format_missing_instant``), or a format version/snapshot of an instant the
    timeline has not completed (``format_unknown_instant``)."""
    publishers = publishers_of(table) if publishers is None else publishers
    completed = _completed_instants(table)
    known = set(completed)
    found: list[dict[str, Any]] = []
    for publisher in publishers:
        held = publisher.published_instants()
        found += [{"kind": "format_missing_instant", "format": publisher.name,
                   "instant": i} for i in missing_instants(publisher, completed)]
        found += [{"kind": "format_unknown_instant", "format": publisher.name,
                   "instant": i} for i in sorted(held - known)]
    return found


# The folder each format keeps its own log or metadata in, under the table (a publisher's
# ``metadata_folder`` attribute, where it has one, says otherwise).
METADATA_FOLDERS = {"delta": "_delta_log/", "iceberg": "metadata/"}


def check_formats(table: Table, *, repair: bool = False, absent: Absent | None = None,
                  cutoff_ms: int | None = None, skip: Collection[str] = ()
                  ) -> tuple[list[dict[str, Any]], set[str], list[str]]:
    """For ``verify``: the drift findings (each with the action taken: with `repair`, the
    missing instants are published, oldest first), then the files the formats' retained
    versions reference (never deleted; with `cutoff_ms`, as they will be once the
    snapshots superseded before it are expired) and the formats' own folders (not
    orphans). The formats named in `skip` (lost, or holding another tool's commits) are
    left out but for their folders and the files they reference."""
    every = publishers_of(table)
    if not every:
        return [], set(), []
    publishers = [p for p in every if p.name not in skip]
    findings = drift(table, publishers)
    if repair and any(f["kind"] == "format_missing_instant" for f in findings):
        publish(table, publishers, absent=absent)
    for finding in findings:
        if finding["kind"] == "format_missing_instant":
            finding["action"] = "published" if repair else "would publish"
        else:
            finding["action"] = (f"none: {finding['format']} holds a commit of an instant "
                                 "the timeline has not completed (restore the timeline, or "
                                 "revert that version with the format's own tools)")
    since = None if cutoff_ms is None else release_point(publishers, cutoff_ms)
    referenced = {p for publisher in publishers for p in _referenced(publisher, since)}
    for publisher in every:  # another tool's files a format in `skip` still references
        if publisher.name in skip:
            try:
                referenced |= publisher.referenced_paths()
            except Exception as exc:  # a lost or moved format references nothing it can read
                log.info("%s: %s references no file it can read (%s)", table, publisher.name,
                         exc)
    folders = [getattr(p, "metadata_folder", None) or METADATA_FOLDERS.get(p.name, "")
               for p in every]
    return findings, referenced, [f for f in folders if f]
