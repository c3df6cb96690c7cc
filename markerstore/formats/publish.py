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
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore.errors import ConfigError, ForeignCommitError
from markerstore.formats.base import FormatPublisher, PublishDeferred, TimelineView
from markerstore.formats.commits import Absent, commit_to_publish, utc_schema
from markerstore.table import Table

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


def check_write(table: Table, schema: pa.Schema | None, partition_by: Sequence[str] = (),
                publishers: list[FormatPublisher] | None = None) -> list[FormatPublisher]:
    """Refuse, in one line and before anything is written, a write to `table` that one of
    its formats cannot take (TableFormatError): a column type it has no equivalent for
    (zoned timestamps count as UTC, as they are stored), a schema change it does not
    allow, other partition columns than it has, an Iceberg identifier or catalog property
    that is wrong or taken. `schema`: the write's columns, partition columns included
    (None: the columns are not known yet, only the rest is checked). What only fails
    later (a catalog that does not answer, a log that cannot be read) is not refused
    here: the publish reports it. `publishers`: the table's, as a publish just read them
    (their formats are not read again). Returns the table's publishers."""
    publishers = publishers_of(table) if publishers is None else publishers
    columns = None if schema is None else utc_schema(schema)
    for publisher in publishers:
        check = getattr(publisher, "check_write", None)
        if check is not None:
            check(columns, tuple(partition_by))
    return publishers


@dataclass
class FormatOutcome:
    """One format after a publish: the instants it took now, where it stands (``v12``, a
    snapshot id), and the completed instants it does not hold yet with the reason (a
    catalog that did not answer, a corrupt log): the next write, recovery or ``verify
    --repair`` publishes them."""

    name: str
    published: list[str] = field(default_factory=list)
    position: str | None = None
    pending: list[str] = field(default_factory=list)
    reason: str | None = None
    # the pending instants are empty commits the format cannot take before it has a table
    # (the first commit with files creates it): by design, not a failure
    waiting: bool = False

    @property
    def ok(self) -> bool:
        return not self.pending and self.reason is None

    def text(self) -> str:
        """``delta v12``, or ``iceberg pending (the reason)``."""
        if not self.ok:
            why = self.reason or f"{len(self.pending)} instant(s) to publish"
            return f"{self.name} pending ({why})"
        return f"{self.name} {self.position}" if self.position else self.name

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.name, "published": list(self.published),
                "position": self.position, "pending": list(self.pending),
                "reason": self.reason}


class Published(dict[str, FormatOutcome]):
    """What :func:`publish` did, by format."""

    @property
    def pending(self) -> list[FormatOutcome]:
        """The formats that do not hold every completed instant (or cannot be read)."""
        return [o for o in self.values() if not o.ok]

    def text(self) -> str:
        """``published: delta v12, iceberg pending (reason)``; empty without formats."""
        return "published: " + ", ".join(o.text() for o in self.values()) if self else ""


def publish(table: Table, publishers: list[FormatPublisher] | None = None, *,
            absent: Absent | None = None, view: TimelineView | None = None) -> Published:
    """Publish every completed instant that a format of `table` does not hold yet, oldest
    first, each format on its own: one that fails (a corrupt log, a catalog that does not
    answer) is reported in its :class:`FormatOutcome` and logged, and the others publish
    all the same. Idempotent (the instants stay the source of truth: the next call
    publishes what is pending). `absent` names, per commit metadata, files a commit
    removed besides its ``replaced_files`` (an error table's expire). `view`: the
    timeline as the caller just listed it (else listed now)."""
    publishers = publishers_of(table) if publishers is None else publishers
    outcomes = Published()
    if not publishers:
        return outcomes
    if view is None:
        view = TimelineView.of(table.timeline())  # one listing for every format
    for publisher in publishers:
        outcome = outcomes[publisher.name] = _publish_format(table, publisher, view, absent)
        if outcome.published:
            log.info("%s: %d instant(s) published to %s", table, len(outcome.published),
                     publisher.name)
        if outcome.pending and outcome.reason:
            say = log.info if outcome.waiting else log.warning
            say("%s: %d completed instant(s) not published to %s (%s); the next write, "
                "recovery or verify --repair publishes them", table, len(outcome.pending),
                publisher.name, outcome.reason)
    return outcomes


def status(table: Table, publishers: list[FormatPublisher] | None = None) -> Published:
    """Where each format of `table` stands, without publishing anything: its position and
    the completed instants it does not hold (the backlog the next write, recovery or
    ``verify --repair`` publishes), or why its state cannot be read."""
    publishers = publishers_of(table) if publishers is None else publishers
    outcomes = Published()
    if not publishers:
        return outcomes
    view = TimelineView.of(table.timeline())
    for publisher in publishers:
        outcome = outcomes[publisher.name] = FormatOutcome(publisher.name)
        try:
            outcome.pending = missing_instants(publisher, view)
        except Exception as exc:
            outcome.reason = _one_line(exc)
            continue
        outcome.position = _position(publisher)
    return outcomes


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


def _publish_format(table: Table, publisher: FormatPublisher, view: TimelineView,
                    absent: Absent | None) -> FormatOutcome:
    """The missing instants of one format, oldest first (a commit the format cannot take
    yet, for want of a table, once a later one has made it); a failure leaves the rest
    pending, with its reason."""
    outcome = FormatOutcome(publisher.name)
    missing: list[str] = []
    deferrals: list[str] = []
    try:
        missing = missing_instants(publisher, view)
        if missing:  # nothing is published over another tool's commits
            refuse_foreign_commits(table, publisher)
        deferred = _in_order(table, publisher, view, missing, absent, outcome, deferrals)
        if deferred and len(deferred) < len(missing):
            _in_order(table, publisher, view, deferred, absent, outcome, deferrals)
    except Exception as exc:  # this format waits; the others publish
        outcome.reason = _one_line(exc)
    done = set(outcome.published)
    outcome.pending = [i for i in missing if i not in done]
    if outcome.pending and outcome.reason is None and deferrals:
        outcome.reason, outcome.waiting = deferrals[-1], True
    outcome.position = _position(publisher)
    return outcome


def _in_order(table: Table, publisher: FormatPublisher, view: TimelineView,
              instants: list[str], absent: Absent | None, outcome: FormatOutcome,
              deferrals: list[str]) -> list[str]:
    """Publish `instants` in order, each version carrying the timeline's settled mark as
    it stands with the instants still to publish after it; returns those the format
    could not take yet (:class:`PublishDeferred`, its message kept in `deferrals`)."""
    deferred: list[str] = []
    for n, instant in enumerate(instants):
        settled = view.settled([*deferred, *instants[n + 1:]])
        commit = commit_to_publish(table, instant, table.commit_metadata(instant), absent,
                                   settled=settled)
        try:
            publisher.publish(commit)
        except PublishDeferred as exc:
            deferred.append(instant)
            deferrals.append(str(exc))
            continue
        outcome.published.append(instant)
    return deferred


def _position(publisher: FormatPublisher) -> str | None:
    position = getattr(publisher, "position", None)
    try:
        return position() if position is not None else None
    except Exception:  # only shown: the publish itself said what failed
        return None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


def missing_instants(publisher: FormatPublisher, view: TimelineView) -> list[str]:
    """The completed instants of `view` the format does not hold, oldest first: the
    publisher's :meth:`~FormatPublisher.unpublished` (its state read once), else its
    published instants."""
    unpublished = getattr(publisher, "unpublished", None)
    if unpublished is not None:
        return list(unpublished(view))
    held = publisher.published_instants()
    return [i for i in view.completed if i not in held]


def referenced_paths(table: Table, publishers: list[FormatPublisher] | None = None, *,
                     release_before: str | None = None, since: str | None = None,
                     view: TimelineView | None = None) -> set[str]:
    """Table-relative paths of every file a retained version/snapshot of a format of
    `table` references (nothing of markerstore's deletes one). With `release_before`, a
    format that keeps older snapshots' files (Iceberg) first expires its snapshots of the
    instants before it, as Delta's latest version references only the live files; never
    past an instant still open or not yet published: those before the point it expires
    up to must all be settled (else an older write that completes later would count as
    published). With `since`, the paths are those that would be referenced once the
    snapshots before it were expired (nothing changes)."""
    publishers = publishers_of(table) if publishers is None else publishers
    if release_before is not None:
        expire_snapshots(table, publishers, release_before, view)
    return {p for publisher in publishers for p in _referenced(publisher, since)}


def expire_snapshots(table: Table, publishers: list[FormatPublisher], release_before: str,
                     view: TimelineView | None = None) -> None:
    """Expire the snapshots of the instants before `release_before` of each format that
    keeps older snapshots (Iceberg), never past an instant still open or not yet
    published (:func:`referenced_paths`); `view`: the timeline as the caller listed it."""
    view = TimelineView.of(table.timeline()) if view is None else view
    for publisher in publishers:
        expire_before = getattr(publisher, "expire_before", None)
        if expire_before is not None:
            mark = view.settled(missing_instants(publisher, view))
            before = min(release_before, mark.before)
            expire_before(before, view.count_before(before), released=False)


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
    hold (``format_missing_instant``), a format version/snapshot of an instant the
    timeline has not completed (``format_unknown_instant``), or a format whose state
    cannot be read (``format_error``, with the reason)."""
    publishers = publishers_of(table) if publishers is None else publishers
    view = TimelineView.of(table.timeline())
    known = set(view.completed)
    found: list[dict[str, Any]] = []
    for publisher in publishers:
        try:
            missing = missing_instants(publisher, view)
            held = publisher.published_instants()
        except Exception as exc:
            found.append({"kind": "format_error", "format": publisher.name,
                          "instant": None, "reason": _one_line(exc)})
            continue
        found += [{"kind": "format_missing_instant", "format": publisher.name,
                   "instant": i} for i in missing]
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
    outcomes = Published()
    if repair and any(f["kind"] != "format_unknown_instant" for f in findings):
        outcomes = publish(table, publishers, absent=absent)
    for finding in findings:
        outcome = outcomes.get(finding["format"])
        if finding["kind"] == "format_missing_instant":
            failed = outcome is not None and finding["instant"] in outcome.pending
            finding["action"] = ("would publish" if not repair else
                                 f"not published: {outcome.reason}" if failed and outcome
                                 else "published")
        elif finding["kind"] == "format_error":
            finding["action"] = (f"none: {finding['reason']} (the next write retries; "
                                 "restore or repair the format's own files)")
        else:
            finding["action"] = (f"none: {finding['format']} holds a commit of an instant "
                                 "the timeline has not completed (restore the timeline, or "
                                 "revert that version with the format's own tools)")
    since = None if cutoff_ms is None else release_point(publishers, cutoff_ms)
    referenced: set[str] = set()
    for publisher in every:  # a format in `skip` keeps another tool's files it references
        try:
            referenced |= (publisher.referenced_paths() if publisher.name in skip
                           else _referenced(publisher, since))
        except Exception as exc:  # unreadable, lost or moved: its finding says so
            log.warning("%s: the files %s references cannot be read: %s", table,
                        publisher.name, exc)
    folders = [getattr(p, "metadata_folder", None) or METADATA_FOLDERS.get(p.name, "")
               for p in every]
    return findings, referenced, [f for f in folders if f]
