"""`ingest(source, table, ...)`: JSON lines, CSV or Parquet from any fsspec URL into a table.

Spark schedules one Python task per source split (a file, or a byte range of a big
JSON-lines file); the task reads its split through fsspec block by block, parses and
validates it vectorized, and writes good rows and error records itself
(:mod:`markerstore.ingest.task`), so a retried task retries both and no data row crosses
into the JVM. The tasks return only their stats rows; the write commits data and error
rows together (markers, the error table, one atomic completed instant).
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
from markerstore.commit.result import CommitResult
from markerstore.ingest.schema import SchemaError, load_schema
from markerstore.ingest.sources import SourceTask, list_tasks, read_lines
from markerstore.notebook import fields_html

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
        return fields_html(self.summary())


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

    from markerstore.commit import STATS_DDL
    from markerstore.ingest.task import IngestTask

    def frame(job: Any) -> Any:
        """The source tasks' stats rows, built once the write's instant exists: the tasks
        carry its spec and capture context (commit time, error table) to the executors."""
        spec = job.error_commit.task_spec() if job.error_commit is not None else None
        validator = (spec.validator(target, key, columns, dict(checks or {}))
                     if spec is not None else errortable.Validator(target, key, columns,
                                                                   dict(checks or {})))
        run = IngestTask(job.spec, validator, spec or _NoSpec(), src_options)
        return task_df.mapInArrow(run, STATS_DDL)

    shape = session.createDataFrame([], from_arrow_schema(target))
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
