"""The task side: one task attempt's record batches -> Parquet files, marker first.

For every output file the marker is durably recorded before the file is opened
(invariant 1). Files are split by Hive-style partition folders, rolled at the target file
size, and staged per the write's :mod:`~markerstore.commit.staging` mode. At task commit
the staging finishes (on S3: uploads without completing) and the task reports one
:class:`FileStats` per file. A task abort deletes what the attempt wrote and aborts its
uploads; it is idempotent.

Error records plug in here: an optional ``validator`` splits each batch into good rows and
error rows, and an optional ``error_sink`` (one per task attempt) stores the error rows.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from markerstore import config
from markerstore.commit.names import FileName, partition_path, relative_path
from markerstore.commit.staging import Staging
from markerstore.commit.stats import FileStats, TaskAttempt, TaskResult, TaskSummary
from markerstore.config import REASON_KEY
from markerstore.errors import MarkerStoreError
from markerstore.formats.commits import partition_schema_metadata, utc_batch
from markerstore.formats.stats import nan_columns, nan_metadata
from markerstore.formats.values import check_partition_types, check_partition_values
from markerstore.markers import IOType, WriteMarkers
from markerstore.storage.contain import path_errors

log = logging.getLogger(__name__)
# A row group holds at least this many rows (rows of a wide schema are buffered past
# markerstore.write.parquet.row_group_bytes, up to WIDE_ROW_GROUP_BYTES): Parquet writes
# and describes each column of each row group (about 20 us and 100 bytes of footer), so
# 8 MiB row groups of 100,000 columns, 10 rows each, cost more than their values.
ROW_GROUP_MIN_ROWS = 64
WIDE_ROW_GROUP_BYTES = 64 * 1024 * 1024


class BatchValidator(Protocol):
    """Splits a batch into good rows and error rows. Error rows are counted per reason: a
    string column ``reason``, or the ``reason`` key of a ``context`` map column (the
    ErrorRecord schema); the rest of their schema is the sink's."""

    def __call__(self, batch: pa.RecordBatch, attempt: TaskAttempt
                 ) -> tuple[pa.RecordBatch, pa.Table | pa.RecordBatch | None]: ...


class ErrorSink(Protocol):
    """Stores one task attempt's error rows. `commit` returns JSON-able descriptions of
    the files it wrote (reported to the driver with the task's summary, and kept as they
    are in the commit metadata: ``error_files`` when they are file entries, else
    ``error_sink_files``)."""

    def write(self, errors: pa.Table) -> None: ...

    def commit(self) -> list[dict[str, Any]]: ...

    def abort(self) -> None: ...


ErrorSinkFactory = Callable[[TaskAttempt, WriteMarkers], ErrorSink]


def _reasons(errors: pa.Table) -> pa.ChunkedArray | pa.Array:
    """The reason of each error row: a `reason` column, or the `reason` key of a `context`
    map column (the ErrorRecord schema), else "unknown"."""
    if REASON_KEY in errors.column_names:
        reasons = errors.column(REASON_KEY)
    elif "context" in errors.column_names and pa.types.is_map(errors.schema.field(
            "context").type):
        reasons = pc.map_lookup(errors.column("context"), REASON_KEY, "first")
    else:
        return pa.array(["unknown"] * errors.num_rows, pa.string())
    return pc.fill_null(reasons.cast(pa.string()), "unknown")


def record_details(markers: WriteMarkers, partition: str, file_name: str,
                   **details: Any) -> None:
    """Put details (size, checksum, pending upload) in an existing CREATE marker: both
    mechanisms have an `update` call (direct markers rewrite the marker object; batched
    markers write a details row that readers merge). A mechanism without one gets a
    repeated create, which may drop them (rollback and job commit also find uploads by
    listing, by name)."""
    update = getattr(markers, "update", None)
    if callable(update):
        update(partition, file_name, IOType.CREATE, **details)
    else:
        markers.create(partition, file_name, IOType.CREATE, **details)


def split_by_partition(batch: pa.RecordBatch, columns: Sequence[str]
                       ) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """(partition values, rows) for each distinct combination of `columns` in `batch`."""
    if batch.num_rows == 0:
        return
    codes: list[np.ndarray] = []
    values: list[list[Any]] = []
    for name in columns:
        encoded = pc.dictionary_encode(batch.column(name), null_encoding="encode")
        codes.append(np.asarray(encoded.indices.to_numpy(zero_copy_only=False),
                                dtype=np.int64))
        values.append(encoded.dictionary.to_pylist())
    sizes = [len(v) for v in values]
    if all(size == 1 for size in sizes):
        yield tuple(v[0] for v in values), batch
        return
    key = np.zeros(batch.num_rows, dtype=np.int64)
    for code, size in zip(codes, sizes, strict=True):
        key = key * size + code
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    bounds = (np.flatnonzero(np.diff(ordered)) + 1).tolist()
    taken = batch.take(pa.array(order))
    for start, end in zip([0, *bounds], [*bounds, batch.num_rows], strict=True):
        rest = int(ordered[start])
        picked: list[Any] = []
        for size, column_values in zip(reversed(sizes), reversed(values), strict=True):
            picked.append(column_values[rest % size])
            rest //= size
        yield tuple(reversed(picked)), taken.slice(start, end - start)


@dataclass
class _OpenFile:
    """A data file being written."""

    stats_path: str
    target: str
    writer: pq.ParquetWriter
    sink: Any
    buffer: list[pa.RecordBatch] = field(default_factory=list)
    buffered: int = 0
    buffered_rows: int = 0
    rows: int = 0
    nan_columns: set[str] = field(default_factory=set)  # float columns holding a NaN

    def position(self) -> int:
        return int(self.sink.tell())


class TaskWriter:
    """Writes one task attempt's output. Use :meth:`write` per batch, then :meth:`commit`
    (or :meth:`abort` on failure)."""

    def __init__(self, markers: WriteMarkers, staging: Staging, attempt: TaskAttempt, *,
                 partition_by: Sequence[str] = (), settings: config.Settings | None = None,
                 validator: BatchValidator | None = None,
                 error_sink: ErrorSinkFactory | None = None,
                 formats: Sequence[str] = ()) -> None:
        self.markers = markers
        self.staging = staging
        self.storage = staging.storage
        self.attempt = attempt
        self.instant = staging.instant
        self.write_uuid = staging.write_uuid
        self.partition_by = tuple(partition_by)
        self.formats = tuple(formats)  # the table's formats: values they cannot hold fail
        self.settings = settings or staging.settings
        self.validator = validator
        self.error_sink = error_sink(attempt, markers) if error_sink is not None else None
        self.target_size = int(self.settings[config.TARGET_FILE_SIZE])
        self.row_group_bytes = min(int(self.settings[config.ROW_GROUP_BYTES]),
                                   self.target_size)
        self.wide_row_group_bytes = max(self.row_group_bytes,
                                        min(WIDE_ROW_GROUP_BYTES, self.target_size))
        self.max_open = int(self.settings[config.MAX_OPEN_FILES])
        codec = self.settings[config.PARQUET_COMPRESSION]
        self.compression = None if codec == "none" else codec
        self.summary = TaskSummary(attempt)
        self._open: OrderedDict[str, _OpenFile] = OrderedDict()
        self._closed: list[tuple[FileStats, str]] = []
        self._targets: list[str] = []
        self._marked: dict[str, str] = {}  # partition -> file name whose marker is made
        self._partition_metadata: dict[bytes, bytes] | None = None
        self._seq = 0
        self._state = "open"
        self._result: TaskResult | None = None
        self._requests_before = self.storage.requests()

    # --- timing ----------------------------------------------------------------------------
    def _add_time(self, step: str, since: float) -> None:
        seconds = self.summary.seconds
        seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - since

    # --- writing ----------------------------------------------------------------------------
    def write(self, batch: pa.RecordBatch) -> None:
        """Write one batch (its rows may go to several partition folders)."""
        if self._state != "open":
            raise MarkerStoreError(f"task attempt {self.attempt.label} is {self._state}")
        self.summary.rows_in += batch.num_rows
        if self.validator is not None:
            batch = self._validate(batch)
        if batch.num_rows == 0:
            return
        if not self.partition_by:
            self._append("", utc_batch(batch))  # zoned timestamps stored as UTC
            return
        missing = [c for c in self.partition_by if c not in batch.schema.names]
        if missing:
            raise ValueError(f"partition column(s) {missing} are not in the data "
                             f"(columns: {batch.schema.names})")
        keep = [n for n in batch.schema.names if n not in self.partition_by]
        fields = [batch.schema.field(c) for c in self.partition_by]
        if self._partition_metadata is None:  # the partition columns' types, for formats
            check_partition_types(self.formats, fields)
            self._partition_metadata = partition_schema_metadata(fields)
        # The folders hold the partition values as Spark names them (a timestamp's
        # wall-clock time in the batch's zone, recorded above); the files, UTC.
        pieces = []
        for values, rows in split_by_partition(batch, self.partition_by):
            check_partition_values(self.formats, fields, values)
            pieces.append((partition_path(self.partition_by, values),
                           utc_batch(rows.select(keep))))
        fresh = [p for p, _ in pieces if p not in self._open and p not in self._marked]
        if len(fresh) > 1:
            self._mark_many(fresh)
        for partition, rows in pieces:
            self._append(partition, rows)

    def _next_name(self) -> str:
        name = FileName(self.write_uuid, self._seq, self.attempt.partition_id,
                        self.attempt.stage_id, self.attempt.task_attempt_id,
                        self.instant).name
        self._seq += 1
        return name

    def _mark_many(self, partitions: list[str]) -> None:
        """The markers of the files a batch opens in several partitions, in one call (one
        request and one segment with batched markers; parallel PUTs with direct ones)."""
        started = time.perf_counter()
        names = {p: self._next_name() for p in partitions}
        self.markers.create_many([{"partition": p, "file": n, "io_type": IOType.CREATE,
                                   "task_attempt": self.attempt.label}
                                  for p, n in names.items()])
        self._marked.update(names)
        self._add_time("markers", started)

    def _validate(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        assert self.validator is not None
        good, errors = self.validator(batch, self.attempt)
        if errors is not None and errors.num_rows:
            self._store_errors(errors)
        return good

    def write_errors(self, errors: pa.Table | pa.RecordBatch) -> None:
        """Error rows a reading stage found before the writer: counted in the task's rows
        in and by reason, and handed to the error sink (without one, only counted)."""
        if self._state != "open":
            raise MarkerStoreError(f"task attempt {self.attempt.label} is {self._state}")
        if errors.num_rows:
            self.summary.rows_in += errors.num_rows
            self._store_errors(errors, required=False)

    def _store_errors(self, errors: pa.Table | pa.RecordBatch, required: bool = True
                      ) -> None:
        table = errors if isinstance(errors, pa.Table) else pa.Table.from_batches([errors])
        counts = self.summary.error_records
        for item in pc.value_counts(_reasons(table)).to_pylist():
            reason = str(item["values"])
            counts[reason] = counts.get(reason, 0) + int(item["counts"])
        if self.error_sink is not None:
            self.error_sink.write(table)
        elif required:
            raise MarkerStoreError(f"{table.num_rows} error record(s) and no error sink "
                                   "to store them")

    def _append(self, partition: str, batch: pa.RecordBatch) -> None:
        handle = self._open.get(partition)
        if handle is None:
            if len(self._open) >= self.max_open:
                _, oldest = self._open.popitem(last=False)
                self._close(oldest)
            handle = self._new_file(partition, batch.schema)
            self._open[partition] = handle
        else:
            self._open.move_to_end(partition)
        handle.buffer.append(batch)
        handle.buffered += batch.nbytes
        handle.buffered_rows += batch.num_rows
        if handle.buffered >= self.row_group_bytes and (
                handle.buffered_rows >= ROW_GROUP_MIN_ROWS
                or handle.buffered >= self.wide_row_group_bytes):
            self._flush(handle)
            if handle.position() >= self.target_size:
                del self._open[partition]
                self._close(handle)

    def _new_file(self, partition: str, schema: pa.Schema) -> _OpenFile:
        name = self._marked.pop(partition, None)
        if name is None:
            name = self._next_name()
            started = time.perf_counter()
            # Invariant 1: the marker is durable before the file exists.
            self.markers.create(partition, name, IOType.CREATE,
                                task_attempt=self.attempt.label)
            self._add_time("markers", started)
        path = relative_path(partition, name)
        target = self.staging.target(self.attempt.task_attempt_id, path)
        self._targets.append(target)
        if self.storage.is_local:  # pyarrow writes it: storage checks it and its folder
            sink: Any = pa.OSFile(self.storage.writable_folder(target), "wb")
        elif self.staging.writes_os_paths:  # S3: a local file to upload, outside the table
            with path_errors(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                sink = pa.OSFile(target, "wb")
        else:
            sink = self.storage.open_write(target)
        if self._partition_metadata:
            schema = schema.with_metadata({**(schema.metadata or {}),
                                           **self._partition_metadata})
        writer = pq.ParquetWriter(sink, schema, compression=self.compression)
        return _OpenFile(path, target, writer, sink)

    def _flush(self, handle: _OpenFile) -> None:
        if not handle.buffer:
            return
        started = time.perf_counter()
        table = pa.Table.from_batches(handle.buffer)
        handle.nan_columns.update(nan_columns(table))
        handle.writer.write_table(table, row_group_size=max(1, table.num_rows))
        handle.rows += table.num_rows
        handle.buffer.clear()
        handle.buffered = handle.buffered_rows = 0
        self._add_time("write", started)

    def _close(self, handle: _OpenFile) -> None:
        self._flush(handle)
        started = time.perf_counter()
        handle.writer.add_key_value_metadata(nan_metadata(handle.nan_columns))
        handle.writer.close()
        size = handle.position()
        handle.sink.close()
        self._add_time("write", started)
        started = time.perf_counter()
        stats = FileStats(handle.stats_path, handle.rows, size,
                          spark_partition=self.attempt.partition_id,
                          task_attempt_id=self.attempt.task_attempt_id)
        stats = self.staging.finish_file(stats, handle.target)
        self._add_time("finish", started)
        self._closed.append((stats, handle.target))

    # --- task commit / abort -------------------------------------------------------------
    def commit(self) -> TaskResult:
        """Close every file, finish staging (S3: upload, not complete), and report. A
        second call returns the same result."""
        if self._state == "committed" and self._result is not None:
            return self._result
        if self._state != "open":
            raise MarkerStoreError(f"task attempt {self.attempt.label} is {self._state}")
        while self._open:
            _, handle = self._open.popitem(last=False)
            self._close(handle)
        started = time.perf_counter()
        files = self.staging.finish_task(self._closed, self._record)
        self._add_time("upload" if self.staging.mode == "multipart" else "finish", started)
        if self.error_sink is not None:
            self.summary.error_files = self.error_sink.commit()
        after = self.storage.requests()
        self.summary.requests = {k: after.get(k, 0) - self._requests_before.get(k, 0)
                                 for k in after}
        self._state = "committed"
        self._result = TaskResult(files, self.summary)
        return self._result

    def _record(self, stats: FileStats) -> None:
        started = time.perf_counter()
        partition, _, name = stats.path.rpartition("/")
        pending = stats.pending_upload.to_dict() if stats.pending_upload else None
        record_details(self.markers, partition, name, task_attempt=self.attempt.label,
                       size=stats.bytes, checksum=stats.checksum, pending_upload=pending)
        self._add_time("markers", started)

    def abort(self) -> None:
        """Delete what this attempt wrote, abort its uploads. Idempotent; the markers stay
        (reconcile or rollback use them if this cleanup cannot finish)."""
        if self._state == "aborted":
            return
        self._state = "aborted"
        for handle in self._open.values():
            for closer in (handle.writer.close, handle.sink.close):
                with contextlib.suppress(Exception):  # the file is deleted below
                    closer()
        self._open.clear()
        errors: list[str] = []
        for step in (lambda: self.staging.delete_targets(self._targets),
                     lambda: self.staging.abort_task(self.attempt.task_attempt_id),
                     lambda: self.error_sink.abort() if self.error_sink else None):
            try:
                step()
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        if errors:
            log.warning("task attempt %s: abort left work for reconcile/rollback: %s",
                        self.attempt.label, "; ".join(errors))
