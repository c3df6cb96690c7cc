"""Conflict modes (the s3committer's): what a write does where committed data exists.

The scope of a write is the directory (unpartitioned: the whole table, ``""``) or each
partition that receives data. ``fail`` refuses to commit if a scope holds committed files;
``append`` adds files; ``replace`` commits the new files and hides every committed file in
its scopes (dynamic partition overwrite: partitions that get no new data are untouched).

Replace never deletes before the commit is visible: the completed instant lists the files
it replaces (``replaced_files``), the `files` view hides them from that instant on, and
they are deleted only afterwards. Only committed files count: data under the table that no
commit references is neither a conflict nor replaced.

Concurrent writers in fail or replace mode: each writes its intent (the plan, phase
intent) before it looks, so of two writers claiming overlapping scopes at least one sees
the other, and it fails; never do both commit.
"""

from __future__ import annotations

from collections.abc import Iterable

from markerstore.commit.names import partition_of, under
from markerstore.commit.plan import INTENT, PUBLISH, plan_instants, read_plan
from markerstore.errors import WriteConflictError
from markerstore.table import Table
from markerstore.timeline import COMPLETED, INFLIGHT, REQUESTED

FAIL, APPEND, REPLACE = "fail", "append", "replace"

# Spark's SaveMode spellings and the conflict modes they mean.
SAVE_MODES = {"append": APPEND, "overwrite": REPLACE, "replace": REPLACE, "error": FAIL,
              "errorifexists": FAIL, "fail": FAIL}


def scopes_for(partitions: Iterable[str], partitioned: bool) -> list[str]:
    """The scopes a write claims: the directory, or each partition receiving data."""
    return sorted(set(partitions)) if partitioned else [""]


def overlap(a: Iterable[str], b: Iterable[str]) -> bool:
    b = list(b)
    return any(under(x, y) or under(y, x) for x in a for y in b)


def live_files(table: Table) -> list[tuple[str, str]]:
    """(instant, path) of every committed file the `files` view shows (replace honoured)."""
    completed = [(i.instant, table.commit_metadata(i.instant))
                 for i in table.timeline() if i.state == COMPLETED]
    replaced = {p for _, meta in completed for p in meta.get("replaced_files", [])}
    return [(instant, entry["path"]) for instant, meta in completed
            for entry in meta.get("files", []) if entry["path"] not in replaced]


def committed_in(table: Table, scopes: list[str]) -> list[str]:
    """Committed (live) files in the scopes."""
    return sorted(path for _, path in live_files(table)
                  if any(under(partition_of(path), s) for s in scopes))


def describe_scopes(scopes: list[str]) -> str:
    if scopes == [""]:
        return "the table directory"
    shown = ", ".join(scopes[:5]) + (f" (and {len(scopes) - 5} more)" if len(scopes) > 5
                                     else "")
    return f"partition(s) {shown}"


def check_committed(table: Table, mode: str, scopes: list[str]) -> list[str]:
    """Apply the conflict mode to committed data: raise for fail, return the files replace
    hides, nothing for append."""
    if mode == APPEND or not scopes:
        return []
    existing = committed_in(table, scopes)
    if mode == FAIL and existing:
        raise WriteConflictError(
            f"conflict mode fail: {describe_scopes(scopes)} of {table.storage.url()} already "
            f"hold(s) {len(existing)} committed file(s) (e.g. {existing[0]}); write with mode "
            "append or replace (markerstore.write.conflict.mode), or to another path")
    return existing if mode == REPLACE else []


def check_concurrent(table: Table, instant: str, scopes: list[str]) -> None:
    """Raise if another inflight write in fail or replace mode claims overlapping scopes:
    a live writer's plan of any phase, or a dead writer's publish plan (recovery may still
    roll it forward)."""
    others = [i for i in plan_instants(table.storage) if i != instant]
    if not others:
        return
    states = {i.instant: i.state for i in table.timeline()}
    for other in others:
        if states.get(other) not in (REQUESTED, INFLIGHT):
            continue
        plan = read_plan(table.storage, other)
        if plan is None or plan.conflict_mode == APPEND or not overlap(plan.scopes, scopes):
            continue
        if plan.phase == INTENT and not table.writer_alive(other):
            continue
        state = "committing" if plan.phase == PUBLISH else "about to commit"
        raise WriteConflictError(
            f"a concurrent write (instant {other}, conflict mode {plan.conflict_mode}) is "
            f"{state} {describe_scopes(sorted(set(plan.scopes) & set(scopes)) or scopes)} "
            f"of {table.storage.url()}; this write (instant {instant}) gives way. Retry it "
            "once the other write is done.")
