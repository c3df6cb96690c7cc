"""`write(df, path, ...)`: a PySpark DataFrame to a markerstore table.

Executors run the task side (:func:`markerstore.commit.run_task`) inside
``df.mapInArrow``; each task attempt returns its stats rows. Spark's ``collect`` returns the
rows of exactly one successful attempt per partition, so the driver commits exactly the
winners; the markers tell it what the other attempts left.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from errortable.writing.link import ERROR_COLUMN, ErrorTables
from markerstore import config
from markerstore.commit import (
    SAVE_MODES,
    STATS_SCHEMA,
    BatchValidator,
    CommitResult,
    ErrorSinkFactory,
    TaskAttempt,
    TaskResult,
    TaskSpec,
    WriteJob,
    results_from_rows,
    run_task,
)
from markerstore.commit.driver import ErrorTableSpec
from markerstore.commit.runner import TaskHook
from markerstore.errors import (
    ConfigError,
    MarkerStoreError,
    TableFormatError,
    WriteAbortedError,
)
from markerstore.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
DRIVER_HOST = "spark.driver.host"
DRIVER_BIND_ADDRESS = "spark.driver.bindAddress"


@functools.lru_cache(maxsize=1)
def stats_type() -> StructType:
    """The Spark type of the tasks' stats rows (STATS_DDL), built in Python: Spark parses
    a DDL string in the JVM, about 0.4 s the first time in a session."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(STATS_SCHEMA)


@dataclass(frozen=True)
class Shape:
    """What :func:`write` needs of a DataFrame whose rows its `_frame` builds (ingest):
    the session and the schema, without creating a DataFrame (an empty createDataFrame
    costs about 1 s the first time in a session)."""

    sparkSession: Any  # named as DataFrame.sparkSession
    schema: StructType

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)


def settings_for_mode(options: Mapping[str, Any] | None, mode: str) -> config.Settings:
    """The options, with the conflict mode taken from `mode` unless an option sets it."""
    settings = config.resolve(options)
    key = str(mode or "append").strip().lower()
    if key not in SAVE_MODES:
        raise ConfigError(f"mode {mode!r} is not one of {', '.join(sorted(SAVE_MODES))}")
    from_mode = SAVE_MODES[key]
    explicit = settings.explicit()
    if config.CONFLICT_MODE in explicit:
        if key != "append" and explicit[config.CONFLICT_MODE] != from_mode:
            raise ConfigError(f"mode={mode!r} means conflict mode {from_mode}, but "
                              f"{config.CONFLICT_MODE} is {explicit[config.CONFLICT_MODE]}")
        return settings
    return settings.with_options({config.CONFLICT_MODE: from_mode})


def partition_columns(df: DataFrame | Shape, partition_by: str | Sequence[str] | None
                      ) -> tuple[str, ...]:
    """The partition columns of a write of `df` (``partition_by=``), checked."""
    if partition_by is None:
        return ()
    columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    if not columns and not df.columns:
        raise ConfigError("partition_by names every column; a data file needs at least one")
    return checked_partition_columns(columns, df.columns, "partition_by")


def checked_partition_columns(columns: tuple[str, ...], names: Sequence[str], option: str
                              ) -> tuple[str, ...]:
    """`columns`, each a column of `names` (the DataFrame's), and not all of them; else a
    ConfigError naming `option` (the argument or option that gave them)."""
    missing = [c for c in columns if c not in names]
    if missing:
        raise ConfigError(f"{option} column(s) {missing} are not in the DataFrame "
                          f"(columns: {names})")
    if columns and len(columns) >= len(names):
        raise ConfigError("partition_by names every column; a data file needs at least one")
    return columns


def _grouped(df: DataFrame, columns: Sequence[str], settings: config.Settings) -> DataFrame:
    """The rows as the tasks get them. Each task groups every Arrow batch by partition
    itself (split_by_partition), so no JVM sort by default; with partition.sort=jvm, a
    sortWithinPartitions first (for tasks that see more partition values than
    max_open_files, which would otherwise close and reopen files)."""
    if columns and settings[config.PARTITION_SORT] == "jvm":
        return df.sortWithinPartitions(*columns)
    return df


def _task_function(spec: TaskSpec) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield run_spark_task(spec, batches).to_arrow()

    return run


def run_spark_task(spec: TaskSpec, batches: Iterator[pa.RecordBatch]) -> TaskResult:
    """One Spark task attempt of a write (marker first, then the file), in an executor;
    shared by :func:`write` and the ``markerstore`` data source."""
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = (TaskAttempt(context.partitionId(), context.stageId(),
                           context.attemptNumber(), context.taskAttemptId())
               if context is not None else TaskAttempt(0))
    return run_task(spec, batches, attempt)


@dataclass(frozen=True)
class DriverAddress:
    """Where the driver's marker server listens (`bind`) and where executors reach it
    (`advertise`): Spark's own ``spark.driver.bindAddress`` and ``spark.driver.host`` of the
    live session, as its driver resolved them; the option ``markerstore.markers.server.host``
    may name another host for executors to use."""

    bind: str
    advertise: str

    @classmethod
    def of(cls, session: Any) -> DriverAddress:
        """The live session's driver address (over Spark Connect: the server's driver)."""
        host = session.conf.get(DRIVER_HOST, None) or "127.0.0.1"
        return cls(session.conf.get(DRIVER_BIND_ADDRESS, None) or host, host)

    def for_settings(self, settings: config.Settings) -> DriverAddress:
        return DriverAddress(self.bind, settings[config.SERVER_HOST] or self.advertise)


def _start_marker_server(df: DataFrame | Shape, table: Table, settings: config.Settings
                         ) -> tuple[Any, str, str]:
    """The embedded marker server, on the driver's address for executors, with a bearer
    token: a fresh one per write, shipped to the tasks (executors may be other hosts)."""
    import secrets

    from markerstore.server import MarkerServer

    address = DriverAddress.of(df.sparkSession).for_settings(settings)
    token = secrets.token_urlsafe(32)
    server = MarkerServer(table, address.bind, 0, settings, token=token,
                          advertise=address.advertise)
    url = server.start()
    return server, str(url), token


def is_connect(session: Any) -> bool:
    """Whether `session` is a Spark Connect client session (no SparkContext, no JVM)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def _application_id(df: DataFrame | Shape) -> str | None:
    try:  # a Spark Connect session has no SparkContext
        return str(df.sparkSession.sparkContext.applicationId)
    except Exception:
        return None


# The last line of a Python traceback that a markerstore or errortable error ended (in a
# Spark task, or in the data source's commit on the driver), as Spark's errors quote it.
_OWN_ERROR = re.compile(r"^(?:markerstore|errortable)(?:\.\w+)*\.(\w+): (\S.*)$", re.M)


def cause_line(exc: BaseException) -> str:
    """One line for `exc`: where Spark's error quotes a task's (or commit's) markerstore
    error, that error's type and message (they name what to fix); otherwise its type and
    first line."""
    text = str(exc).strip()
    own = _OWN_ERROR.findall(text)
    if own:
        name, message = own[-1]
        return f"{name}: {message.strip()}"[:400]
    for line in text.splitlines():
        if line.strip():
            return f"{type(exc).__name__}: {line.strip()[:300]}"
    return type(exc).__name__


def write(df: DataFrame | Shape, path: str, *, partition_by: str | Sequence[str] | None = None,
          mode: str = "append", options: Mapping[str, Any] | None = None,
          storage_options: Mapping[str, Any] | None = None,
          key: str | None = None, checks: Mapping[str, str] | None = None,
          validator: BatchValidator | None = None, error_sink: ErrorSinkFactory | None = None,
          _task_hook: TaskHook | None = None,
          _frame: Callable[[WriteJob], DataFrame] | None = None) -> CommitResult:
    """Write `df` as Parquet to the table at `path` and commit it atomically.

    `mode` is Spark's save mode: append, overwrite (conflict mode replace: the directory,
    or each partition that receives data), error / errorifexists (conflict mode fail).
    The option ``markerstore.write.conflict.mode`` (s3committer's conflict-mode) may say
    the same instead. `options` are markerstore option keys (see ``markerstore options``).
    With the error table enabled (``markerstore.write.error.table.enabled``), rows with a
    null `key`, a null partition value, or failing one of the named `checks` (SQL boolean
    expressions over the row) go to the error table in the RFC-20 ErrorRecord schema,
    committed with the data (see docs/ERROR_TABLE.md); `validator` and `error_sink`
    replace that routing with your own (see :mod:`markerstore.commit.task`).
    Raises WriteAbortedError (the cause chained) when the Spark job fails, and
    WriteConflictError when the conflict mode refuses the write; in both cases the write
    is rolled back first.

    ``markerstore.spark.write`` is this function on a classic session; over Spark Connect
    it runs the write on Spark's driver, through the ``markerstore`` data source
    (:mod:`markerstore.spark.connect`), where `validator` and `error_sink` (your own code
    in this process) do not apply.
    """
    started = time.perf_counter()
    if isinstance(df, Shape) and _frame is None:
        raise TypeError("write() needs a DataFrame (a Shape only with _frame)")
    settings = settings_for_mode(options, mode)
    columns = partition_columns(df, partition_by)
    table = Table(path, storage_options, settings)
    server: Any = None
    marker_url = marker_token = None
    if settings[config.MARKERS_TYPE] == "batched":
        server, marker_url, marker_token = _start_marker_server(df, table, settings)
    seal = server.seal if server is not None else None
    try:
        job = start_job(table, df.schema, partition_by=columns, marker_url=marker_url,
                        marker_token=marker_token, key=key, checks=checks,
                        validator=validator, error_sink=error_sink, task_hook=_task_hook,
                        metadata={"engine": "spark", "spark_app_id": _application_id(df),
                                  "marker_server": marker_url})
        try:
            if _frame is not None:  # ingest: its tasks read, write and return stats rows
                stats = _frame(job)
            else:
                assert not isinstance(df, Shape)
                stats = _grouped(df, columns, settings).mapInArrow(
                    _task_function(job.spec), stats_type())
            job_started = time.perf_counter()
            rows = stats.collect()
            job_seconds = time.perf_counter() - job_started
            results = results_from_rows(row.asDict() for row in rows)
            result = commit_job(job, results, seal)
        except BaseException as exc:
            raise abort_job(job, exc, seal)  # noqa: B904 (abort_job chains exc)
    finally:
        if server is not None:
            server.stop()
    result.timings["job"] = job_seconds
    result.duration = time.perf_counter() - started
    return result


def start_job(table: Table, schema: StructType, *, partition_by: Sequence[str] = (),
              marker_url: str | None = None, marker_token: str | None = None,
              key: str | None = None, checks: Mapping[str, str] | None = None,
              validator: BatchValidator | None = None,
              error_sink: ErrorSinkFactory | None = None, task_hook: TaskHook | None = None,
              metadata: Mapping[str, Any] | None = None) -> WriteJob:
    """Start a write on the driver: recover failed writes, open the instant (and the error
    instant), ready the markers. Shared by :func:`write` and the data source."""
    error_table = _error_table_spec(schema, table.settings, key, checks, validator)
    if error_table is not None and validator is None:  # the checks applied: pass rates
        metadata = {**(metadata or {}), "checks": sorted(checks or {})}
    job = WriteJob(table, partition_by=partition_by, marker_url=marker_url,
                   marker_token=marker_token, validator=validator, error_sink=error_sink,
                   task_hook=task_hook, error_table=error_table, metadata=metadata,
                   error_tables=ErrorTables(), schema=_written_schema(schema, table),
                   failfast=table.settings[config.INGEST_MODE] == "FAILFAST")
    return job.start()


def _written_schema(schema: StructType, table: Table) -> pa.Schema | None:
    """The Arrow columns the tasks write (timestamps in UTC, as they are stored), for the
    checks of the table's formats at the start; None for a table without formats. A
    column Arrow has no type for is refused there, in one line."""
    if not table.formats():
        return None
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for column in schema.fields:
        if column.name == ERROR_COLUMN:
            continue
        try:
            arrow = to_arrow_type(column.dataType, timezone="UTC")
        except Exception as exc:
            raise TableFormatError(
                f"column {column.name!r} of type {column.dataType.simpleString()} cannot be "
                f"published to the table's formats ({', '.join(table.formats())}): "
                f"{cause_line(exc)}") from None
        fields.append(pa.field(column.name, arrow, nullable=column.nullable))
    return pa.schema(fields)


def commit_job(job: WriteJob, results: Iterable[TaskResult],
               seal: Callable[[str], int | None] | None = None) -> CommitResult:
    """Job commit from exactly the winning attempts' results; `seal` first refuses any
    straggler's marker (batched markers; it returns None when nothing was sealed). On
    failure the caller runs :func:`abort_job`."""
    held = seal(job.instant) if seal is not None else None
    return job.commit(results, sealed=held is not None)


def abort_job(job: WriteJob, exc: BaseException,
              seal: Callable[[str], Any] | None = None) -> BaseException:
    """Roll the write back after `exc`; returns the exception the caller raises (a
    WriteAbortedError chaining `exc`, unless `exc` is markerstore's own)."""
    if seal is not None and job.instant:
        try:
            seal(job.instant)
        except Exception as seal_error:  # the rollback below still runs
            log.warning("could not seal instant %s: %s", job.instant, seal_error)
    _abort(job)
    if isinstance(exc, MarkerStoreError) or not isinstance(exc, Exception):
        return exc
    error = WriteAbortedError(
        f"write to {job.table.storage.url()} failed and was rolled back (instant "
        f"{job.instant}): {cause_line(exc)}")
    error.__cause__ = exc
    return error


def _error_table_spec(schema: StructType, settings: config.Settings, key: str | None,
                      checks: Mapping[str, str] | None, validator: BatchValidator | None
                      ) -> ErrorTableSpec | None:
    if not settings[config.ERROR_TABLE_ENABLED]:
        if key is not None or checks:
            raise ConfigError("key and checks route bad rows to the error table; enable it "
                              f"with {config.ERROR_TABLE_ENABLED}=true")
        return None
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    fields = [f for f in schema.fields if f.name != ERROR_COLUMN]
    arrow = to_arrow_schema(StructType(fields), timezone="UTC")
    return ErrorTableSpec(arrow, key, dict(checks or {}))


def _abort(job: WriteJob) -> None:
    try:
        job.abort()
    except Exception as exc:  # the write's own failure is what the caller must see
        log.error("rollback of instant %s failed (%s); `markerstore rollback %s` finishes "
                  "it", job.instant, exc, job.table.path)
