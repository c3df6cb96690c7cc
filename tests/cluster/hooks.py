"""Task hooks the cluster scenarios ship to the executors (importable there: the workers
get this worktree on PYTHONPATH). Each acts on the first attempt of Spark partition 1
only, after the task has written (and on S3 uploaded, without completing) its files."""

from __future__ import annotations

import os
from typing import Any

from tests.support.spark_crash_writer import kill_executor_jvm


def _first_attempt_of_partition_1(name: str, attempt: Any) -> bool:
    return name == "committed" and attempt.partition_id == 1 and attempt.attempt_number == 0


def exit_after_upload(name: str, attempt: Any, files: Any) -> None:
    """The Python worker dies after the uploads: no abort runs, Spark retries the task."""
    if _first_attempt_of_partition_1(name, attempt):
        os._exit(1)


def kill_executor(name: str, attempt: Any, files: Any) -> None:
    """SIGKILL the executor JVM (the whole executor goes, mid-write)."""
    if _first_attempt_of_partition_1(name, attempt):
        kill_executor_jvm()
        os._exit(1)


HOOKS = {"exit_after_upload": exit_after_upload, "kill_executor": kill_executor}
