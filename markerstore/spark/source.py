"""The ``markerstore`` Spark data source (PySpark's Python Data Source API).

    markerstore.spark.register(spark)           # importing markerstore.spark does it too
    df.write.format("markerstore").mode("append").option(k, v).save(path)
    df.writeStream.format("markerstore").option("checkpointLocation", c).start(path)

Same task and job code as :func:`markerstore.spark.write` (:func:`start_job`,
:func:`run_spark_task`, :func:`commit_job`, :func:`abort_job`). Spark runs ``writer()`` in
one Python worker on the driver and ``commit``/``abort`` in another, so the job is
started in ``writer()`` and travels, pickled, in the writer; its heartbeat and marker
server live in a job host process (:mod:`markerstore.spark.jobhost`), not in a worker
Spark may kill. A streaming sink gets a fresh ``streamWriter()`` for each micro-batch's
tasks and another for its commit: the batch's job starts when the tasks' writer is
pickled (only that one is), and reaches commit in the tasks' messages. A streaming
query's job host lives for the query: the first batch launches it, later batches reuse
it (a dead one is replaced), each batch releases its instants' heartbeats when done.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import secrets
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from markerstore import config
from markerstore.commit import CommitResult, TaskResult, TaskSpec, WriteJob
from markerstore.commit.runner import TaskHook
from markerstore.errors import ConfigError
from markerstore.option_values import json_or_text
from markerstore.spark.jobhost import JobHost, attach_query_host
from markerstore.spark.writer import (
    DriverAddress,
    abort_job,
    checked_partition_columns,
    commit_job,
    run_spark_task,
    settings_for_mode,
    start_job,
)
from markerstore.table import Table
from markerstore.timeline import COMPLETED, INFLIGHT, REQUESTED

log = logging.getLogger(__name__)
NAME = "markerstore"


# --- options ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceRequest:
    """A data source write's options, sorted out."""

    path: str
    options: dict[str, Any]
    storage_options: dict[str, Any] = field(default_factory=dict)
    partition_by: tuple[str, ...] = ()
    key: str | None = None
    checks: dict[str, str] = field(default_factory=dict)
    query_id: str | None = None


def parse_options(options: Mapping[str, str]) -> SourceRequest:
    """Split Spark's (lowercased) options into the table path, markerstore options (any
    spelling, any case), storage options, partition columns, key, checks, query id."""
    path = options.get("path")
    if not path:
        raise ConfigError("no table path: use .save(path) or .start(path)")
    settings: dict[str, Any] = {}
    storage: dict[str, Any] = {}
    checks: dict[str, str] = {}
    partition_by: tuple[str, ...] = ()
    key = query_id = checkpoint = None
    for raw, value in options.items():
        name = raw.lower()
        if name in ("path", "checkpointlocation"):
            checkpoint = value if name == "checkpointlocation" else checkpoint
        elif name == config.SOURCE_STORAGE_OPTIONS:
            parsed = json_or_text(value)
            if not isinstance(parsed, dict):
                raise ConfigError(f"option {raw}: expected a JSON object, got {value!r}")
            storage.update(parsed)
        elif name.startswith(config.SOURCE_STORAGE_OPTION_PREFIX):
            storage[name[len(config.SOURCE_STORAGE_OPTION_PREFIX):]] = json_or_text(value)
        elif name.startswith(config.SOURCE_CHECK_PREFIX):
            checks[name[len(config.SOURCE_CHECK_PREFIX):]] = value
        elif name == config.SOURCE_PARTITION_BY:
            partition_by = tuple(c.strip() for c in value.split(",") if c.strip())
        elif name == config.SOURCE_KEY:
            key = value.strip() or None
        elif name == config.STREAM_QUERY_ID:
            query_id = value.strip() or None
        else:
            settings[config.canonical_key_any_case(raw)] = value
    config.resolve(settings)  # every value parsed now: a bad one fails before any work
    if query_id is None and checkpoint:
        digest = hashlib.sha256(checkpoint.rstrip("/").encode()).hexdigest()[:16]
        query_id = f"checkpoint-{digest}"
    return SourceRequest(str(path), settings, storage, partition_by, key, checks, query_id)


# --- the job, carried from writer() to the tasks and to commit ----------------------------------
@dataclass(frozen=True)
class SourceJob:
    """A started write: what tasks need (`spec`), and the driver's WriteJob (pickled once;
    only commit and abort open it) with its job host."""

    spec: TaskSpec
    job_bytes: bytes
    host: JobHost
    query_id: str | None = None

    @cached_property
    def job(self) -> WriteJob:
        job: WriteJob = pickle.loads(self.job_bytes)
        return job

    def commit(self, results: list[TaskResult], batch_id: int | None = None
               ) -> CommitResult | None:
        """Job commit with exactly the winning attempts' results (the messages Spark
        passes); a streaming batch already committed by an earlier run commits nothing
        and rolls this replay back. Stops the job host in any case."""
        job = self.job
        try:
            if batch_id is not None:
                done = committed_batch(job.table, self.query_id, batch_id)
                if done is not None:
                    log.warning("batch %d of query %s was committed as instant %s; rolling "
                                "back its replay %s", batch_id, self.query_id, done,
                                job.instant)
                    abort_job(job, RuntimeError("replayed batch"), self.host.seal)
                    return None
                job.metadata["stream"] = {"query_id": self.query_id, "batch_id": batch_id,
                                          "job_host_pid": self.host.pid}
            try:
                return commit_job(job, results, self.host.seal)
            except BaseException as exc:
                raise abort_job(job, exc, self.host.seal)  # noqa: B904 (chains exc)
        finally:
            self.release()

    def abort(self, reason: str) -> None:
        try:
            abort_job(self.job, RuntimeError(reason), self.host.seal)
        finally:
            self.release()

    def release(self) -> None:
        """The write is over: stop its host (a query's host: release its instants)."""
        job = self.job
        instants = [job.instant]
        if job.error_commit is not None:
            instants.append(job.error_commit.instant)
        self.host.release(instants)


def committed_batch(table: Table, query_id: str | None, batch_id: int) -> str | None:
    """The completed instant holding batch `batch_id` (or a later one) of the query, if
    any. A query's batches complete in order, so its latest completed instant decides."""
    for info in reversed(table.timeline()):
        if info.state != COMPLETED:
            continue
        stream = table.commit_metadata(info.instant).get("stream") or {}
        if stream.get("query_id") == query_id:
            return info.instant if int(stream.get("batch_id", -1)) >= batch_id else None
    return None


def start_source_job(request: SourceRequest, schema: StructType, overwrite: bool, *,
                     driver_host: str, bind_host: str | None = None,
                     task_hook: TaskHook | None = None, streaming: bool = False) -> SourceJob:
    """On the driver: start the job host, then the job (shared :func:`start_job`), then
    hand the instants' heartbeats to the host. Its marker server binds `bind_host` (Spark's
    spark.driver.bindAddress, default `driver_host`) and executors reach it at
    `driver_host` (spark.driver.host) unless ``markerstore.markers.server.host`` says
    otherwise; always with a token."""
    settings = settings_for_mode(request.options, "overwrite" if overwrite else "append")
    columns = checked_partition_columns(request.partition_by, schema.names,
                                        f"{config.SOURCE_PARTITION_BY}:")
    if streaming and request.query_id is None:
        raise ConfigError("a streaming write needs a checkpointLocation (or the option "
                          f"{config.STREAM_QUERY_ID})")
    table = Table(request.path, request.storage_options, settings)
    batched = settings[config.MARKERS_TYPE] == "batched"
    address = DriverAddress(bind_host or driver_host, driver_host).for_settings(settings)
    token = secrets.token_urlsafe(32)
    proc = None
    if streaming:  # the query's host: found, or launched by the query's first batch
        assert request.query_id is not None
        host = attach_query_host(table, request.query_id, serve_markers=batched,
                                 bind_host=address.bind, advertise=address.advertise,
                                 token=token)
    else:
        proc = JobHost.launch(table, serve_markers=batched, bind_host=address.bind,
                              advertise=address.advertise, token=token)
        # Batched markers: the tasks need the server's URL, so wait for it. Direct
        # markers: the host takes the heartbeats in the background, while the tasks run.
        host = JobHost.ready(proc) if batched else JobHost(proc.pid)
    try:
        metadata = {"engine": "spark", "interface": "stream" if streaming else "format",
                    "marker_server": host.url}
        job = start_job(table, schema, partition_by=columns, marker_url=host.url,
                        marker_token=host.token, key=request.key, checks=request.checks,
                        task_hook=task_hook, metadata=metadata)
    except BaseException:
        if proc is not None:
            host.stop()
        raise
    instants = [(table, job.instant)]
    if job.error_commit is not None:
        instants.append((job.error_commit.table, job.error_commit.instant))
    if batched or proc is None:  # a query host takes the beats at once (one request)
        _hand_over(host, proc, instants)
    else:
        threading.Thread(target=_hand_over, args=(host, proc, instants), daemon=True,
                         name=f"markerstore-handover-{job.instant}").start()
    from pyspark import cloudpickle  # the job may hold closures (validators, test hooks)

    return SourceJob(job.spec, cloudpickle.dumps(job), host, request.query_id)


def _hand_over(host: JobHost, proc: Any | None, instants: list[tuple[Table, str]]) -> None:
    """Give the instants' heartbeats to the job host, then stop beating them here. If the
    host cannot take them (it failed, or the write is already over and stopped it), stop
    here all the same: a live write without a beat is rolled back by the next writer and
    its commit then fails (never the reverse)."""
    try:
        if host.url is None and proc is not None:
            JobHost.ready(proc)
        host.beat(proc, instants)
    except Exception as exc:
        over = _over(*instants[0])  # a write done before its host was up stops it early
        (log.debug if over else log.warning)(
            "the job host did not take the heartbeats of %s: %s", [i for _, i in instants],
            exc)
        host.stop()
    for owner, instant in instants:
        owner.hand_over_heartbeat(instant)
        try:
            if owner.state(instant) not in (REQUESTED, INFLIGHT):
                owner.heartbeats.delete(instant)
        except Exception as exc:
            log.warning("instant %s: could not tidy its heartbeat: %s", instant, exc)


def _over(table: Table, instant: str) -> bool:
    try:
        return table.state(instant) not in (REQUESTED, INFLIGHT)
    except Exception:
        return False


# --- Spark's interfaces ----------------------------------------------------------------------
class TaskMessage(WriterCommitMessage):
    """What one task attempt reports: its TaskResult (and, streaming, the batch's job)."""

    def __init__(self, result: TaskResult, source: SourceJob | None = None) -> None:
        self.result = result
        self.source = source


class MarkerStoreWriter(DataSourceArrowWriter):
    """A batch write: tasks run the shared task writer; commit the shared job commit."""

    def __init__(self, source: SourceJob) -> None:
        self.source = source

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskMessage:
        return TaskMessage(run_spark_task(self.source.spec, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        results = [m.result for m in messages if isinstance(m, TaskMessage)]
        self.source.commit(results)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.source.abort("Spark aborted the write (a task failed)")


class MarkerStoreStreamWriter(DataSourceStreamArrowWriter):
    """One micro-batch: one instant. The job starts when Spark pickles this writer for
    the batch's tasks; commit finds it in the tasks' messages (or, for a batch without
    tasks, in the query's state file on the driver)."""

    def __init__(self, request: SourceRequest, schema: StructType, overwrite: bool,
                 driver_host: str, task_hook: TaskHook | None,
                 bind_host: str | None = None) -> None:
        self.request = request
        self.schema = schema
        self.overwrite = overwrite
        self.driver_host = driver_host
        self.bind_host = bind_host
        self.task_hook = task_hook
        self.source: SourceJob | None = None

    def __getstate__(self) -> dict[str, Any]:
        if self.source is None:
            self.source = start_source_job(self.request, self.schema, self.overwrite,
                                           driver_host=self.driver_host,
                                           bind_host=self.bind_host,
                                           task_hook=self.task_hook, streaming=True)
            _save_state(self.source)
        return dict(self.__dict__)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskMessage:
        assert self.source is not None, "the batch's job was not started"
        return TaskMessage(run_spark_task(self.source.spec, iterator), self.source)

    def _source(self, messages: list[WriterCommitMessage | None]) -> SourceJob | None:
        for message in messages:
            if isinstance(message, TaskMessage) and message.source is not None:
                return message.source
        return _load_state(self.request.query_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        source = self._source(messages)
        if source is None:
            raise ConfigError(f"batch {batchId}: no started job to commit")
        results = [m.result for m in messages if isinstance(m, TaskMessage)]
        result = source.commit(results, batch_id=batchId)
        if result is not None:
            log.info("batch %d of query %s: %r", batchId, self.request.query_id, result)
            self.committed(result, batchId)

    def committed(self, result: CommitResult, batch_id: int) -> None:
        """Called in the commit worker after each batch's commit (a subclass may record
        the CommitResult: it lives in a Spark worker, not in your process)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        source = self._source(messages)
        if source is not None:
            source.abort(f"Spark aborted micro-batch {batchId}")


def _state_file(query_id: str | None) -> str:
    digest = hashlib.sha256(str(query_id).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"markerstore-stream-{digest}.pickle")


def _save_state(source: SourceJob) -> None:
    from pyspark import cloudpickle

    path = _state_file(source.query_id)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        cloudpickle.dump(source, out)


def _load_state(query_id: str | None) -> SourceJob | None:
    try:
        with open(_state_file(query_id), "rb") as handle:
            source: SourceJob = pickle.load(handle)
    except (FileNotFoundError, EOFError, pickle.UnpicklingError):
        return None
    if source.job.table.state(source.job.instant) not in (REQUESTED, INFLIGHT):
        return None
    return source


class MarkerStoreDataSource(DataSource):
    """``format("markerstore")``: batch writes and a streaming sink."""

    # register() sets the session's spark.driver.host and spark.driver.bindAddress
    driver_host = "127.0.0.1"
    bind_host: str | None = None
    task_hook: TaskHook | None = None  # tests inject task failures here

    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: StructType, overwrite: bool) -> MarkerStoreWriter:
        request = parse_options(self.options)
        return MarkerStoreWriter(start_source_job(
            request, schema, overwrite, driver_host=self.driver_host,
            bind_host=self.bind_host, task_hook=type(self).task_hook))

    def streamWriter(self, schema: StructType, overwrite: bool  # noqa: N802 (Spark's name)
                     ) -> MarkerStoreStreamWriter:
        request = parse_options(self.options)
        return MarkerStoreStreamWriter(request, schema, overwrite, self.driver_host,
                                       type(self).task_hook, self.bind_host)


def source_class(driver_host: str | None = None, bind_host: str | None = None,
                 base: type[MarkerStoreDataSource] = MarkerStoreDataSource,
                 **attributes: Any) -> type[MarkerStoreDataSource]:
    """The data source class (`base` or a subclass) for a session whose driver listens on
    `bind_host` and is reached at `driver_host`; `attributes` travel with the class."""
    host = driver_host or "127.0.0.1"
    return type(f"Session{base.__name__}", (base,),
                {"driver_host": host, "bind_host": bind_host or None,
                 "__module__": base.__module__, **attributes})


def register(spark: Any) -> None:
    """Register ``format("markerstore")`` with `spark` (a SparkSession, classic or Spark
    Connect): the class carries the live session's driver address."""
    address = DriverAddress.of(spark)
    spark.dataSource.register(source_class(address.advertise, address.bind))


def last_commit(path: str, storage_options: Mapping[str, Any] | None = None, *,
                write_uuid: str | None = None) -> CommitResult | None:
    """The latest completed commit of the table (with `write_uuid`: that write's), as a
    CommitResult (from its commit metadata: the data source's commit runs in a Spark
    worker, not in your process), with where the table's formats stand now
    (``formats``, ``published``: read from them)."""
    from markerstore.formats import status
    from markerstore.table import DataFile

    table = Table(path, storage_options)
    completed = [i.instant for i in table.timeline() if i.state == COMPLETED]
    if write_uuid is not None:
        completed = next(([i] for i in reversed(completed)
                          if table.commit_metadata(i).get("write_uuid") == write_uuid), [])
    if not completed:
        return None
    meta = table.commit_metadata(completed[-1])
    files = [DataFile(e["path"], e.get("size"), e.get("rows"), e.get("checksum"))
             for e in meta.get("files", [])]
    return CommitResult(
        path=table.storage.url(), instant=completed[-1], write_uuid=str(meta.get("write_uuid")),
        files=files, rows_written=sum(f.rows or 0 for f in files),
        error_records=dict(meta.get("error_records") or {}),
        files_cleaned=int((meta.get("counts") or {}).get("files_cleaned") or 0),
        duration=float((meta.get("metrics") or {}).get("commit_seconds") or 0.0),
        conflict_mode=str(meta.get("conflict_mode", "append")),
        replaced_files=list(meta.get("replaced_files", [])),
        error_files=list(meta.get("error_files", [])), formats=list(status(table).values()))
