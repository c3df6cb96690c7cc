"""The executor side of ingest: a Python task reads, parses, validates, partitions and
writes its source splits, and returns only its stats rows.

Spark schedules one task per pack of splits (``mapInArrow`` over the packs' numbers,
:func:`~markerstore.ingest.sources.pack`); the task streams each split block by block
(:mod:`~markerstore.ingest.blocks`), parses each block vectorized
(:mod:`~markerstore.ingest.parse`), runs the Validator's stages over the typed rows
(``Validator.split_typed``; the `record` of a failing row decoded from its line,
:mod:`~markerstore.ingest.payload`), and hands the suspect lines to errortable's parser
and Validator (``parse_json_block`` / ``parse_csv_block``, ``split_records_arrow``),
which decide them exactly. Every error record is built as Arrow columns. Good rows go to
the task writer (grouped by partition in Arrow, marker first, then the file); error rows
to the task's error sink. No data row crosses into the JVM.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from errortable.capture.records import to_json
from markerstore.commit import TaskAttempt, TaskResult, TaskSpec
from markerstore.commit.runner import task_writer
from markerstore.commit.task import TaskWriter
from markerstore.ingest.blocks import BLOCK_BYTES, Block, RawRecord, read_blocks
from markerstore.ingest.charsets import codec
from markerstore.ingest.header import drop_header
from markerstore.ingest.options import IngestOptions
from markerstore.ingest.parse import Parsed, blank_lines, csv_text, json_query, parse_json
from markerstore.ingest.payload import json_payloads
from markerstore.ingest.sources import SourceTask

PARQUET_BATCH_ROWS = 64_000
REFERENCE_RECORDS = 8_192  # suspect records per pass of the reference parser (Python objects)


def _attempt() -> TaskAttempt:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return TaskAttempt(0)
    return TaskAttempt(context.partitionId(), context.stageId(), context.attemptNumber(),
                       context.taskAttemptId())


def split_header(header: str | None, delimiter: str = ",", escape: str = '"', *,
                 dialect: Any = None, case_sensitive: bool = False, null_value: str = ""
                 ) -> list[str]:
    """The column names of a CSV header record (empty if it is not one), as Spark names
    them (:func:`~markerstore.ingest.header.safe_names`: an empty one ``_c<index>``, a
    repeated one ``<name><index>``)."""
    from markerstore.ingest.header import safe_names
    from markerstore.values.csv import CsvError, split_record

    if not header:
        return []
    try:
        fields = split_record(header, delimiter, escape, dialect=dialect)
    except CsvError:
        return []
    return safe_names([name for name, _ in fields], case_sensitive, null_value)


def with_reason(errors: pa.Table) -> pa.Table:
    """Error records with the `reason` column the task writer counts."""
    return errors.append_column("reason", pc.map_lookup(errors.column("context"), "reason",
                                                        "first"))


class IngestTask:
    """The function each Spark task runs (picklable). `spec` is the write's task spec
    (its validator is not used: rows are validated here); `validator` is errortable's
    Validator of this write, the reference for every suspect line; `capture` makes the
    capture context (the error table's task spec, or a plain one); `splits` holds each
    Spark task's source splits (with their CSV header, and whether it drops it), by the
    task's number."""

    def __init__(self, spec: TaskSpec, validator: Any, capture: Any,
                 storage_options: Mapping[str, Any] | None = None,
                 splits: Sequence[Sequence[tuple[SourceTask, str | None, bool]]] = (),
                 block_bytes: int = BLOCK_BYTES,
                 options: Mapping[str, Any] | None = None,
                 case_sensitive: bool = False) -> None:
        self.spec = replace(spec, validator=None)
        self.validator = validator
        self.capture = capture
        self.storage_options = dict(storage_options or {})
        self.splits = [list(s) for s in splits]
        self.block_bytes = block_bytes
        self.schema: pa.Schema = validator.target_schema
        self.extra_ok = getattr(validator, "extra_columns", "error") == "ignore"
        self.query = json_query(self.schema, self.extra_ok)
        reading = IngestOptions.from_settings(options)
        self.read_options = reading.read_options()
        self.parse_options = reading.parse_options(self.schema)
        self.csv_header = reading.csv_header
        self.case_sensitive = case_sensitive  # Spark's spark.sql.caseSensitive
        # how text values read: the Validator's, so the fast pass reads them alike
        self.formats = getattr(validator, "formats", None)

    def __call__(self, descriptors: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield self.run(descriptors).to_arrow()

    def run(self, descriptors: Iterator[pa.RecordBatch]) -> TaskResult:
        """This task attempt: read its splits, write, commit the task; its result."""
        attempt = _attempt()
        writer = task_writer(self.spec, attempt)
        try:
            for batch in descriptors:  # the numbers of this Spark task's packs of splits
                for number in batch.column(0).to_pylist():
                    for task, header, drops in self.splits[number]:
                        self.read(writer, task, header, attempt, drops)
            result = writer.commit()
            if self.spec.task_hook is not None:
                self.spec.task_hook("committed", attempt, result.files)
        except BaseException:
            writer.abort()
            raise
        return result

    # --- reading ------------------------------------------------------------------------
    def _context(self, url: str, attempt: TaskAttempt, start: int) -> Any:
        label = f"{attempt.partition_id}-{attempt.stage_id}-{attempt.task_attempt_id}"
        # In a byte range of a large file, lines are counted from the range's start.
        extra = ({"extra": {"source_offset": str(start), "source_line_counted_from": "offset"}}
                 if start else {})
        return self.capture.context(task_attempt=label, source_file=url, **extra)

    def read(self, writer: TaskWriter, task: SourceTask, header: str | None,
             attempt: TaskAttempt, drops_header: bool | None = None) -> None:
        timer = _Timer(writer.summary.seconds)
        ctx = self._context(task.url, attempt, task.start and task.base + task.start)
        source = writer.summary.source  # what the parser counts: the commit checks it
        for good, errors in self.results(task, header, ctx, timer, source, drops_header):
            with timer("write_rows"):
                if errors is not None and errors.num_rows:
                    writer.write_errors(errors)
                for batch in good.to_batches():  # the vectorized rows, then the reference's
                    writer.write(batch)

    def results(self, task: SourceTask, header: str | None, ctx: Any,
                timer: _Timer | None = None, source: dict[str, int] | None = None,
                drops_header: bool | None = None
                ) -> Iterator[tuple[pa.Table, pa.Table | None]]:
        """(good rows, error rows or None) of each block of the task, in order. What the
        parser reads is added to `source`: ``records`` (a JSON line that is not blank or a
        document's element, a CSV record after the header, a Parquet row), ``lines``
        (physical lines). `drops_header`: whether the CSV header record starts in this
        task's bytes, as the driver found it (None: read the file's start to learn it)."""
        timer = timer or _Timer({})
        source = {} if source is None else source
        source.setdefault("records", 0)
        if task.format == "parquet":
            yield from self._parquet(task, ctx, timer, source)
            return
        columns = self._columns(task, header)
        source.setdefault("lines", 0)
        if task.start == 0:  # the lines `skip` names, before the file's CSV text
            _count(source, "lines", task.base_line)
        # A header that is no CSV record (a quote inside an unquoted name) stays a record,
        # so it fails as one; dropped, it would take the file's every record with it.
        header_left = (columns is not None and self.csv_header
                       and bool(columns or not header)
                       and (self._header_in(task) if drops_header is None else drops_header))
        for block in timer.each("read", read_blocks(task, self.storage_options,
                                                    self.block_bytes, self.read_options)):
            _count(source, "lines", block.line_count)
            if header_left:  # the CSV header: the file's first non-empty record
                block, found = drop_header(block)
                header_left = not found
            if task.base:  # read from after the lines `skip` names: the file's own places
                block = from_base(block, task.base, task.base_line if task.start == 0 else 0)
            # a record the parser reads: every one but a blank one, those set apart too
            _count(source, "records", len(block) - blank_lines(block.records, task.format)
                   + len(block.raw))
            yield self._block(block, task.format, columns, ctx, timer)

    def _header_in(self, task: SourceTask) -> bool:
        """Whether the CSV header record starts in this task's bytes: the first range
        (or the whole file), or a later range where all before it is empty lines or
        comment lines."""
        if task.start == 0:
            return True
        from markerstore.ingest.header import header_start, starts_in

        return starts_in(task, header_start(task, self.storage_options, self.read_options))

    def _columns(self, task: SourceTask, header: str | None) -> list[str] | None:
        """The columns of a CSV task's records, in order: its file's header record's, or
        with ``header=false`` the schema's; None for JSON."""
        if task.format != "csv":
            return None
        if not self.csv_header:
            return list(self.schema.names)
        return split_header(header, dialect=self.read_options.dialect,
                            case_sensitive=self.case_sensitive,
                            null_value=self.parse_options.null_value)

    def _parquet(self, task: SourceTask, ctx: Any, timer: _Timer, source: dict[str, int]
                 ) -> Iterator[tuple[pa.Table, pa.Table | None]]:
        import fsspec

        from markerstore.ingest.parquet import open_parquet, spark_batch

        with fsspec.open(task.url, "rb", **self.storage_options) as handle:
            batches = open_parquet(handle).iter_batches(batch_size=PARQUET_BATCH_ROWS)
            for batch in timer.each("read", batches):
                _count(source, "records", batch.num_rows)
                with timer("validate"):  # as Spark reads it (nanoseconds cut), then cast
                    good, errors = self.validator.split_arrow(spark_batch(batch), ctx)
                    errors = with_reason(errors)
                yield pa.Table.from_batches([good]), errors

    def _block(self, block: Block, fmt: str, columns: list[str] | None, ctx: Any,
               timer: _Timer) -> tuple[pa.Table, pa.Table | None]:
        with timer("parse"):
            if fmt == "csv":
                p = self.parse_options
                r = self.read_options
                parsed = csv_text(block.records, self.schema, columns, self.extra_ok,
                                  p.null_value, p.empty_value, dialect=r.dialect)
            else:
                parsed = parse_json(block.records, self.schema, self.query, self.formats)
        with timer("validate"):
            good, errors = self._validate(block, parsed, fmt, columns, ctx)
        with timer("reference"):
            more, more_errors = self._reference(block, parsed.suspects, fmt, columns, ctx)
        raw = self._raw(block.raw, ctx)
        found = [t for t in (raw, errors, more_errors) if t is not None and t.num_rows]
        errors = None if not found else found[0] if len(found) == 1 else \
            pa.concat_tables(found)
        return pa.Table.from_batches([good, *(b for b in more if b.num_rows)]), errors

    def _validate(self, block: Block, parsed: Parsed, fmt: str, columns: list[str] | None,
                  ctx: Any) -> tuple[pa.RecordBatch, pa.Table | None]:
        """The Validator's stages over the parsed rows (a CSV record's text cast first, as
        the per-record path casts it), with the `record` of a failing row as the
        per-record path computes it: a CSV record's fields by header name, a JSON line's
        object."""
        def payloads(rows: list[int]) -> list[str]:
            if fmt == "csv":
                return [to_json(r) for r in parsed.table.take(pa.array(rows)).to_pylist()]
            return json_payloads(block.records.take(pa.array(parsed.rows[rows])).to_pylist())

        if parsed.table.num_rows == 0:  # every line a suspect: no stage to run
            return self._no_rows(), None
        numbers = cast(Sequence[int], block.lines[parsed.rows])
        split = self.validator.split_text if fmt == "csv" else self.validator.split_typed
        good, errors = split(parsed.table, ctx, numbers, payloads)
        return good, (with_reason(errors) if errors.num_rows else None)

    def _no_rows(self) -> pa.RecordBatch:
        """An empty batch of the target schema, made once (a wide schema's costs a few
        microseconds a column)."""
        empty: pa.RecordBatch | None = self.__dict__.get("_empty")
        if empty is None:
            empty = self.__dict__["_empty"] = pa.RecordBatch.from_pylist([], schema=self.schema)
        return empty

    def _reference(self, block: Block, suspects: np.ndarray, fmt: str,
                   columns: list[str] | None, ctx: Any) -> tuple[list[pa.RecordBatch],
                                                                 pa.Table | None]:
        """The suspect lines through errortable's parser and Validator, which decide them
        exactly, :data:`REFERENCE_RECORDS` at a time; their error records are built as
        Arrow columns (no dict per record)."""
        if len(suspects) == 0:
            return [], None
        goods: list[pa.RecordBatch] = []
        errors: list[pa.Table] = []
        for i in range(0, len(suspects), REFERENCE_RECORDS):  # Python objects, a few at a time
            good, found = self._suspects(block, suspects[i:i + REFERENCE_RECORDS], fmt,
                                         columns, ctx)
            goods.append(good)
            errors += [] if found is None else [found]
        return goods, (None if not errors else errors[0] if len(errors) == 1 else
                       pa.concat_tables(errors))

    def _suspects(self, block: Block, suspects: np.ndarray, fmt: str,
                  columns: list[str] | None, ctx: Any) -> tuple[pa.RecordBatch,
                                                                pa.Table | None]:
        from errortable.capture.jsonblock import parse_json_array
        from errortable.capture.parsing import parse_csv_block

        numbers = block.lines[suspects]
        offsets = block.offsets[suspects]
        if fmt == "csv":
            parsed = parse_csv_block(block.records.take(pa.array(suspects)).to_pylist(), ctx,
                                     header=columns, dialect=self.read_options.dialect,
                                     line_numbers=numbers.tolist(),
                                     offsets=offsets.tolist(), options=self.parse_options)
        else:  # a line that fails is decided and recorded as columns
            parsed = parse_json_array(block.records.take(pa.array(suspects)), ctx,
                                      line_numbers=numbers, offsets=offsets,
                                      options=self.parse_options)
        good, errors = self.validator.split_records_arrow(parsed.records, ctx,
                                                          line_numbers=parsed.line_numbers)
        found = [t for t in (parsed.errors, errors) if t.num_rows]
        if not found:
            return good, None
        return good, with_reason(found[0] if len(found) == 1 else pa.concat_tables(found))

    def _raw(self, raw: Sequence[RawRecord], ctx: Any) -> pa.Table | None:
        """The error records of the records the reader set apart (not UTF-8, too large)."""
        if not raw:
            return None
        from errortable.capture.parsing import encoding_failure, raw_errors, size_failure

        limit = self.read_options.max_record_bytes
        name = codec(self.read_options.encoding)
        failures = [encoding_failure(r.line, r.data, r.offset, name) if r.reason == "encoding"
                    else size_failure(r.line, r.data, r.size, limit, r.offset) for r in raw]
        return with_reason(raw_errors(failures, ctx))


def from_base(block: Block, base: int, lines: int) -> Block:
    """`block`, read from byte `base` of its file on (after `lines` lines), with the byte
    offsets and line numbers of its records in the file."""
    raw = tuple(replace(r, offset=r.offset + base, line=r.line + lines) for r in block.raw)
    return replace(block, lines=block.lines + lines, offsets=block.offsets + base, raw=raw)


def _count(source: dict[str, int], kind: str, n: int) -> None:
    source[kind] = source.get(kind, 0) + n


class _Timer:
    """Seconds per phase, added to the task summary (the commit result's timings)."""

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.phase = ""
        self.started = 0.0

    def __call__(self, phase: str) -> _Timer:
        self.phase = phase
        return self

    def __enter__(self) -> None:
        self.started = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        key = f"ingest_{self.phase}"
        self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - self.started

    def each(self, phase: str, items: Any) -> Iterator[Any]:
        iterator = iter(items)
        while True:
            with self(phase):
                item = next(iterator, None)
            if item is None:
                return
            yield item
