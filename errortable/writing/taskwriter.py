"""The executor side of a write's error rows: the picklable :class:`ErrorTaskSpec` and one
task attempt's :class:`TaskErrorWriter` (marker in the error instant first, then its one
error file), and the :class:`ErrorFileStats` it returns to the driver."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable import schema as schema_module
from errortable.capture.records import PAYLOAD, REDACTED_FIELDS, CaptureContext, RecordBuilder
from errortable.capture.validator import Validator
from errortable.config import ErrorTableConfig
from errortable.writing.files import ErrorFileWriter, file_name
from markerstore.errors import ErrorTableError
from markerstore.markers import DirectWriteMarkers, IOType
from markerstore.markers.base import WriteMarkers
from markerstore.storage import Storage

log = logging.getLogger(__name__)

OPERATION = "errors"
DAY_PREFIX = "day="
IDENTITY_FILE = ".markerstore/errortable.json"
MESSAGE_MAX_CHARS = 200


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

    def write_arrow(self, table: pa.Table, reasons: pa.Array | pa.ChunkedArray | None = None
                    ) -> int:
        """Append error records held as an Arrow table in the ErrorRecord schema (a columnar
        producer's fast path; Parquet files take it as is). The PII policy applies.
        `reasons`: the ``reason`` of each row's context, where the caller has them (they
        are counted; else read from the context)."""
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
        if self._builder.protects and not self._handled(table):
            return self.write(schema_module.arrow_to_records(table))
        writer = self._writer or self._open()
        if reasons is None or len(reasons) != table.num_rows:
            reasons = pc.map_lookup(table.column("context"), "reason", "first")
        for item in pc.value_counts(pc.fill_null(reasons, "unknown")).to_pylist():
            self._counts[item["values"]] += item["counts"]
        return writer.write_arrow(table)

    def _handled(self, table: pa.Table) -> bool:
        """Whether every row says this error table's PII policy was applied to it already
        (as RecordBuilder.protect reads a row's context, which then returns it as it is):
        such rows are written as columns, not one by one."""
        context = table.column("context")
        payload = pc.fill_null(pc.map_lookup(context, PAYLOAD, "first"), "")
        handled = pc.starts_with(payload, "dropped")
        config = self.spec.config
        if config.redact and not config.drop_payload:
            done = pc.fill_null(pc.map_lookup(context, REDACTED_FIELDS, "first"), "")
            listed = pc.binary_join_element_wise(",", done, ",", "")
            every = pc.match_substring(listed, f",{config.redact[0]},")
            for path in config.redact[1:]:
                every = pc.and_(every, pc.match_substring(listed, f",{path},"))
            handled = pc.or_(handled, every)
        return bool(pc.all(pc.fill_null(handled, False)).as_py())

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
