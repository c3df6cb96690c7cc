"""Writes from a Spark Connect client: the write's driver side runs on Spark's driver.

A Connect client is not the driver: it has no SparkContext, and executors may not reach
it (another host, a notebook behind a gateway). So :func:`markerstore.spark.write` (and
ingest) over Spark Connect go through the ``markerstore`` data source, whose ``writer()``
Spark calls on its driver: there the job starts (its job host holds the heartbeats and
the marker server, on the driver's address), the tasks run the same task writer, and the
commit runs with exactly the winning attempts' results. The write's arguments travel in
a data source class of its own (registered under a name of its own); the client reads
the commit back from the table, by the write's UUID.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql.types import StructType

from markerstore import config
from markerstore.commit import CommitResult
from markerstore.commit.runner import TaskHook
from markerstore.errors import ConfigError, WriteAbortedError
from markerstore.spark import writer
from markerstore.spark.source import (
    MarkerStoreDataSource,
    MarkerStoreWriter,
    SourceRequest,
    last_commit,
    source_class,
    start_source_job,
)
from markerstore.spark.writer import DriverAddress, cause_line, is_connect, settings_for_mode


class ClientSource(MarkerStoreDataSource):
    """The data source of one client's write: its request (all but the path, which
    ``save(path)`` gives) travels with the class."""

    source_name = "markerstore_client"
    request = SourceRequest("", {})

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def client_request(self) -> SourceRequest:
        return dataclasses.replace(type(self).request, path=str(self.options["path"]))

    def writer(self, schema: StructType, overwrite: bool) -> MarkerStoreWriter:
        return MarkerStoreWriter(start_source_job(
            self.client_request(), schema, overwrite, driver_host=self.driver_host,
            bind_host=self.bind_host, task_hook=type(self).task_hook))

    def streamWriter(self, schema: StructType, overwrite: bool  # noqa: N802 (Spark's name)
                     ) -> Any:
        raise ConfigError("a client's write is a batch write; a streaming query uses "
                          "writeStream.format('markerstore')")


@functools.wraps(writer.write)
def write(df: Any, path: str, **arguments: Any) -> CommitResult:
    """:func:`markerstore.spark.writer.write` on a classic session; over Spark Connect,
    the same write through the data source on Spark's driver."""
    if not is_connect(df.sparkSession):
        return writer.write(df, path, **arguments)
    if arguments.get("validator") is not None or arguments.get("error_sink") is not None:
        raise ConfigError("validator= and error_sink= run in this process; over Spark "
                          "Connect use key= and checks= (the error table)")
    if arguments.get("_frame") is not None:
        raise TypeError("_frame is for a classic session")
    partition_by = writer.partition_columns(df, arguments.pop("partition_by", None))
    return save_through_source(
        df, path, partition_by=partition_by, task_hook=arguments.pop("_task_hook", None),
        **{k: v for k, v in arguments.items() if k not in ("validator", "error_sink")})


def save_through_source(df: Any, path: str, *, mode: str = "append",
                        options: Mapping[str, Any] | None = None,
                        storage_options: Mapping[str, Any] | None = None,
                        partition_by: Sequence[str] = (), key: str | None = None,
                        checks: Mapping[str, str] | None = None,
                        task_hook: TaskHook | None = None,
                        base: type[ClientSource] = ClientSource,
                        **attributes: Any) -> CommitResult:
    """Write `df` to `path` through a data source class (`base`, with `attributes`) of
    its own, and return the commit. A failed write is rolled back on Spark's driver (the
    source's abort); it raises WriteAbortedError with the cause's line."""
    settings = settings_for_mode(options, mode)  # the conflict mode of `mode`, checked here
    explicit = dict(settings.explicit())
    write_uuid = str(explicit.setdefault(config.WRITE_UUID, str(uuid.uuid4())))
    request = SourceRequest("", explicit, dict(storage_options or {}), tuple(partition_by),
                            key, dict(checks or {}))
    session = df.sparkSession
    address = DriverAddress.of(session)
    name = f"markerstore_client_{uuid.uuid4().hex[:12]}"
    cls = source_class(address.advertise, address.bind, base=base, request=request,
                       source_name=name, task_hook=task_hook, **attributes)
    session.dataSource.register(cls)
    replace = settings[config.CONFLICT_MODE] == "replace"
    try:
        df.write.format(name).mode("overwrite" if replace else "append").save(path)
    except Exception as exc:
        raise WriteAbortedError(f"write to {path} failed and was rolled back: "
                                f"{cause_line(exc)}") from exc
    result = last_commit(path, storage_options, write_uuid=write_uuid)
    if result is None:
        raise WriteAbortedError(f"write to {path}: Spark reported success, but no commit of "
                                f"write {write_uuid} is in the table")
    return result
