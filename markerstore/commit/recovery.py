"""Recovery of failed writes: roll forward or back, cleanup, and the sweep.

:func:`recover` is the one entry: the next write (``WriteJob.start``), ``markerstore
rollback`` and ``markerstore sweep`` call it. It composes the core's rollback (delete
what the markers name, fence the instant) with what the commit protocol owns (roll
forward, uploads, staging areas, plans, a completed replace's files) and, when passed in,
the error tables (:class:`markerstore.commit.ports.ErrorTables`).

A failed write (inflight instant whose writer is gone) is recovered so:

* it is **rolled forward** when its publish plan exists (job commit got past reconcile,
  so every winning file is staged and recorded), roll forward is enabled, and every
  planned file can still be published: each pending upload is still open or already
  completed into the expected object (S3), each staged file is staged or already moved;
* otherwise it is **rolled back** from its markers: every file they name is deleted, every
  upload of the write (the markers' recorded ones, and any upload whose key is named for
  this write UUID and instant) is aborted, its staging area and plan are deleted.

A roll forward that fails half-way deletes what it published and falls back to a rollback.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.commit import s3
from markerstore.commit.cleanup import post_commit
from markerstore.commit.names import parse_path
from markerstore.commit.plan import PUBLISH, delete_plan, plan_instants, read_plan
from markerstore.commit.ports import ErrorTables
from markerstore.commit.staging import STAGING_DIR, remove_staging_area, staging_for
from markerstore.commit.stats import PendingUpload
from markerstore.errors import ConfigError, CorruptTableError
from markerstore.formats import FormatPublisher, publish, publishers_of
from markerstore.markers import RollbackResult, marker_folder
from markerstore.storage import Storage
from markerstore.table import Table
from markerstore.timeline import COMPLETED, ROLLED_FORWARD, ROLLEDBACK, Timeline, is_instant

log = logging.getLogger(__name__)
TERMINAL = (COMPLETED, ROLLEDBACK)


# Hooks get no table settings; aborts run with the default commit threads.
_ABORT_THREADS = int(config.OPTIONS[config.COMMIT_THREADS].default)


def uploads_of_write(storage: Storage, write_uuid: str, instant: str
                     ) -> list[tuple[str, str, str]]:
    """Every in-progress upload under the table named for this write UUID and instant."""
    result = []
    for upload in s3.list_uploads(storage):
        parsed = parse_path(upload.key)
        if parsed is not None and parsed.write_uuid == write_uuid and parsed.instant == instant:
            result.append((upload.bucket, upload.key, upload.upload_id))
    return result


def _marked_uploads(storage: Storage, instant: str, rows: pa.Table | None
                    ) -> set[tuple[str, str, str]]:
    """The pending uploads the markers record, each checked to be at its own file's key
    (a marker row naming an upload elsewhere is a CorruptTableError; nothing is
    aborted)."""
    todo: set[tuple[str, str, str]] = set()
    if rows is None or "pending_upload" not in rows.column_names:
        return todo
    where = storage.url(marker_folder(storage, instant))
    for row in rows.select(["partition", "file", "pending_upload"]).to_pylist():
        if not row["pending_upload"]:
            continue
        try:
            pending = PendingUpload.from_json(row["pending_upload"])
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            raise CorruptTableError(where, f"the pending upload of {row['file']!r} is not "
                                           f"one: {exc}") from None
        assert pending is not None
        path = f"{row['partition']}/{row['file']}" if row["partition"] else row["file"]
        if (pending.bucket, pending.key) != s3.bucket_key(storage, path):
            raise CorruptTableError(where, f"the pending upload of {path!r} is at "
                                           f"s3://{pending.bucket}/{pending.key}, not at "
                                           "that file's key")
        todo.add((pending.bucket, pending.key, pending.upload_id))
    return todo


def rollback_cleanup(storage: Storage, instant: str, rows: pa.Table | None
                     ) -> dict[str, Any] | None:
    """Before the core's rollback of a fenced instant: abort the write's uploads, delete
    its staging area and its plan."""
    write_uuid = Timeline(storage).requested_info(instant).get("write_uuid")
    aborted = 0
    if storage.is_s3:
        todo = _marked_uploads(storage, instant, rows)
        if write_uuid:
            todo.update(uploads_of_write(storage, str(write_uuid), instant))
        aborted = s3.abort_many(storage, sorted(todo), _ABORT_THREADS)
    staged = remove_staging_area(storage, instant)
    delete_plan(storage, instant)
    outcome = {k: v for k, v in (("aborted_uploads", aborted), ("staged_files_deleted", staged))
               if v}
    return outcome or None


def try_roll_forward(table: Table, instant: str) -> RollbackResult | None:
    """Complete a failed write whose publish plan is on storage, or return None so that
    it is rolled back."""
    try:
        plan = read_plan(table.storage, instant)
    except CorruptTableError as exc:
        log.warning("instant %s is rolled back, not forward: %s", instant, exc)
        return None
    if plan is None or plan.phase != PUBLISH:
        return None
    if table.is_fenced(instant):
        return None  # a rollback fenced it already: finish that rollback
    if not table.settings[config.ROLL_FORWARD]:
        log.info("instant %s has a publish plan but roll forward is off", instant)
        return None
    if plan.write_uuid != table.write_uuid(instant):
        log.warning("instant %s: the plan is of write %s, the instant of %s; rolling back",
                    instant, plan.write_uuid, table.write_uuid(instant))
        return None
    staging = staging_for(table.storage, instant, plan.write_uuid, table.settings,
                          plan.staging_mode)
    try:
        problems = staging.problems(plan.files)
        if problems:
            log.warning("instant %s cannot be rolled forward (%s); rolling back", instant,
                        "; ".join(problems[:3]))
            return None
        staging.discard_losers(plan.files)
        staging.publish(plan.files)
        table.commit(instant, [f.to_entry() for f in plan.files],
                     {**plan.metadata, "recovered": ROLLED_FORWARD})
    except Exception as exc:
        if _completed(table, instant):
            log.warning("instant %s: completed, though a later step failed: %s", instant, exc)
        else:
            log.warning("instant %s: roll forward failed (%s); rolling back", instant, exc)
            try:
                staging.unpublish(plan.files)
            except Exception as cleanup:
                log.warning("instant %s: could not delete published files (%s); the "
                            "rollback deletes them from the markers", instant, cleanup)
            if table.state(instant) == ROLLEDBACK:
                return RollbackResult(instant, noop=True)
            return None
    try:
        post_commit(table, plan)
    except Exception as exc:
        log.warning("instant %s: cleanup after roll forward failed (%s)", instant, exc)
    log.info("%s: rolled instant %s forward (%d file(s))", table, instant, len(plan.files))
    return RollbackResult(instant, rolled_forward=True,
                          hooks={"published_files": len(plan.files)})


def rollback(table: Table, instant: str, *, force: bool = False, roll_forward: bool = True,
             error_tables: ErrorTables | None = None) -> RollbackResult:
    """Recover one failed instant of a table the commit protocol writes: roll it forward
    (when its publish plan allows, and `roll_forward`), else fence it, abort its uploads,
    delete its staging area and plan, roll back its linked error instants (through
    `error_tables`), then the core's rollback from its markers. Idempotent. Refuses a
    completed instant, and an inflight one whose writer is alive unless `force`."""
    if not table.can_roll_back(instant, force=force):
        return RollbackResult(instant, noop=True)
    if roll_forward:
        outcome = try_roll_forward(table, instant)
        if outcome is not None:
            return outcome
    _refuse_if_published(table, instant)
    table.fence(instant)
    # The markers' pending uploads (S3 only: elsewhere the core's rollback is the one scan).
    pending = (table.marker_rows(instant, pending_only=True) if table.storage.is_s3
               else None)
    cleanup: dict[str, Any] = {
        "rollback_cleanup": rollback_cleanup(table.storage, instant, pending)}
    if error_tables is not None:
        cleanup["rollback_error_instant"] = error_tables.recover(table, instant)
    elif table.requested_info(instant).get("error_table"):
        log.warning("instant %s names an error table, but its recovery was not given one "
                    "(error_tables=); its error instant waits for `errortable recover`",
                    instant)
    result = table.rollback(instant, force=True, cleanup=cleanup)
    assert isinstance(result, RollbackResult)
    return result


def _refuse_if_published(table: Table, instant: str) -> None:
    """A table format that holds `instant` references its files: they are never deleted,
    so such an instant is never rolled back (a CorruptTableError names the format)."""
    for publisher in publishers_of(table):
        if instant in publisher.published_instants():
            raise CorruptTableError(table.commit_url(instant),
                                    f"{publisher.name} holds instant {instant}, which the "
                                    "timeline has not completed; it is not rolled back "
                                    "(its files stay)")


def recover(table: Table, *, policy: str | None = None,
            error_tables: ErrorTables | None = None,
            publishers: list[FormatPublisher] | None = None) -> list[RollbackResult]:
    """Recover a table: every failed write (per the failed-writes policy, see
    :meth:`Table.failed_instants`) rolled forward or back with :func:`rollback`, then what
    writers of terminal instants left (:func:`finish_terminal_plans`) and the marker
    folders of terminal instants. Before that cleanup, every completed instant a format of
    the table does not hold yet is published, oldest first
    (:func:`markerstore.formats.publish`; `publishers`: the table's, where the caller has
    them). The next write, ``markerstore rollback`` and ``markerstore sweep`` call it.
    Idempotent."""
    with table.pinned_timeline():  # one listing (a rollback lists afresh)
        results = [rollback(table, instant, force=True, error_tables=error_tables)
                   for instant in table.failed_instants(policy)]
        try:  # roll forward what a crash left unpublished, before any cleanup
            publish(table, publishers)
        except ConfigError:
            raise  # a format this process cannot publish: nothing is written or deleted
        except Exception as exc:
            log.warning("%s: publishing to the table formats failed (%s); the next write, "
                        "recovery or verify --repair publishes it", table, exc)
        finish_terminal_plans(table)
    table.clean_markers()
    return results


def _completed(table: Table, instant: str) -> bool:
    try:
        return table.state(instant) == COMPLETED
    except Exception:
        return False


def finish_terminal_plans(table: Table) -> list[str]:
    """Finish what terminal instants left: cleanup after a commit whose writer died once
    the instant was completed (replaced files, staging area), or after a rollback."""
    instants = plan_instants(table.storage)
    if not instants:
        return []
    states = {i.instant: i.state for i in table.timeline()}
    done = []
    for instant in instants:
        state = states.get(instant)
        if state == COMPLETED:
            plan = read_plan(table.storage, instant)
            if plan is not None:
                post_commit(table, plan)
            else:
                delete_plan(table.storage, instant)
            done.append(instant)
        elif state == ROLLEDBACK or state is None:
            remove_staging_area(table.storage, instant)
            delete_plan(table.storage, instant)
            done.append(instant)
    return done


@dataclass
class SweepReport:
    """What a sweep found and did (or would do, in a dry run)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    dry_run: bool = False

    @property
    def aborted(self) -> int:
        return sum(1 for r in self.rows if r["kind"] == "upload" and r["action"] == "aborted")


def sweep(table: Table, *, dry_run: bool = False) -> SweepReport:
    """Abort orphaned multipart uploads of this table's failed writes, and delete staging
    areas and plans that terminal instants left behind.

    An upload is orphaned when its key is under the table, is named for an instant on this
    table's timeline and for that instant's write UUID, and the instant is terminal
    (rolled back, or completed: a completed write completed all of its winners first).
    Uploads of inflight instants (live writers, or failed ones awaiting recovery) and of
    anything else under the prefix are reported and left alone.
    """
    storage = table.storage
    report = SweepReport(dry_run=dry_run)
    infos = {i.instant: i.state for i in table.timeline()}
    uuids: dict[str, str | None] = {}
    todo: list[tuple[str, str, str]] = []
    if storage.is_s3:
        for upload in s3.list_uploads(storage):
            parsed = parse_path(upload.key)
            state = infos.get(parsed.instant) if parsed else None
            row = {"kind": "upload", "key": upload.key, "upload_id": upload.upload_id,
                   "initiated": upload.initiated, "instant": parsed.instant if parsed else None,
                   "state": state}
            if parsed is None:
                row["action"] = "skipped: not a markerstore data file"
            elif state is None:
                row["action"] = "skipped: instant not on this table's timeline"
            else:
                if parsed.instant not in uuids:
                    uuids[parsed.instant] = table.write_uuid(parsed.instant)
                if uuids[parsed.instant] != parsed.write_uuid:
                    row["action"] = "skipped: another write's upload"
                elif state not in TERMINAL:
                    row["action"] = ("skipped: write is inflight (live, or awaiting "
                                     "`markerstore rollback`)")
                else:
                    row["action"] = "would abort" if dry_run else "aborted"
                    todo.append((upload.bucket, upload.key, upload.upload_id))
            report.rows.append(row)
        if todo and not dry_run:
            s3.abort_many(storage, todo, int(table.settings[config.COMMIT_THREADS]))
    for name in storage.ls(storage.path(STAGING_DIR)):
        if is_instant(name) and infos.get(name) in TERMINAL:
            report.rows.append({"kind": "staging", "instant": name, "state": infos[name],
                                "key": f"{STAGING_DIR}/{name}",
                                "action": "would delete" if dry_run else "deleted"})
            if not dry_run:
                remove_staging_area(storage, name)
    for instant in plan_instants(storage):
        if infos.get(instant) in TERMINAL:
            report.rows.append({"kind": "plan", "instant": instant, "state": infos[instant],
                                "action": "would finish" if dry_run else "finished"})
    if not dry_run:
        recover(table, policy="never")  # rolls nothing back: finishes terminal instants
    return report

