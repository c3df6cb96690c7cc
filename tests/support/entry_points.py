"""The two ways into a Spark write, for tests that run on both: the function
``markerstore.spark.write`` and the data source ``df.write.format("markerstore")``."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import markerstore.spark as ms
from markerstore.commit import CommitResult
from markerstore.commit.runner import TaskHook
from markerstore.errors import (
    ConfigError,
    TableFormatError,
    WriteAbortedError,
    WriteConflictError,
)
from markerstore.spark.source import MarkerStoreDataSource

ENTRIES = ["function", "format"]
_MARKERSTORE_ERRORS = (WriteConflictError, WriteAbortedError, TableFormatError, ConfigError)


def format_name(spark: Any, task_hook: TaskHook | None = None) -> str:
    """Register the data source (with a task hook: as a class of its own) and return its
    format name."""
    if task_hook is None:
        ms.register(spark)
        return "markerstore"
    name = f"markerstore_hooked_{uuid.uuid4().hex[:8]}"

    def source_name(cls: type) -> str:
        del cls
        return name

    hooked = type("HookedSource", (MarkerStoreDataSource,), {
        "name": classmethod(source_name), "task_hook": staticmethod(task_hook),
        "driver_host": "127.0.0.1", "__module__": "hooked_sources"})
    spark.dataSource.register(hooked)
    return name


def format_writer(df: Any, fmt: str, url: str, *, mode: str = "append",
                  partition_by: str | Sequence[str] | None = None,
                  options: Mapping[str, Any] | None = None,
                  storage_options: Mapping[str, Any] | None = None, key: str | None = None,
                  checks: Mapping[str, str] | None = None) -> Any:
    """`df.write.format(fmt)` with markerstore's arguments as options."""
    writer = df.write.format(fmt)
    if mode in ("error", "errorifexists"):  # Spark refuses these modes for Python sources
        writer = writer.mode("append").option("markerstore.write.conflict.mode", "fail")
    else:
        writer = writer.mode(mode)
    for k, v in (options or {}).items():
        writer = writer.option(k, str(v))
    if storage_options:
        writer = writer.option("markerstore.storage_options", json.dumps(storage_options))
    if partition_by:
        columns = [partition_by] if isinstance(partition_by, str) else list(partition_by)
        writer = writer.option("markerstore.write.partition_by", ",".join(columns))
    if key:
        writer = writer.option("markerstore.write.key", key)
    for name, sql in (checks or {}).items():
        writer = writer.option(f"markerstore.write.check.{name}", sql)
    return writer


def markerstore_error(exc: BaseException) -> BaseException:
    """markerstore's own error, as the Python worker raised it inside Spark's exception."""
    text = str(exc)
    for cls in _MARKERSTORE_ERRORS:
        found = re.search(rf"{cls.__name__}: ([^\n]*)", text)
        if found:
            error = cls(found.group(1))
            error.__cause__ = exc
            return error
    return exc


def write_with(entry: str, spark: Any, df: Any, url: str, *,
               partition_by: str | Sequence[str] | None = None, mode: str = "append",
               options: Mapping[str, Any] | None = None,
               storage_options: Mapping[str, Any] | None = None,
               key: str | None = None, checks: Mapping[str, str] | None = None,
               task_hook: TaskHook | None = None) -> CommitResult:
    """One write through `entry`; the format writer's result is the table's last commit."""
    if entry == "function":
        return ms.write(df, url, partition_by=partition_by, mode=mode, options=options,
                        storage_options=storage_options, key=key, checks=checks,
                        _task_hook=task_hook)
    fmt = format_name(spark, task_hook)
    writer = format_writer(df, fmt, url, mode=mode, partition_by=partition_by,
                           options=options, storage_options=storage_options, key=key,
                           checks=checks)
    try:
        writer.save(url)
    except Exception as exc:
        raise markerstore_error(exc) from exc
    result = ms.last_commit(url, storage_options)
    assert result is not None
    return result
