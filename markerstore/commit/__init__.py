"""The commit protocol: task side, job side, staging, conflict modes, recovery.

Pure Python (no pyspark): any engine that can hand a task's Arrow batches to
:func:`run_task` and the winning attempts' reports to :class:`JobCommitter` gets the
protocol. Recovery is :func:`recover` (and :func:`rollback` for one instant); an error
table is reached through :mod:`markerstore.commit.ports`, passed in by the entry points.
Importing this package registers nothing.
"""

from markerstore.commit.conflict import APPEND, FAIL, REPLACE, SAVE_MODES
from markerstore.commit.driver import WriteJob
from markerstore.commit.job import STEPS, JobCommitter, add_step_hook, remove_step_hook
from markerstore.commit.names import FileName
from markerstore.commit.plan import CommitPlan, read_plan
from markerstore.commit.ports import ErrorTables, ErrorWrite
from markerstore.commit.recovery import (
    SweepReport,
    finish_terminal_plans,
    recover,
    rollback,
    sweep,
)
from markerstore.commit.result import CommitResult
from markerstore.commit.runner import TaskSpec, run_task
from markerstore.commit.staging import MULTIPART, NONE, RENAME, resolve_mode, staging_for
from markerstore.commit.stats import (
    STATS_DDL,
    STATS_SCHEMA,
    FileStats,
    PendingUpload,
    TaskAttempt,
    TaskResult,
    TaskSummary,
    results_from_rows,
)
from markerstore.commit.task import BatchValidator, ErrorSink, ErrorSinkFactory, TaskWriter

__all__ = [
    "APPEND", "FAIL", "MULTIPART", "NONE", "RENAME", "REPLACE", "SAVE_MODES", "STATS_DDL",
    "STATS_SCHEMA", "STEPS", "BatchValidator", "CommitPlan", "CommitResult", "ErrorSink",
    "ErrorSinkFactory", "ErrorTables", "ErrorWrite", "FileName", "FileStats", "JobCommitter",
    "PendingUpload",
    "SweepReport", "TaskAttempt", "TaskResult", "TaskSpec", "TaskSummary", "TaskWriter", "WriteJob",
    "add_step_hook", "finish_terminal_plans", "read_plan", "recover", "remove_step_hook",
    "resolve_mode", "results_from_rows", "rollback", "run_task", "staging_for", "sweep",
]
