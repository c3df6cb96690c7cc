"""A writer process that kills itself (SIGKILL) at one step of job commit, and
:func:`crash_write`, which runs it.

Usage: python -m tests.support.crash_writer '<json: url, storage_options, options, step,
partition_by, conflict_mode, rows, start>'. Prints the instant and write UUID before
committing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from markerstore import Table
from markerstore.commit import TaskAttempt, WriteJob, add_step_hook, run_task

OLD, NEW = 600, 900  # rows committed before the crash, rows of the crashed write


def crash_write(table: Table, step: str, *, options: dict[str, Any] | None = None,
                partition_by: list[str] | None = None, mode: str = "replace"
                ) -> dict[str, Any]:
    """Run a write in a child process that SIGKILLs itself at `step`."""
    args = {"url": table.path, "storage_options": table.storage.storage_options,
            # One completing thread: a crash in the middle of publishing leaves some files
            # published and some not.
            "options": {**table.settings.explicit(), "markerstore.write.commit.threads": 1,
                        **(options or {})}, "step": step,
            "partition_by": partition_by or [], "conflict_mode": mode, "rows": NEW,
            "start": 10_000}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-m", "tests.support.crash_writer", json.dumps(args)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == -9, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines and "instant" in lines[0], proc.stdout + proc.stderr[-3000:]
    return dict(lines[0])


def main() -> None:
    args = json.loads(sys.argv[1])
    step = args["step"]

    def crash(name: str, info: Mapping[str, Any]) -> None:
        if name != step:
            return
        if name == "publish" and info["done"] != max(1, info["total"] // 2):
            return
        os.kill(os.getpid(), signal.SIGKILL)

    add_step_hook(crash)
    table = Table(args["url"], args["storage_options"], args["options"])
    marker_url = None
    if table.settings["markerstore.write.markers.type"] == "batched":
        from markerstore.server import MarkerServer

        marker_url = MarkerServer(table, "127.0.0.1", 0).start()  # dies with this process
    job = WriteJob(table, partition_by=args["partition_by"],
                   conflict_mode=args["conflict_mode"], marker_url=marker_url).start()
    print(json.dumps({"instant": job.instant, "write_uuid": job.write_uuid}), flush=True)
    rows, start, tasks = args["rows"], args["start"], 3
    per = rows // tasks
    results = []
    for pid in range(tasks):
        ids = list(range(start + pid * per, start + (pid + 1) * per))
        batch = pa.record_batch({"id": pa.array(ids, pa.int64()),
                                 "day": pa.array([i % 2 for i in ids], pa.int64()),
                                 "payload": pa.array([f"row-{i:08d}" for i in ids])})
        # A losing attempt first (its output stays: the winner is the second attempt).
        run_task(job.spec, [batch], TaskAttempt(pid, 1, 0, 100 + pid))
        results.append(run_task(job.spec, [batch], TaskAttempt(pid, 1, 1, 200 + pid)))
    job.commit(results)
    print(json.dumps({"committed": True}), flush=True)


if __name__ == "__main__":
    main()
