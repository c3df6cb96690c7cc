"""Ingest over Spark Connect: the write's driver side runs where Spark's driver runs.

A Connect client is not the driver: executors may not reach it, and it has no
SparkContext. So the ingest goes through the ``markerstore`` data source, whose
``writer()`` Spark calls on its driver: there the job starts (its job host, with the
marker server on the driver's address), each Spark task gets one row, its number, and runs
the same :class:`~markerstore.ingest.task.IngestTask` as on a classic session (no data row
crosses into the JVM), and the commit runs on the driver with the tasks' results. The
client then reads the commit back from the table, by the write's UUID.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import StructType

from markerstore import config
from markerstore.commit import CommitResult
from markerstore.errors import ConfigError, WriteAbortedError
from markerstore.ingest.plan import IngestPlan
from markerstore.spark.source import (
    MarkerStoreDataSource,
    MarkerStoreWriter,
    SourceJob,
    SourceRequest,
    TaskMessage,
    last_commit,
    source_class,
    start_source_job,
)
from markerstore.spark.writer import DriverAddress, _settings, cause_line


class IngestSource(MarkerStoreDataSource):
    """The data source of one ingest: its plan and options travel with the class."""

    source_name = "markerstore_ingest"
    plan: IngestPlan
    settings: dict[str, Any] = {}
    storage_options: dict[str, Any] = {}

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def writer(self, schema: StructType, overwrite: bool) -> IngestWriter:
        from pyspark.sql.pandas.types import from_arrow_schema

        cls = type(self)
        plan = cls.plan
        request = SourceRequest(str(self.options["path"]), dict(cls.settings),
                                dict(cls.storage_options), tuple(plan.columns), plan.key,
                                dict(plan.checks))
        source = start_source_job(request, from_arrow_schema(plan.target), overwrite,
                                  driver_host=self.driver_host, bind_host=self.bind_host,
                                  task_hook=cls.task_hook)
        return IngestWriter(source, plan)

    def streamWriter(self, schema: StructType, overwrite: bool  # noqa: N802 (Spark's name)
                     ) -> Any:
        raise ConfigError("an ingest is a batch write")


class IngestWriter(MarkerStoreWriter):
    """Each task: the ingest task of the numbers it is given; commit: the shared one."""

    def __init__(self, source: SourceJob, plan: IngestPlan) -> None:
        super().__init__(source)
        self.task = plan.task(source.job)

    def write(self, iterator: Any) -> TaskMessage:
        return TaskMessage(self.task.run(iterator))


def write_remote(session: Any, plan: IngestPlan, path: str, *, mode: str,
                 options: Mapping[str, Any], storage_options: Mapping[str, Any] | None,
                 task_hook: Any = None) -> CommitResult:
    """Run the ingest's write through the data source of `session` (Spark Connect) and
    return its commit. A failed write is rolled back on the driver; it raises
    WriteAbortedError with the cause's line."""
    settings = _settings(options, mode)  # the conflict mode of `mode`, checked here
    explicit = dict(settings.explicit())
    write_uuid = explicit.setdefault(config.WRITE_UUID, str(uuid.uuid4()))
    address = DriverAddress.of(session)
    name = f"markerstore_ingest_{uuid.uuid4().hex[:12]}"
    cls = source_class(address.advertise, address.bind, base=IngestSource, plan=plan,
                       settings=explicit, storage_options=dict(storage_options or {}),
                       source_name=name, task_hook=task_hook)
    session.dataSource.register(cls)
    tasks = len(plan.splits)
    writer = session.range(0, tasks, 1, tasks).write.format(name)
    try:
        writer.mode("overwrite" if settings[config.CONFLICT_MODE] == "replace"
                    else "append").save(path)
    except Exception as exc:
        raise WriteAbortedError(f"ingest into {path} failed and was rolled back: "
                                f"{cause_line(exc)}") from exc
    result = last_commit(path, storage_options, write_uuid=write_uuid)
    if result is None:
        raise WriteAbortedError(f"ingest into {path}: Spark reported success but no commit "
                                f"of write {write_uuid} is in the table")
    return result
