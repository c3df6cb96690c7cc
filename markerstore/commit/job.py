"""The job side: from the winning attempts' reports to a completed instant.

Job commit, in order (each step named for the crash tests, see :func:`add_step_hook`):

1. check the reports: one winning attempt per Spark partition, every file named for this
   write, rows in = rows written + error rows (and, where the tasks read the source
   themselves, source records = rows written + error rows), the error budget (max_fraction /
   max_records: over it, data and error rows are rolled back and ErrorBudgetExceeded
   names the counts by reason and the commonest message);
2. ``before_reconcile``; conflict modes fail / replace: write the intent plan, give way
   to a concurrent claim on the same scopes, apply the mode to committed data;
3. reconcile: delete files of losing attempts (markers minus winners), abort every upload
   of this write that is not a winner's; ``after_reconcile``;
4. write the publish plan (from here on recovery rolls forward);
5. publish (complete uploads in parallel / rename staged files); ``publish`` after each;
6. ``before_complete``; write the completed instant (the only switch readers see);
   ``after_complete``;
7. cleanup: delete the files the commit replaced, the staging area, the plan.

Any failure before step 6 deletes what step 5 published and rolls the instant back
(never forward), then re-raises.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from markerstore import config
from markerstore.commit.cleanup import post_commit
from markerstore.commit.conflict import (
    APPEND,
    FAIL,
    REPLACE,
    check_committed,
    check_concurrent,
    scopes_for,
)
from markerstore.commit.names import belongs_to
from markerstore.commit.plan import (
    INTENT,
    PUBLISH,
    CommitPlan,
    write_plan,
)
from markerstore.commit.ports import ErrorTables, ErrorWrite
from markerstore.commit.recovery import rollback
from markerstore.commit.result import CommitResult
from markerstore.commit.staging import Staging, staging_for
from markerstore.commit.stats import FileStats, TaskResult
from markerstore.errors import (
    CommitConflictError,
    CorruptTableError,
    ErrorBudgetExceeded,
    MarkerStoreError,
    ReconcileError,
)
from markerstore.formats import Published
from markerstore.markers import ReconcileResult, RollbackResult
from markerstore.table import DataFile, Table
from markerstore.timeline import COMPLETED, INFLIGHT, REQUESTED
from markerstore.timeline.checks import check_file_entries

log = logging.getLogger(__name__)

StepHook = Callable[[str, Mapping[str, Any]], None]
_STEP_HOOKS: list[StepHook] = []
STEPS = ("before_reconcile", "after_intent", "after_reconcile", "publish", "before_complete",
         "after_complete")


def add_step_hook(hook: StepHook) -> None:
    """Call `hook(step, info)` at each named step of job commit (tests crash here)."""
    _STEP_HOOKS.append(hook)


def remove_step_hook(hook: StepHook) -> None:
    if hook in _STEP_HOOKS:
        _STEP_HOOKS.remove(hook)


class _Laps:
    """Seconds per phase of job commit (``commit_<phase>``), lap after lap."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.mark = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        key = f"commit_{name}"
        self.phases[key] = self.phases.get(key, 0.0) + now - self.mark
        self.mark = now


def _step(name: str, **info: Any) -> None:
    for hook in list(_STEP_HOOKS):
        hook(name, info)


class JobCommitter:
    """Commits (or aborts) one inflight instant of a table."""

    def __init__(self, table: Table, instant: str, *, conflict_mode: str = APPEND,
                 partitioned: bool = False, staging: Staging | None = None,
                 metadata: Mapping[str, Any] | None = None,
                 error_commit: ErrorWrite | None = None,
                 error_tables: ErrorTables | None = None, failfast: bool = False) -> None:
        if conflict_mode not in (FAIL, APPEND, REPLACE):
            raise ValueError(f"unknown conflict mode {conflict_mode!r}")
        write_uuid = table.write_uuid(instant)
        if write_uuid is None:
            raise MarkerStoreError(f"instant {instant} of {table} has no write UUID")
        self.table = table
        self.instant = instant
        self.write_uuid = write_uuid
        self._pinning = contextlib.ExitStack()  # the commit's, once the instant completes
        self.failfast = failfast  # no error row allowed (ingest's mode=FAILFAST)
        self.conflict_mode = conflict_mode
        self.partitioned = partitioned
        self.staging = staging or staging_for(table.storage, instant, write_uuid,
                                              table.settings)
        self.metadata = dict(metadata or {})
        self.error_commit = error_commit  # the write's error instant, when it has one
        self.error_tables = error_tables
        self.source: dict[str, int] = {}  # the tasks' source counts (TaskSummary.source)

    # --- checks -------------------------------------------------------------------------------
    def _files(self, results: list[TaskResult]) -> list[FileStats]:
        seen: dict[int, int] = {}
        for result in results:
            attempt = result.summary.attempt
            if attempt.partition_id in seen:
                raise ValueError(
                    f"two task attempts ({seen[attempt.partition_id]} and "
                    f"{attempt.task_attempt_id}) reported for partition {attempt.partition_id}; "
                    "pass only the winning attempt of each partition")
            seen[attempt.partition_id] = attempt.task_attempt_id
        files = [f for r in results for f in r.files]
        strangers = [f.path for f in files if not belongs_to(f.path, self.write_uuid,
                                                             self.instant)]
        if strangers:
            raise ReconcileError(f"{len(strangers)} reported file(s) are not named for write "
                                 f"{self.write_uuid} at instant {self.instant}: "
                                 f"{', '.join(strangers[:5])}")
        paths = [f.path for f in files]
        if len(set(paths)) != len(paths):
            raise ReconcileError(f"a file is reported twice in instant {self.instant}")
        return files

    # --- commit ---------------------------------------------------------------------------------
    def commit(self, results: Iterable[TaskResult], *, sealed: bool = False) -> CommitResult:
        """Commit the winning attempts' files; on failure roll the instant back and raise.
        `sealed`: the marker server refuses every later marker of the instant (its writer
        sealed it), so the reconcile before publishing is the last one needed."""
        started = time.perf_counter()
        before = self.table.storage.requests()
        self._check_inflight()
        results = list(results)
        files = self._files(results)
        rows_in, errors = self._check_rows(results, files)
        error_files = [e for r in results for e in r.summary.error_files]
        self._check_budget(rows_in, errors, error_files)
        laps = _Laps()
        with contextlib.ExitStack() as self._pinning:  # from the completed instant's check
            plan, files_cleaned = self._reconcile_and_publish(
                files, rows_in, errors, error_files, laps, sealed)
            _step("after_complete")
            self._complete_error_instant()
            published = self._clean_up(plan)
        laps.lap("cleanup")
        counts = {"errors": errors, "error_files": error_files, "files_cleaned": files_cleaned}
        result = self._result(results, plan, counts, started, before, laps.phases)
        result.formats = list(published.values())
        return result

    def _check_inflight(self) -> None:
        state = self.table.state(self.instant)
        if state not in (REQUESTED, INFLIGHT):
            raise CommitConflictError(f"instant {self.instant} is {state}; only an inflight "
                                      "instant can be committed (was the write aborted?)")

    def _check_rows(self, results: list[TaskResult], files: list[FileStats]
                    ) -> tuple[int, dict[str, int]]:
        """Rows in and error rows by reason; rows in must be rows written + error rows,
        and so must the source records the tasks' parsers counted, if they read the
        source themselves (``source``, then in the commit metadata), else the write is
        rolled back."""
        rows_in = sum(r.summary.rows_in for r in results)
        rows_written = sum(f.rows for f in files)
        errors: dict[str, int] = {}
        for result in results:
            for reason, count in result.summary.error_records.items():
                errors[reason] = errors.get(reason, 0) + count
        source: dict[str, int] = {}
        for result in results:
            for kind, count in result.summary.source.items():
                source[kind] = source.get(kind, 0) + count
        self.source = source
        for what, found in (("rows in", rows_in), ("source records", source.get("records"))):
            if found is not None and found != rows_written + sum(errors.values()):
                self.abort()
                raise MarkerStoreError(
                    f"instant {self.instant}: {found} {what} but {rows_written} written "
                    f"and {sum(errors.values())} error rows; the write was rolled back")
        return rows_in, errors

    def _reconcile_and_publish(self, files: list[FileStats], rows_in: int,
                               errors: dict[str, int], error_files: list[dict[str, Any]],
                               laps: _Laps, sealed: bool) -> tuple[CommitPlan, int]:
        """Steps 2 to 6: conflicts, reconcile, the publish plan, publish, the completed
        instant (reconciled again, unless the markers are `sealed`). Any failure rolls the
        write back (never forward) and re-raises."""
        scopes = scopes_for({f.partition for f in files}, self.partitioned)
        published = False
        try:
            _step("before_reconcile")
            replaced = self._apply_conflict_mode(scopes)
            laps.lap("conflicts")
            recon = self.table.reconcile(self.instant, [f.path for f in files])
            self.staging.discard_losers(files)
            laps.lap("reconcile")
            _step("after_reconcile")
            metadata = {**self.metadata, "conflict_mode": self.conflict_mode,
                        "replaced_files": replaced, "rows_in": rows_in,
                        "error_records": errors, "staging": self.staging.mode,
                        "scopes": scopes,
                        **{f"source_{kind}": n for kind, n in sorted(self.source.items())}}
            if error_files:
                metadata[_error_files_key(error_files)] = error_files
            if self.error_commit is not None:
                # Keep exactly the winning attempts' error files; the main commit names
                # them, so data and error rows become visible in one atomic write.
                metadata.update(self.error_commit.prepare(error_files))
                laps.lap("errors")
            plan = self._plan(PUBLISH, scopes, files, replaced, metadata)
            write_plan(self.table.storage, plan)
            laps.lap("plan")
            published = True
            self.staging.publish(files, lambda done, total: _step("publish", done=done,
                                                                  total=total))
            laps.lap("publish")
            _step("before_complete")
            self._complete(plan, recon if sealed else None)
            laps.lap("complete")
        except BaseException as exc:
            self._fail(exc, files if published else [])
            raise
        return plan, recon.files_cleaned

    def _apply_conflict_mode(self, scopes: list[str]) -> list[str]:
        """Fail / replace: write the intent plan, give way to a concurrent claim on the
        same scopes, apply the mode to committed data. The files a replace replaces."""
        if self.conflict_mode not in (FAIL, REPLACE) or not scopes:
            return []
        write_plan(self.table.storage, self._plan(INTENT, scopes))
        _step("after_intent")
        check_concurrent(self.table, self.instant, scopes)
        return check_committed(self.table, self.conflict_mode, scopes)

    def _complete_error_instant(self) -> None:
        if self.error_commit is None:
            return
        try:
            self.error_commit.complete()
        except Exception as exc:  # readers roll it forward from the main commit
            log.warning("instant %s: rolling the error instant forward failed (%s); "
                        "readers and recovery finish it", self.instant, exc)

    def _clean_up(self, plan: CommitPlan) -> Published:
        """Publish to the table's formats and clean up; what each format did (a format
        that did not take the commit is in it with its reason, never only in a log)."""
        try:
            return post_commit(self.table, plan)
        except Exception as exc:  # the commit stands; recovery finishes the cleanup
            log.warning("instant %s: publishing or cleanup after commit failed (%s); the "
                        "next write or sweep finishes it", self.instant, exc)
            return Published()

    def _result(self, results: list[TaskResult], plan: CommitPlan, counts: Mapping[str, Any],
                started: float, before: Mapping[str, int], phases: Mapping[str, float]
                ) -> CommitResult:
        """What the commit did, with the driver's and the tasks' requests and timings.
        `counts`: the error rows by reason (``errors``), the winners' ``error_files`` and
        reconcile's ``files_cleaned``."""
        after = self.table.storage.requests()
        driver = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        total = dict(driver)
        timings: dict[str, float] = {"commit": time.perf_counter() - started, **phases}
        for result in results:
            for kind, count in result.summary.requests.items():
                total[kind] = total.get(kind, 0) + count
            for step, seconds in result.summary.seconds.items():
                timings[f"task_{step}"] = timings.get(f"task_{step}", 0.0) + seconds
        files = plan.files
        return CommitResult(
            path=self.table.storage.url(), instant=self.instant, write_uuid=self.write_uuid,
            files=[DataFile(f.path, f.bytes, f.rows, f.checksum) for f in files],
            rows_written=sum(f.rows for f in files),
            error_records=counts["errors"], files_cleaned=counts["files_cleaned"],
            source=dict(self.source),
            duration=timings["commit"], requests=total, driver_requests=driver,
            conflict_mode=self.conflict_mode, replaced_files=list(plan.replaced_files),
            error_files=counts["error_files"], timings=timings)

    def _check_budget(self, rows_in: int, errors: Mapping[str, int],
                      error_files: list[dict[str, Any]]) -> None:
        """Over the error budget: roll the write back (data and error rows) and raise."""
        settings = self.table.settings
        max_records = settings[config.ERROR_MAX_RECORDS]
        max_fraction = settings[config.ERROR_MAX_FRACTION]
        bad = sum(errors.values())
        over = []
        failfast = self.failfast  # Spark's FAILFAST: no malformed record
        if failfast and bad:
            over.append(f"{config.INGEST_MODE}=FAILFAST allows none")
        elif max_records is not None and bad > max_records:
            over.append(f"more than {config.ERROR_MAX_RECORDS}={max_records}")
        if max_fraction is not None and rows_in and bad / rows_in > max_fraction:
            over.append(f"{bad / rows_in:.2%} of rows, more than "
                        f"{config.ERROR_MAX_FRACTION}={max_fraction:g}")
        if not over:
            return
        commonest = None
        if self.error_commit is not None:
            try:
                commonest = self.error_commit.commonest_message(error_files)
            except Exception as exc:  # the budget fails the write whatever the files hold
                log.warning("instant %s: reading the error files for the commonest message "
                            "failed: %s", self.instant, exc)
        self.abort()
        if self.error_commit is not None:
            try:
                self.error_commit.abort()
            except Exception as exc:  # recovery rolls J back: its main instant is gone
                log.error("instant %s: rolling back the error instant failed (%s)",
                          self.instant, exc)
        by_reason = ", ".join(f"{reason} {count}" for reason, count in
                              sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))
        headline = (f"{config.INGEST_MODE}=FAILFAST: {bad} of {rows_in} records are "
                    f"malformed ({by_reason}) and none is allowed" if failfast else
                    f"error budget exceeded: {bad} of {rows_in} rows are bad ({by_reason}), "
                    f"{' and '.join(over)}")
        raise ErrorBudgetExceeded(
            f"instant {self.instant}: {headline}; commonest message: "
            f"{commonest if commonest is not None else 'unknown'}; the write was rolled "
            "back, data and error rows alike",
            rows_in=rows_in, error_records=dict(errors), commonest_message=commonest)

    def _plan(self, phase: str, scopes: list[str], files: list[FileStats] | None = None,
              replaced: list[str] | None = None,
              metadata: dict[str, Any] | None = None) -> CommitPlan:
        return CommitPlan(self.instant, self.write_uuid, phase, self.conflict_mode, scopes,
                          self.staging.mode, list(files or []), list(replaced or []),
                          dict(metadata or {}))

    def _complete(self, plan: CommitPlan, reconciled: ReconcileResult | None) -> None:
        """The completed instant. From the timeline's listing that checks the instant is
        still inflight on, the rest of the commit (the publish to the formats, the
        cleanup) reads that listing, with this instant completed: a publish lists no more
        than that (the formats' settled marks count the instants, so one another writer
        started since is looked up all the same)."""
        self._pinning.enter_context(self.table.pinned_timeline())
        entries = [f.to_entry() for f in plan.files]
        try:
            self.table.commit(self.instant, entries, plan.metadata,
                              reconciled=reconciled)
        except Exception:
            # The completed instant may be there all the same: written by this call before
            # a later step failed, or by a recovery that rolled this write forward.
            if self._completed_by_this_write():
                log.warning("instant %s is completed (by this write or its recovery) though "
                            "completing it raised", self.instant)
                return
            raise

    def _completed_by_this_write(self) -> bool:
        try:
            if self.table.state(self.instant) != COMPLETED:
                return False
            return self.table.commit_metadata(self.instant).get("write_uuid") == self.write_uuid
        except MarkerStoreError:
            return False

    def _fail(self, exc: BaseException, published: list[FileStats]) -> None:
        log.warning("instant %s: job commit failed (%s: %s); rolling it back", self.instant,
                    type(exc).__name__, exc)
        if self._completed_by_this_write():
            return
        try:
            if published:
                self.staging.unpublish(published)
            self.abort()
        except Exception as cleanup:  # the original failure is what the caller must see
            log.error("instant %s: rollback after a failed job commit failed too (%s); "
                      "`markerstore rollback` finishes it", self.instant, cleanup)

    # --- abort ----------------------------------------------------------------------------------
    def abort(self) -> RollbackResult:
        """Roll the instant back: delete every file its markers name, abort every upload of
        this write, delete its staging area and plan; its error instant follows.
        Idempotent."""
        return rollback(self.table, self.instant, force=True, roll_forward=False,
                        error_tables=self.error_tables)


def _error_files_key(error_files: list[dict[str, Any]]) -> str:
    """Where the commit keeps the error sink's descriptions: ``error_files`` when they are
    file entries (a table-relative path, sizes and rows: the error table's files, which
    readers follow), else ``error_sink_files``, kept as your own sink said them (the
    commit stays readable whatever they hold)."""
    try:
        check_file_entries(error_files, "error_files", "")
    except CorruptTableError:
        return "error_sink_files"
    return "error_files"
