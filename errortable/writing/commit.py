"""Writing error rows atomically with the main commit.

Driver and executors split the work like this (T is the target table, E its error table,
I the main instant on T, J the error instant on E)::

    driver     I = T.start_commit(extra={"error_table": E})
               ec = ErrorCommit.open(T, I)            # J = E.start_commit(link to T, I)
               spec = ec.task_spec()                  # picklable, shipped to executors
    executor   with spec.writer(task_attempt) as w:   # one file per task attempt;
                   w.write(error_records)             # its marker in J before the file
               stats = w.stats                        # path, rows, bytes, counts by reason
    driver     meta = ec.prepare(all winning stats)   # reconcile J: losers' files deleted
               T.commit(I, files, metadata=meta)      # the one atomic write: data + errors
               ec.complete()                          # roll J forward (E.commit)
    on error   ec.abort()                             # J follows I: forward if I completed

Between ``T.commit`` and ``ec.complete`` J is inflight; readers count it as committed
because I is completed and lists it, and :func:`errortable.writing.recovery.recover` (or a
reader with ``repair=True``) writes J's commit later. Rolling back I rolls back J
(:func:`errortable.writing.recovery.rollback_error_instant`, which the commit protocol's
recovery calls through :class:`errortable.writing.link.ErrorTables`).

This module is the driver side (:class:`ErrorCommit`); the executor side is
:mod:`errortable.writing.taskwriter`, what the process remembers is
:mod:`errortable.writing.registry`.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable import metrics
from errortable import schema as S
from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
from errortable.writing.expired import expired_paths
from errortable.writing.files import read_file
from errortable.writing.registry import forget_open, remember_open, remember_storage_options
from errortable.writing.taskwriter import (
    DAY_PREFIX,
    IDENTITY_FILE,
    MESSAGE_MAX_CHARS,
    OPERATION,
    ErrorFileStats,
    ErrorTaskSpec,
)
from markerstore.config import (
    ERROR_TABLE_FORMAT,
    ICEBERG_IDENTIFIER,
    TABLE_FORMATS,
    Settings,
    resolve,
)
from markerstore.errors import CommitConflictError, CorruptErrorFileError, ErrorTableError
from markerstore.formats import check_write, publish
from markerstore.markers import ReconcileResult, RollbackResult
from markerstore.markers.base import WriteMarkers
from markerstore.table import Table
from markerstore.timeline import COMPLETED, ROLLEDBACK, parse_instant

log = logging.getLogger(__name__)


def _config_and_settings(options: Mapping[str, Any] | Settings | ErrorTableConfig | None
                         ) -> tuple[ErrorTableConfig, Mapping[str, Any] | Settings | None]:
    if isinstance(options, ErrorTableConfig):
        return options, None
    return ErrorTableConfig.from_options(options), options


class ErrorCommit:
    """The driver's side of one write's error rows: the error instant J on the error table,
    linked to the main instant I on the target table."""

    def __init__(self, table: Table, instant: str, *, source: Table, source_instant: str,
                 location: ErrorTableLocation, config: ErrorTableConfig) -> None:
        self.table = table
        self.instant = instant
        self.source = source
        self.source_instant = source_instant
        self.location = location
        self.config = config
        self._stats: list[ErrorFileStats] | None = None
        self._recorded = False
        self._reconciled: ReconcileResult | None = None

    def __repr__(self) -> str:
        return (f"ErrorCommit({self.url!r}, instant={self.instant}, "
                f"source_instant={self.source_instant})")

    @property
    def url(self) -> str:
        return self.table.storage.url()

    @property
    def source_url(self) -> str:
        return self.source.storage.url()

    @classmethod
    def open(cls, target: Table | str, source_instant: str, *,
             options: Mapping[str, Any] | Settings | ErrorTableConfig | None = None,
             storage_options: Mapping[str, Any] | None = None,
             error_storage_options: Mapping[str, Any] | None = None,
             location: ErrorTableLocation | None = None,
             marker_type: str = "direct") -> ErrorCommit:
        """Open the error instant J for main instant `source_instant` of `target`.

        Call it right after ``target.start_commit(extra={"error_table": location.url})``.
        J is started without rolling back E's failed instants (their fate follows their
        main instants; see recovery), and with a heartbeat. The error table is reached
        with `error_storage_options` (default: the target table's storage options). With
        direct markers (the default) J's marker folder is made here, so executors can
        create markers at once; for batched markers pass ``marker_type="batched"`` and set
        them up with :meth:`markers`.
        """
        config, settings = _config_and_settings(options)
        source = target if isinstance(target, Table) else Table(target, storage_options)
        location = location or locate(source.storage.url(), config)
        e_options = dict(error_storage_options if error_storage_options is not None
                         else source.storage.storage_options)
        table = _error_table(source, location, e_options, settings)
        table.storage.create_if_absent(table.storage.path(IDENTITY_FILE), json.dumps(
            {"kind": "error_table", "schema": "error_record.avsc"}).encode())
        remember_storage_options(table.storage.url(), e_options)
        remember_storage_options(source.storage.url(), source.storage.storage_options)
        instant = table.start_commit(operation=OPERATION, rollback_failed=False, extra={
            "source_table": source.storage.url(), "source_instant": source_instant,
            "source_table_id": source.table_id(create=True),
            "table_name": _table_name(source.storage.url())})
        remember_open(table.storage.url(), instant, table)
        if marker_type == "direct":
            table.markers(instant, "direct")
        log.info("error instant %s on %s opened for %s of %s", instant, table.storage.url(),
                 source_instant, source.storage.url())
        return cls(table, instant, source=source, source_instant=source_instant,
                   location=location, config=config)

    def task_spec(self) -> ErrorTaskSpec:
        """What executors need (pass it into the mapInArrow closure)."""
        return ErrorTaskSpec(
            error_table=self.url, instant=self.instant, source_table=self.source_url,
            source_instant=self.source_instant, table_name=_table_name(self.source_url),
            day=parse_instant(self.source_instant).strftime("%Y-%m-%d"), config=self.config,
            storage_options=dict(self.table.storage.storage_options))

    def markers(self, type: str = "direct", **kwargs: Any) -> WriteMarkers:
        """The error instant's markers; the driver calls this once before tasks start, so
        the marker folder and its MARKERS.type exist."""
        return self.table.markers(self.instant, type, **kwargs)

    def reconcile(self, stats: Iterable[ErrorFileStats | Mapping[str, Any] | None]
                  ) -> ReconcileResult:
        """Keep exactly the winning attempts' error files; delete the others (failed and
        retried attempts). Remembers the files for :meth:`commit_metadata`."""
        winners = [ErrorFileStats.of(s) for s in stats if s is not None]
        paths = [s.path for s in winners]
        if len(set(paths)) != len(paths):
            raise ErrorTableError("the same error file is reported twice; report each winning "
                                  "task attempt's stats once")
        result = self.table.reconcile(self.instant, paths)
        self._stats = winners
        self._reconciled = result
        return result

    def commit_metadata(self) -> dict[str, Any]:
        """The keys to put in the main commit's metadata (after :meth:`reconcile`)."""
        if self._stats is None:
            raise ErrorTableError("reconcile the error files before building the commit "
                                  "metadata")
        return {**self.link_metadata(),
                "error_files": [s.file_entry() for s in self._stats],
                "error_records": metrics.error_counts(self._stats)}

    def prepare(self, stats: Iterable[ErrorFileStats | Mapping[str, Any] | None]
                ) -> dict[str, Any]:
        """Reconcile, then return the main commit's metadata keys; logs the counts and adds
        them to the process metrics."""
        self.reconcile(stats)
        metadata = self.commit_metadata()
        self._record(metadata["error_records"])
        return metadata

    def _record(self, counts: Mapping[str, int]) -> None:
        if not self._recorded:
            self._recorded = True
            metrics.record_commit(self.source_url, self.source_instant, counts)

    def commonest_message(self, stats: Iterable[ErrorFileStats | Mapping[str, Any] | None]
                          ) -> str | None:
        """The commonest first line of `message` in these error files (for the one-line
        error of a write over its error budget); None when they hold no row."""
        counts: Counter[str] = Counter()
        storage = self.table.storage
        for item in stats:
            if item is None:
                continue
            try:
                table = read_file(storage, storage.path(ErrorFileStats.of(item).path))
            except CorruptErrorFileError as exc:
                log.warning("commonest message: %s", exc)
                continue
            firsts = pc.utf8_slice_codeunits(pc.fill_null(pc.list_element(pc.split_pattern(
                table.column("message"), "\n", max_splits=1), 0), ""), 0, MESSAGE_MAX_CHARS)
            for entry in pc.value_counts(firsts).to_pylist():
                counts[entry["values"]] += entry["counts"]
        if not counts:
            return None
        return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def link_metadata(self) -> dict[str, Any]:
        """The keys that link the main commit to J (for a writer that fills `error_files`
        and `error_records` itself, such as markerstore.commit's job commit)."""
        return {"error_table": self.url, "error_instant": self.instant,
                "error_table_id": self.table.table_id()}

    def complete(self, stats: Iterable[ErrorFileStats | Mapping[str, Any] | None] | None = None
                 ) -> dict[str, Any]:
        """Roll J forward after the main commit completed, with the files of
        :meth:`prepare` (or `stats`: the winning attempts' error files, reconciled here).
        Idempotent: if recovery already did it, that commit is returned."""
        if stats is not None:
            self.reconcile(stats)
        if self._stats is None:
            raise ErrorTableError("reconcile the error files before completing")
        self._record(metrics.error_counts(self._stats))
        metadata = complete_error_instant(self.table, self.instant,
                                          [s.file_entry() for s in self._stats],
                                          source_table=self.source_url,
                                          source_instant=self.source_instant,
                                          error_records=metrics.error_counts(self._stats),
                                          source_table_id=self.source.table_id(),
                                          reconciled=self._reconciled)
        self._close()
        return metadata

    def _close(self) -> None:
        forget_open(self.url, self.instant)

    def abort(self) -> RollbackResult | dict[str, Any]:
        """After a failed write: J follows I. If I completed (a commit whose answer was
        lost, say) and names J, J is rolled forward; otherwise J is rolled back."""
        if self.source.state(self.source_instant) == COMPLETED:
            metadata = self.source.commit_metadata(self.source_instant)
            if metadata.get("error_instant") == self.instant:
                done = complete_error_instant(
                    self.table, self.instant, list(metadata.get("error_files", [])),
                    source_table=self.source_url, source_instant=self.source_instant,
                    error_records=dict(metadata.get("error_records") or {}),
                    source_table_id=self.source.table_id())
                self._close()
                return done
        self._close()
        if self.table.state(self.instant) == ROLLEDBACK:
            self.table.finish(self.instant)  # the hook rolled it back: stop our heartbeat
            return RollbackResult(self.instant, noop=True)
        result = self.table.rollback(self.instant, force=True)
        assert isinstance(result, RollbackResult)
        return result


def complete_error_instant(table: Table, instant: str, files: list[dict[str, Any]], *,
                           source_table: str, source_instant: str,
                           error_records: Mapping[str, int],
                           source_table_id: str | None = None,
                           reconciled: ReconcileResult | None = None) -> dict[str, Any]:
    """Write error instant J's commit with exactly `files`. If J is already completed (by
    recovery, or by the writer racing recovery), that commit stands and is returned.
    `source_table_id` (the main table's stable id) lets a moved or copied main table
    find its rows. `reconciled`: J's reconcile against exactly `files`, made by the job
    commit once every task had finished (see Table.commit); not repeated."""
    entries = [{k: f[k] for k in ("path", "rows", "size") if f.get(k) is not None}
               for f in files]
    link = {"source_table_id": source_table_id} if source_table_id else {}
    try:
        done = table.commit(instant, entries, metadata={
            "source_table": source_table, "source_instant": source_instant,
            **link, "error_records": dict(error_records)}, reconciled=reconciled)
    except CommitConflictError:
        if table.state(instant) != COMPLETED:
            raise
        done = table.commit_metadata(instant)
    publish_formats(table)
    return done


DAY_COLUMN = DAY_PREFIX.rstrip("=")  # the error table's partition column


def _error_table(source: Table, location: ErrorTableLocation,
                 storage_options: Mapping[str, Any],
                 settings: Mapping[str, Any] | Settings | None) -> Table:
    return Table(location.url, storage_options,
                 _error_table_settings(source, location.url, storage_options, settings))


def check_error_table_formats(source: Table, location: ErrorTableLocation) -> None:
    """Refuse (TableFormatError), before the write starts, what the formats of the error
    table of `source` cannot take: its columns (the ErrorRecord schema and the day of
    its partition folders), its Iceberg identifier and catalog properties."""
    table = _error_table(source, location, source.storage.storage_options, source.settings)
    columns = pa.schema([*S.arrow_schema(), pa.field(DAY_COLUMN, pa.string())])
    check_write(table, columns, (DAY_COLUMN,))


def publish_formats(table: Table) -> None:
    """Publish a table's completed instants (an error table's, or a replay's target's) to
    its formats (Delta, Iceberg), as job commit does for a write. A failure is logged: the
    instant stands, and the next commit, recovery or `markerstore verify --repair`
    publishes it."""
    try:
        publish(table, absent=expired_paths)
    except Exception as exc:
        log.warning("%s: publishing to its table formats failed (%s); the next commit, "
                    "recovery or verify --repair publishes it", table.storage.url(), exc)


def _error_table_settings(source: Table, url: str, storage_options: Mapping[str, Any],
                          settings: Mapping[str, Any] | Settings | None) -> Settings:
    """The error table's settings: the writer's, with the table formats of the main table
    when the error table is new and written in Parquet (an existing one keeps those it was
    created with). A named Iceberg identifier becomes the error table's own: the same
    namespace, the error table's folder name."""
    resolved = resolve(settings)
    given = {k: v for k, v in resolved.explicit().items() if k != TABLE_FORMATS}
    if given.get(ICEBERG_IDENTIFIER):
        namespace = str(given[ICEBERG_IDENTIFIER]).rpartition(".")[0]
        given[ICEBERG_IDENTIFIER] = ".".join(filter(None, [namespace, _table_name(url)]))
    formats = source.formats()
    if resolved[ERROR_TABLE_FORMAT] != "parquet":
        return Settings(given)  # Delta and Iceberg engines read Parquet files only
    if formats and Table(url, storage_options).table_id() is None:
        given[TABLE_FORMATS] = formats
    return Settings(given)


def _table_name(url: str) -> str:
    return url.rstrip("/").rpartition("/")[2]
