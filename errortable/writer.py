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
because I is completed and lists it, and :func:`errortable.recovery.recover` (or a
reader with ``repair=True``) writes J's commit later. Rolling back I rolls back J (the
rollback hook in :mod:`errortable.recovery`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable import metrics
from errortable import schema as schema_module
from errortable.capture import Validator
from errortable.config import ErrorTableConfig, ErrorTableLocation, locate
from errortable.files import ErrorFileWriter, file_name, read_file
from errortable.records import CaptureContext, RecordBuilder
from markerstore.config import Settings
from markerstore.errors import CommitConflictError, CorruptErrorFileError, ErrorTableError
from markerstore.markers import DirectWriteMarkers, IOType, ReconcileResult, RollbackResult
from markerstore.markers.base import WriteMarkers
from markerstore.storage import Storage
from markerstore.table import Table
from markerstore.timeline import COMPLETED, ROLLEDBACK, parse_instant

log = logging.getLogger(__name__)

OPERATION = "errors"
DAY_PREFIX = "day="
IDENTITY_FILE = ".markerstore/errortable.json"
MESSAGE_MAX_CHARS = 200

# Storage options per table URL, remembered in this process so the rollback hook can open
# an error table with the options its writer used.
_STORAGE_OPTIONS: dict[str, dict[str, Any]] = {}


# Error tables with an error instant open in this process, by (url, instant): rolling one
# back through this Table object also stops the instant's heartbeat thread.
_OPEN: dict[tuple[str, str], Table] = {}


def open_table_for(url: str, instant: str) -> Table | None:
    """The Table this process opened error instant `instant` of `url` with, if any."""
    return _OPEN.get((url.rstrip("/"), instant))


def forget_open(url: str, instant: str) -> None:
    _OPEN.pop((url.rstrip("/"), instant), None)


def remember_storage_options(url: str, options: Mapping[str, Any] | None) -> None:
    _STORAGE_OPTIONS[url.rstrip("/")] = dict(options or {})


def storage_options_for(url: str, fallback: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The options this process used for `url`, else `fallback`."""
    known = _STORAGE_OPTIONS.get(url.rstrip("/"))
    if known is not None:
        return dict(known)
    return dict(fallback or {})


@dataclass
class ErrorFileStats:
    """What one task attempt wrote: the executor returns it, the driver commits it."""

    path: str
    rows: int
    size: int
    counts: dict[str, int] = field(default_factory=dict)
    task_attempt: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, value: ErrorFileStats | Mapping[str, Any]) -> ErrorFileStats:
        if isinstance(value, ErrorFileStats):
            return value
        try:
            counts = {str(k): int(v) for k, v in dict(value.get("counts") or {}).items()}
            return cls(path=str(value["path"]), rows=int(value["rows"]),
                       size=int(value["size"]), counts=counts,
                       task_attempt=str(value.get("task_attempt") or ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not error file stats (path, rows, size, counts): {value!r}"
                             ) from exc

    def file_entry(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "size": self.size}


@dataclass(frozen=True)
class ErrorTaskSpec:
    """Everything an executor needs to write its error file; picklable and small."""

    error_table: str
    instant: str
    source_table: str
    source_instant: str
    table_name: str
    day: str
    config: ErrorTableConfig = field(default_factory=ErrorTableConfig)
    storage_options: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def partition(self) -> str:
        return f"{DAY_PREFIX}{self.day}"

    def context(self, task_attempt: str | None = None, **more: Any) -> CaptureContext:
        """The capture context for this write (commit time = the main instant)."""
        return CaptureContext(commit_time=self.source_instant, table_name=self.table_name,
                              table_path=self.source_table, task_attempt=task_attempt,
                              **more)

    def builder(self) -> RecordBuilder:
        """A record builder under this error table's policy (for a write path that catches
        its own exceptions: ``builder.from_exception(exc, record=...)``)."""
        return RecordBuilder(self.config)

    def validator(self, target_schema: pa.Schema, key: str | None = None,
                  partition_by: Sequence[str] | None = None,
                  checks: Mapping[str, str] | None = None, **kwargs: Any) -> Validator:
        """A Validator whose error records follow this error table's policy."""
        return Validator(target_schema, key, partition_by, checks, config=self.config,
                         **kwargs)

    def writer(self, task_attempt: str, markers: WriteMarkers | None = None
               ) -> TaskErrorWriter:
        return TaskErrorWriter(self, task_attempt, markers)


class TaskErrorWriter:
    """The one error file of one task attempt. Nothing is created until the first record;
    then the marker (in the error instant J) is recorded first, and only then the file.

    `markers` defaults to direct markers on the error table; pass any WriteMarkers of the
    error instant (a batched marker client) to use another mechanism.
    """

    def __init__(self, spec: ErrorTaskSpec, task_attempt: str,
                 markers: WriteMarkers | None = None) -> None:
        if not task_attempt:
            raise ValueError("task_attempt must name the task attempt (for example "
                             "'stage-3-part-7-attempt-1')")
        if markers is not None and markers.instant != spec.instant:
            raise ValueError(f"markers are for instant {markers.instant}, but the error "
                             f"instant is {spec.instant}")
        self.spec = spec
        self.task_attempt = task_attempt
        self._markers = markers
        self._storage: Storage | None = None
        self._handle: IO[bytes] | None = None
        self._writer: ErrorFileWriter | None = None
        self._path: str | None = None
        self._counts: Counter[str] = Counter()
        self.stats: ErrorFileStats | None = None
        self._closed = False
        self._builder = RecordBuilder(spec.config)

    @property
    def storage(self) -> Storage:
        if self._storage is None:
            self._storage = Storage(self.spec.error_table, self.spec.storage_options)
        return self._storage

    def _open(self) -> ErrorFileWriter:
        name = file_name(self.task_attempt, self.spec.instant, self.spec.config.format)
        markers = self._markers or DirectWriteMarkers(self.storage, self.spec.instant,
                                                      initialize=False)
        if not markers.create(self.spec.partition, name, IOType.CREATE,
                              task_attempt=self.task_attempt):
            raise ErrorTableError(f"a marker for error file {name} already exists")
        self._path = f"{self.spec.partition}/{name}"
        self._handle = self.storage.open_write(self.storage.path(self._path))
        self._writer = ErrorFileWriter(self._handle, self.spec.config.format, {
            "markerstore.error_instant": self.spec.instant,
            "markerstore.source_instant": self.spec.source_instant,
            "markerstore.task_attempt": self.task_attempt})
        return self._writer

    def _counted(self, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        counts = self._counts
        protect = self._builder.protect if self._builder.protects else None
        for record in records:
            context = record.get("context") or {}
            counts[context.get("reason") or "unknown"] += 1
            yield protect(record) if protect is not None else record

    def write(self, records: Iterable[dict[str, Any]]) -> int:
        """Append error records (ErrorRecord dicts); returns how many."""
        if self._closed:
            raise ErrorTableError("this task's error file is already closed")
        records = records if isinstance(records, list) else list(records)
        if not records:
            return 0
        writer = self._writer or self._open()
        return writer.write(self._counted(records))

    def write_arrow(self, table: pa.Table) -> int:
        """Append error records held as an Arrow table in the ErrorRecord schema (a columnar
        producer's fast path; Parquet files take it as is). The PII policy applies."""
        if self._closed:
            raise ErrorTableError("this task's error file is already closed")
        expected = schema_module.arrow_schema()
        if not table.schema.remove_metadata().equals(expected):
            try:
                table = table.select(expected.names).cast(expected)
            except (KeyError, ValueError, pa.ArrowInvalid) as exc:
                raise ErrorTableError(f"not ErrorRecord rows: {exc}") from None
        if table.num_rows == 0:
            return 0
        if self._builder.protects:
            return self.write(schema_module.arrow_to_records(table))
        writer = self._writer or self._open()
        reasons = pc.map_lookup(table.column("context"), "reason", "first")
        for item in pc.value_counts(pc.fill_null(reasons, "unknown")).to_pylist():
            self._counts[item["values"]] += item["counts"]
        return writer.write_arrow(table)

    def close(self) -> ErrorFileStats | None:
        """Finish the file and return its stats (None if no record was written)."""
        if self._closed:
            return self.stats
        self._closed = True
        if self._writer is None or self._handle is None or self._path is None:
            return None
        self._writer.close()
        size = int(self._handle.tell())
        self._handle.close()
        self.stats = ErrorFileStats(self._path, self._writer.rows, size,
                                    dict(sorted(self._counts.items())), self.task_attempt)
        return self.stats

    def abort(self) -> None:
        """Give up this attempt: close and delete the partial file. The marker stays, so
        the driver's reconcile or a rollback accounts for the file either way."""
        self._closed = True
        if self._handle is not None:
            try:
                self._handle.close()
            except Exception as exc:
                log.warning("closing the aborted error file %s failed: %s", self._path, exc)
        if self._path is not None:
            try:
                self.storage.delete(self.storage.path(self._path))
            except Exception as exc:
                log.warning("deleting the aborted error file %s failed (rollback will): %s",
                            self._path, exc)

    def __enter__(self) -> TaskErrorWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


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
        table = Table(location.url, e_options, settings)
        table.storage.create_if_absent(table.storage.path(IDENTITY_FILE), json.dumps(
            {"kind": "error_table", "schema": "error_record.avsc"}).encode())
        remember_storage_options(table.storage.url(), e_options)
        remember_storage_options(source.storage.url(), source.storage.storage_options)
        instant = table.start_commit(operation=OPERATION, rollback_failed=False, extra={
            "source_table": source.storage.url(), "source_instant": source_instant,
            "source_table_id": source.table_id(create=True),
            "table_name": _table_name(source.storage.url())})
        _OPEN[(table.storage.url().rstrip("/"), instant)] = table
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
                                          source_table_id=self.source.table_id())
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
                           source_table_id: str | None = None) -> dict[str, Any]:
    """Write error instant J's commit with exactly `files`. If J is already completed (by
    recovery, or by the writer racing recovery), that commit stands and is returned.
    `source_table_id` (the main table's stable id) lets a moved or copied main table
    find its rows."""
    entries = [{k: f[k] for k in ("path", "rows", "size") if f.get(k) is not None}
               for f in files]
    link = {"source_table_id": source_table_id} if source_table_id else {}
    try:
        return table.commit(instant, entries, metadata={
            "source_table": source_table, "source_instant": source_instant,
            **link, "error_records": dict(error_records)})
    except CommitConflictError:
        if table.state(instant) == COMPLETED:
            return table.commit_metadata(instant)
        raise


def _table_name(url: str) -> str:
    return url.rstrip("/").rpartition("/")[2]
