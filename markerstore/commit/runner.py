"""Running the task side in an executor: a picklable :class:`TaskSpec` and
:func:`run_task`, which any engine can call with an iterator of Arrow batches.

Executors build their own Storage (cached per process: Spark reuses Python workers) and
their own markers handle (direct, or a client of the driver's marker server); they never
touch the timeline, so a task costs no timeline request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.commit.staging import staging_for
from markerstore.commit.stats import FileStats, TaskAttempt, TaskResult
from markerstore.commit.task import BatchValidator, ErrorSinkFactory, TaskWriter
from markerstore.markers import DirectWriteMarkers, WriteMarkers
from markerstore.storage import Storage

# Called at named points of a task attempt (tests inject failures with it).
TaskHook = Callable[[str, TaskAttempt, list[FileStats]], None]

_storages: dict[str, Storage] = {}
_storages_lock = threading.Lock()


@dataclass(frozen=True)
class TaskSpec:
    """Everything a task attempt needs, shipped from the driver to executors."""

    table_url: str
    instant: str
    write_uuid: str
    staging_mode: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    partition_by: tuple[str, ...] = ()
    marker_type: str = "direct"
    marker_url: str | None = None
    marker_token: str | None = None
    validator: BatchValidator | None = None
    error_sink: ErrorSinkFactory | None = None
    task_hook: TaskHook | None = None
    formats: tuple[str, ...] = ()       # the table's formats (Delta, Iceberg)

    def settings(self) -> config.Settings:
        return config.resolve(dict(self.options))


def storage_for(spec: TaskSpec) -> Storage:
    """The executor's Storage for the table (one per process and table)."""
    key = json.dumps([spec.table_url, dict(spec.storage_options), dict(spec.options)],
                     sort_keys=True, default=str)
    with _storages_lock:
        storage = _storages.get(key)
        if storage is None:
            settings = spec.settings()
            storage = Storage(spec.table_url, spec.storage_options,
                              retries=settings[config.STORAGE_RETRIES],
                              retry_base_delay=settings[config.STORAGE_RETRY_BASE_DELAY_MS]
                              / 1000)
            _storages[key] = storage
        return storage


def markers_for(spec: TaskSpec, storage: Storage) -> WriteMarkers:
    if spec.marker_type == "batched":
        from markerstore.server.client import MarkerClient

        if not spec.marker_url:
            raise ValueError("batched markers need the marker server's URL")
        settings = spec.settings()
        fallback = bool(settings[config.BATCHED_FALLBACK_DIRECT])
        table = None
        if fallback:  # direct markers on the table's storage if the server is unreachable
            from markerstore.table import Table

            table = Table(spec.table_url, spec.storage_options, settings)
        client: WriteMarkers = MarkerClient(
            spec.marker_url, spec.instant, table=table, fallback=fallback, initialize=False,
            token=spec.marker_token,
            timeout=settings[config.CLIENT_TIMEOUT_MS] / 1000,
            retries=settings[config.CLIENT_RETRIES],
            connect_timeout=settings[config.CLIENT_CONNECT_TIMEOUT_MS] / 1000)
        return client
    return DirectWriteMarkers(storage, spec.instant, initialize=False)


def task_writer(spec: TaskSpec, attempt: TaskAttempt) -> TaskWriter:
    """The TaskWriter of one task attempt: its storage, staging, markers and hooks."""
    storage = storage_for(spec)
    settings = spec.settings()
    staging = staging_for(storage, spec.instant, spec.write_uuid, settings, spec.staging_mode)
    markers = markers_for(spec, storage)
    return TaskWriter(markers, staging, attempt, partition_by=spec.partition_by,
                      settings=settings, validator=spec.validator,
                      error_sink=spec.error_sink, formats=spec.formats)


def run_task(spec: TaskSpec, batches: Iterable[pa.RecordBatch],
             attempt: TaskAttempt) -> TaskResult:
    """Write one task attempt's batches and commit the task; on any failure abort it
    (delete its files, abort its uploads) and re-raise."""
    writer = task_writer(spec, attempt)
    try:
        for batch in batches:
            writer.write(batch)
        result = writer.commit()
        if spec.task_hook is not None:
            spec.task_hook("committed", attempt, result.files)
        return result
    except BaseException:
        writer.abort()
        raise
