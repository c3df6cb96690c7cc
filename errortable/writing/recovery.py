"""An error instant follows its main instant: forward if it completed, back if it did not.

An error instant J on error table E records its link (``source_table``, ``source_instant``)
when it starts. While J is inflight its fate is decided by the main instant I alone:

* I completed and its metadata names J (``error_instant``): J is committed, with the error
  files I lists. Readers count it at once; :func:`recover` writes J's commit.
* I rolled back, or completed without naming J, or is gone: J is rolled back.
* I still inflight: J waits (the main table's own recovery rolls I back, and with it J:
  ``markerstore.commit.recover(table, error_tables=errortable.ErrorTables())`` calls
  :func:`rollback_error_instant` below).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from errortable.writing.commit import complete_error_instant
from errortable.writing.registry import forget_open, open_table_for, storage_options_for
from errortable.writing.taskwriter import ErrorFileStats
from markerstore.errors import InstantNotFoundError, MarkerStoreError
from markerstore.markers import RollbackResult
from markerstore.table import Table
from markerstore.timeline import COMPLETED, INFLIGHT, REQUESTED, ROLLEDBACK

log = logging.getLogger(__name__)

FORWARD = "forward"
BACK = "back"
WAIT = "wait"


def same_table(a: str | None, b: str | None) -> bool:
    """Whether two table URLs name the same table (s3a:// is s3://; trailing slashes)."""
    if not a or not b:
        return False

    def norm(url: str) -> str:
        url = url.strip().rstrip("/")
        if url.startswith("s3a://"):
            url = "s3://" + url[6:]
        if url.startswith("file://"):
            url = url[7:]
        return url

    return norm(a) == norm(b)


@dataclass
class Decision:
    """What an inflight error instant's main instant says about it."""

    instant: str
    action: str
    why: str
    files: list[dict[str, Any]] = field(default_factory=list)
    source_table: str | None = None
    source_instant: str | None = None
    source_table_id: str | None = None
    error_records: dict[str, int] = field(default_factory=dict)
    certain: bool = True  # False: the main instant could not be found; act only if J's
    #                       writer is gone (a main table moved away looks the same)


class Sources:
    """Main tables opened by URL (cached), with the storage options to reach them."""

    def __init__(self, storage_options: Mapping[str, Any] | None = None) -> None:
        self.storage_options = storage_options
        self._tables: dict[str, Table] = {}

    def table(self, url: str) -> Table:
        if url not in self._tables:
            self._tables[url] = Table(url, storage_options_for(url, self.storage_options))
        return self._tables[url]


def decide(error_table: Table, instant: str, sources: Sources) -> Decision:
    """The fate of inflight error instant `instant`, read from its main instant."""
    info = error_table.requested_info(instant)
    source_url, source_instant = info.get("source_table"), info.get("source_instant")
    if not source_url or not source_instant:
        return Decision(instant, BACK, "no link to a main instant (not an error instant, or "
                        "its requested file is unreadable)", certain=False)
    linked_id = info.get("source_table_id")
    decision = Decision(instant, WAIT, "", source_table=source_url,
                        source_instant=source_instant,
                        source_table_id=linked_id if isinstance(linked_id, str) else None)
    source = sources.table(source_url)
    try:
        state = source.state(source_instant)
    except InstantNotFoundError:
        decision.action, decision.why = BACK, f"main instant {source_instant} is not on " \
            f"the timeline of {source_url}"
        decision.certain = False
        return decision
    if state == COMPLETED:
        metadata = source.commit_metadata(source_instant)
        if metadata.get("error_instant") == instant and \
                same_table(metadata.get("error_table"), error_table.storage.url()):
            decision.action, decision.why = FORWARD, f"main instant {source_instant} completed"
            decision.files = [ErrorFileStats.of({**f, "counts": {}}).file_entry()
                              for f in metadata.get("error_files", [])]
            decision.error_records = {str(k): int(v) for k, v in
                                      dict(metadata.get("error_records") or {}).items()}
        else:
            decision.action, decision.why = BACK, f"main instant {source_instant} completed " \
                "without these error rows"
    elif state == ROLLEDBACK:
        decision.action, decision.why = BACK, f"main instant {source_instant} was rolled back"
    else:
        decision.why = f"main instant {source_instant} is still {state}"
    return decision


@dataclass
class RecoveryResult:
    """What :func:`recover` did to each inflight error instant."""

    error_table: str
    rolled_forward: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"error_table": self.error_table, "rolled_forward": self.rolled_forward,
                "rolled_back": self.rolled_back, "waiting": self.waiting,
                "failed": self.failed,
                "why": {d.instant: d.why for d in self.decisions}}

    def _repr_html_(self) -> str:
        from markerstore.render.html import table_html

        rows = [{"instant": d.instant, "action": d.action, "why": d.why,
                 "error": self.failed.get(d.instant, "")} for d in self.decisions]
        return f"<b>recovery of {self.error_table}</b>" + table_html(rows)


def pending_instants(error_table: Table) -> list[str]:
    return [i.instant for i in error_table.timeline() if i.state in (REQUESTED, INFLIGHT)]


def recover(error_table: str | Table, storage_options: Mapping[str, Any] | None = None, *,
            source_storage_options: Mapping[str, Any] | None = None,
            dry_run: bool = False) -> RecoveryResult:
    """Roll every inflight error instant forward or back, as its main instant says.

    Main tables are opened with `source_storage_options` (default: the error table's own
    options, which fit when both live on the same store). Idempotent; safe to run while
    writers are active (a waiting instant is left alone, and a commit that a writer
    completes first wins without harm)."""
    table = error_table if isinstance(error_table, Table) else \
        Table(error_table, storage_options)
    sources = Sources(source_storage_options if source_storage_options is not None
                      else table.storage.storage_options)
    result = RecoveryResult(table.storage.url())
    for instant in pending_instants(table):
        try:
            decision = decide(table, instant, sources)
        except (MarkerStoreError, OSError) as exc:
            result.failed[instant] = str(exc)
            continue
        result.decisions.append(decision)
        if dry_run:
            {FORWARD: result.rolled_forward, BACK: result.rolled_back,
             WAIT: result.waiting}[decision.action].append(instant)
            continue
        try:
            if decision.action == FORWARD:
                roll_forward(table, decision)
                result.rolled_forward.append(instant)
            elif decision.action == BACK:
                if not decision.certain and table.writer_alive(instant):
                    result.waiting.append(instant)
                    continue
                table.rollback(instant, force=True)
                result.rolled_back.append(instant)
            else:
                result.waiting.append(instant)
        except (MarkerStoreError, OSError) as exc:
            result.failed[instant] = str(exc)
    return result


def roll_forward_completed(error_table: Table, *,
                           source_storage_options: Mapping[str, Any] | None = None,
                           skip: Collection[str] = ()) -> list[str]:
    """Write the commit of every pending error instant whose main instant completed with
    it (what a reader counts as committed already), and nothing else: what
    ``read(..., repair=True)`` asks for (`skip`: instants it leaves, the expired ones).
    Returns those instants."""
    sources = Sources(source_storage_options if source_storage_options is not None
                      else error_table.storage.storage_options)
    done = []
    for instant in pending_instants(error_table):
        decision = decide(error_table, instant, sources)
        if decision.action == FORWARD and instant not in skip:
            roll_forward(error_table, decision)
            done.append(instant)
    return done


def roll_forward(table: Table, decision: Decision) -> dict[str, Any]:
    """Write the commit of an error instant whose main instant completed with it."""
    metadata = complete_error_instant(
        table, decision.instant, decision.files, source_table=decision.source_table or "",
        source_instant=decision.source_instant or "", error_records=decision.error_records,
        source_table_id=decision.source_table_id)
    log.info("error instant %s of %s rolled forward (%s)", decision.instant,
             table.storage.url(), decision.why)
    return metadata


# --- with the main instant's rollback -----------------------------------------------------
def rollback_error_instant(table: Table, instant: str) -> dict[str, Any] | None:
    """When main instant `instant` of `table`, which wrote to an error table, is rolled
    back: roll back its error instants too. Idempotent; a missing error table is not an
    error."""
    url = table.requested_info(instant).get("error_table")
    if not url:
        return None
    source_url = table.storage.url()
    error_table = Table(str(url), storage_options_for(str(url),
                                                      table.storage.storage_options))
    here = error_table.storage.url()
    outcome: dict[str, Any] = {"error_table": error_table.storage.url(), "error_instants": [],
                               "deleted_files": []}
    for pending in pending_instants(error_table):
        linked = error_table.requested_info(pending)
        if linked.get("source_instant") != instant or \
                not same_table(linked.get("source_table"), source_url):
            continue
        outcome["error_instants"].append(pending)
        # If this process opened the instant, roll back through its Table, which also stops
        # the instant's heartbeat thread.
        owner = open_table_for(here, pending) or error_table
        result = owner.rollback(pending, force=True)
        forget_open(here, pending)
        if isinstance(result, RollbackResult):
            outcome["deleted_files"].extend(result.deleted_files)
    return outcome

