"""Ingest over Spark Connect: the write runs on Spark's driver, through the data source
(:mod:`markerstore.spark.connect`). Each Spark task gets one row, its number, and runs
the same :class:`~markerstore.ingest.task.IngestTask` as on a classic session, so no data
row crosses into the JVM; the commit runs on the driver with the tasks' results."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from typing import Any

from pyspark.sql.types import StructType

from markerstore.commit import CommitResult
from markerstore.ingest.plan import IngestPlan
from markerstore.spark.connect import ClientSource, save_through_source
from markerstore.spark.source import MarkerStoreWriter, SourceJob, TaskMessage, start_source_job


class IngestSource(ClientSource):
    """The data source of one ingest: its plan travels with the class."""

    plan: IngestPlan

    def writer(self, schema: StructType, overwrite: bool) -> IngestWriter:
        from pyspark.sql.pandas.types import from_arrow_schema

        plan = type(self).plan
        source = start_source_job(self.client_request(), from_arrow_schema(plan.target),
                                  overwrite, driver_host=self.driver_host,
                                  bind_host=self.bind_host, task_hook=type(self).task_hook)
        return IngestWriter(source, plan)


class IngestWriter(MarkerStoreWriter):
    """Each task: the ingest task of the numbers it is given; commit: the shared one."""

    def __init__(self, source: SourceJob, plan: IngestPlan) -> None:
        super().__init__(source)
        # The job, read afresh: source.job would stay cached in what Spark ships to tasks.
        self.task = plan.task(pickle.loads(source.job_bytes))

    def write(self, iterator: Any) -> TaskMessage:
        return TaskMessage(self.task.run(iterator))


def write_remote(session: Any, plan: IngestPlan, path: str, *, mode: str,
                 options: Mapping[str, Any], storage_options: Mapping[str, Any] | None,
                 task_hook: Any = None) -> CommitResult:
    """The ingest's write through its own data source on `session` (Spark Connect)."""
    tasks = len(plan.splits)
    return save_through_source(session.range(0, tasks, 1, tasks), path, mode=mode,
                               options=options, storage_options=storage_options,
                               partition_by=tuple(plan.columns), key=plan.key,
                               checks=plan.checks, task_hook=task_hook, base=IngestSource,
                               plan=plan)
