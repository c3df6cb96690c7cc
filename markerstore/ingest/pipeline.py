"""`ingest(source, table, ...)`: JSON lines, CSV or Parquet from any fsspec URL into a table.

Executors read the source through fsspec (one Spark task per file or byte range), parse
and validate each record (errortable's parsers and Validator: parse, cast, key,
partition and named checks), and hand good rows and error records to the writer in the
same task, so a retried task retries both. The write commits data and error rows
together (markers, the error table, one atomic completed instant).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.commit.errortable_link import ERROR_COLUMN
from markerstore.commit.result import CommitResult
from markerstore.ingest.schema import SchemaError, load_schema
from markerstore.ingest.sources import SourceTask, list_tasks, read_lines

BATCH_LINES = 20_000
TASK_DDL = "task INT, url STRING, format STRING, start BIGINT, `end` BIGINT, header STRING"


@dataclass
class IngestResult:
    """What an ingest did: the commit, and what was read."""

    commit: CommitResult
    source: str
    source_tasks: int
    schema: pa.Schema
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def error_records(self) -> dict[str, int]:
        return dict(self.commit.error_records)

    @property
    def rows_read(self) -> int:
        return self.commit.rows_written + sum(self.commit.error_records.values())

    def summary(self) -> dict[str, Any]:
        c = self.commit
        return {"table": c.path, "instant": c.instant, "source": self.source,
                "rows_read": self.rows_read, "rows_written": c.rows_written,
                "error_records": sum(c.error_records.values()),
                "error_records_by_reason": dict(sorted(c.error_records.items())),
                "files_committed": c.num_files, "files_cleaned": c.files_cleaned,
                "duration_s": round(self.seconds, 2),
                "storage_requests": dict(c.requests)}

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>"
                       for k, v in self.summary().items())
        return f"<table>{rows}</table>"


def infer_schema(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
                 sample_lines: int = 2000) -> pa.Schema:
    """A schema from the first records of the source (Parquet: the file's own schema)."""
    first = tasks[0]
    if first.format == "parquet":
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(first.url, "rb", **dict(storage_options or {})) as handle:
            return pq.read_schema(handle)
    lines = []
    for task in tasks:
        for _, _, text in read_lines(task, dict(storage_options or {})):
            if text.strip():
                lines.append(text)
            if len(lines) >= sample_lines:
                break
        if len(lines) >= sample_lines:
            break
    if first.format == "csv":
        import pyarrow.csv as pcsv

        table = pcsv.read_csv(pa.BufferReader("\n".join(lines).encode()))
        return table.schema
    records = []
    for text in lines:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    if not records:
        raise SchemaError("cannot infer a schema: the first lines hold no JSON object; "
                          "pass --schema")
    names: dict[str, None] = {}
    for record in records:
        names.update(dict.fromkeys(record))
    fields = []
    for name in names:
        values = [r.get(name) for r in records]
        try:
            arrow_type = pa.array(values).type
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrow_type = pa.string()
        if arrow_type == pa.null():
            arrow_type = pa.string()
        fields.append(pa.field(name, arrow_type))
    return pa.schema(fields)


def _csv_header(task: SourceTask, storage_options: Mapping[str, Any] | None) -> str:
    for _, _, text in read_lines(SourceTask(task.url, task.format),
                                 dict(storage_options or {})):
        return text
    return ""


class _Reader:
    """The executor side: read one source task, parse, validate; yield Arrow batches of
    good rows (target schema) and error rows (all null but ERROR_COLUMN). Picklable."""

    def __init__(self, schema: pa.Schema, validator: Any, spec: Any,
                 storage_options: Mapping[str, Any] | None) -> None:
        self.schema = schema
        self.validator = validator
        self.spec = spec  # errortable.ErrorTaskSpec: the capture context of this write
        self.storage_options = dict(storage_options or {})
        self.out_schema = schema.append(pa.field(ERROR_COLUMN, pa.string()))

    def _context(self, url: str, extra: Mapping[str, Any] | None = None) -> Any:
        from pyspark import TaskContext

        tc = TaskContext.get()
        attempt = (f"{tc.partitionId()}-{tc.stageId()}-{tc.taskAttemptId()}"
                   if tc is not None else None)
        return self.spec.context(task_attempt=attempt, source_file=url,
                                 **({"extra": dict(extra)} if extra else {}))

    def _errors_batch(self, records: list[dict[str, Any]]) -> pa.RecordBatch:
        n = len(records)
        columns = [pa.nulls(n, f.type) for f in self.schema]
        columns.append(pa.array([json.dumps(_jsonable(r)) for r in records], pa.string()))
        return pa.RecordBatch.from_arrays(columns, schema=self.out_schema)

    def _good_batch(self, good: pa.RecordBatch) -> pa.RecordBatch:
        columns = [good.column(good.schema.get_field_index(f.name)) for f in self.schema]
        columns.append(pa.nulls(good.num_rows, pa.string()))
        return pa.RecordBatch.from_arrays(columns, schema=self.out_schema)

    def _emit(self, good: pa.RecordBatch, errors: list[dict[str, Any]]
              ) -> Iterator[pa.RecordBatch]:
        if good.num_rows:
            yield self._good_batch(good)
        if errors:
            yield self._errors_batch(errors)

    def read(self, task: SourceTask, header: str | None) -> Iterator[pa.RecordBatch]:
        from errortable import parse_csv_lines, parse_json_lines

        if task.format == "parquet":
            yield from self._read_parquet(task)
            return
        # In a byte range of a large file, lines are counted from the range's start.
        extra = ({"source_offset": str(task.start), "source_line_counted_from": "offset"}
                 if task.start else None)
        ctx = self._context(task.url, extra)
        lines: list[str] = []
        first_line = 2 if task.format == "csv" else 1
        skip_header = task.format == "csv"

        def flush(chunk: list[str], first: int) -> Iterator[pa.RecordBatch]:
            if task.format == "csv":
                parsed = parse_csv_lines(chunk, ctx, header=_split_csv(header),
                                         first_line=first)
            else:
                parsed = parse_json_lines(chunk, ctx, first_line=first)
            good, errors = self.validator.split_records(parsed.records, ctx,
                                                        line_numbers=parsed.line_numbers)
            yield from self._emit(good, list(parsed.errors) + list(errors))

        for _, _, text in read_lines(task, self.storage_options):
            if skip_header:
                skip_header = False
                continue
            lines.append(text)
            if len(lines) >= BATCH_LINES:
                yield from flush(lines, first_line)
                first_line += len(lines)
                lines = []
        if lines:
            yield from flush(lines, first_line)

    def _read_parquet(self, task: SourceTask) -> Iterator[pa.RecordBatch]:
        import fsspec
        import pyarrow.parquet as pq

        ctx = self._context(task.url)
        with fsspec.open(task.url, "rb", **self.storage_options) as handle:
            for batch in pq.ParquetFile(handle).iter_batches(batch_size=BATCH_LINES):
                good, errors = self.validator.split_arrow(batch, ctx)
                yield from self._emit(good, _records_of(errors))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                task = SourceTask(row["url"], row["format"], int(row["start"] or 0),
                                  None if row["end"] is None else int(row["end"]))
                yield from self.read(task, row["header"])


def _split_csv(header: str | None) -> list[str]:
    import csv

    return next(csv.reader([header or ""]))


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    context = record.get("context")
    if isinstance(context, list):  # Arrow maps come back as (key, value) pairs
        record = {**record, "context": dict(context)}
    return record


def _records_of(errors: pa.Table) -> list[dict[str, Any]]:
    return [_jsonable(r) for r in errors.to_pylist()]


def spark_session(master: str = "local[*]", log_level: str | None = None) -> Any:
    """The Spark session ingest uses when none is given: this Python in the workers, UTC,
    no console progress (ingest draws its own), Spark's log at ERROR unless
    MARKERSTORE_SPARK_LOG_LEVEL says otherwise."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master(master).appName("markerstore-ingest")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.host", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
               .getOrCreate())
    session.sparkContext.setLogLevel(
        log_level or os.environ.get("MARKERSTORE_SPARK_LOG_LEVEL", "ERROR"))
    return session


def ingest(source: str, table: str, *, schema: str | pa.Schema | None = None,
           fmt: str | None = None, checks: Mapping[str, str] | None = None,
           key: str | None = None, partition_by: str | Sequence[str] | None = None,
           markers: str = "batched", mode: str = "append", master: str = "local[*]",
           spark: Any = None, storage_options: Mapping[str, Any] | None = None,
           source_storage_options: Mapping[str, Any] | None = None,
           options: Mapping[str, Any] | None = None, error_table: bool = True,
           progress: bool | None = None, _task_hook: Any = None) -> IngestResult:
    """Read `source`, validate, and commit it to `table` with markers and an error table.

    Everything that can be checked before Spark starts is: the source exists and holds
    data files, the schema parses, the key, partition columns and checks are valid."""
    import errortable
    from errortable.config import ENABLED
    from markerstore.spark import write

    started = time.perf_counter()
    src_options = dict(source_storage_options if source_storage_options is not None
                       else storage_options or {})
    tasks = list_tasks(source, src_options, fmt)
    if isinstance(schema, pa.Schema):
        target = schema
    elif schema:
        target = load_schema(schema, src_options)
    else:
        target = infer_schema(tasks, src_options)
    columns = [] if partition_by is None else (
        [partition_by] if isinstance(partition_by, str) else list(partition_by))
    settings = dict(options or {})
    settings.setdefault(config.MARKERS_TYPE, markers)
    settings.setdefault(ENABLED, "true" if error_table else "false")
    # Validate key, partition columns and checks on the driver, before anything is written.
    probe = errortable.Validator(target, key, columns, dict(checks or {}))
    del probe

    session = spark or spark_session(master)
    headers = {t.url: _csv_header(t, src_options) for t in tasks if t.format == "csv"}
    rows = [(i, t.url, t.format, t.start, t.end, headers.get(t.url))
            for i, t in enumerate(tasks)]
    task_df = session.createDataFrame(
        session.sparkContext.parallelize(rows, max(1, len(rows))), TASK_DDL)

    from pyspark.sql.pandas.types import from_arrow_schema

    out_schema = from_arrow_schema(target.append(pa.field(ERROR_COLUMN, pa.string())))

    def frame(job: Any) -> Any:
        """The reading DataFrame, built once the write's instant exists: the readers carry
        its capture context (commit time, error table) into the executors."""
        spec = job.error_commit.task_spec() if job.error_commit is not None else None
        validator = (spec.validator(target, key, columns, dict(checks or {}))
                     if spec is not None else errortable.Validator(target, key, columns,
                                                                   dict(checks or {})))
        reader = _Reader(target, validator, spec or _NoSpec(), src_options)
        return task_df.mapInArrow(reader, out_schema)

    shape = session.createDataFrame([], out_schema)
    with _progress(session, progress):
        result = write(shape, table, partition_by=columns or None, mode=mode,
                       options=settings, storage_options=storage_options,
                       _task_hook=_task_hook, _frame=frame)
    return IngestResult(result, source, len(tasks), target,
                        seconds=time.perf_counter() - started)


@contextlib.contextmanager
def _progress(session: Any, enabled: bool | None) -> Iterator[None]:
    """A progress bar of Spark's tasks on stderr while the write runs (when a terminal)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield
        return
    import threading

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    tracker = session.sparkContext.statusTracker()
    stop = threading.Event()
    with Progress(TextColumn("[bold]spark[/bold] {task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} tasks"), TimeElapsedColumn(),
                  transient=True) as bar:
        task_id = bar.add_task("starting", total=None)

        def poll() -> None:
            while not stop.wait(0.3):
                try:
                    stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
                except Exception:
                    continue
                stages = [st for st in stages if st is not None]
                if stages:
                    total = sum(st.numTasks for st in stages)
                    done = sum(st.numCompletedTasks for st in stages)
                    bar.update(task_id, description="writing", total=total, completed=done)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2)


class _NoSpec:
    """Capture context without an error table (errors are then counted, not stored)."""

    def context(self, task_attempt: str | None = None, **more: Any) -> Any:
        from errortable import CaptureContext

        return CaptureContext(task_attempt=task_attempt, **more)
