"""A Spark driver process for the crash tests.

`python -m tests.support.spark_crash_writer '<json>'` writes a small DataFrame with
markerstore.spark to each of ``targets`` (url, storage_options):

* ``{"kill_driver_at": STEP}``: SIGKILLs itself (the driver) at that step of job commit;
* ``{"kill_executor": true, "master": "local-cluster[2,1,1024]"}``: the first attempt of
  Spark partition 1 SIGKILLs its executor JVM after writing (and uploading) its files; the
  write must still commit exactly the winners. Prints the CommitResult as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def kill_executor_jvm() -> None:
    """SIGKILL the executor JVM this Python worker runs under (an ancestor process)."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
        if b"CoarseGrainedExecutorBackend" in cmdline:
            os.kill(pid, signal.SIGKILL)
            return
        with open(f"/proc/{pid}/stat") as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no executor JVM among this worker's ancestors")


def main() -> None:
    args = json.loads(sys.argv[1])
    from pyspark.sql import SparkSession

    import markerstore.spark as ms
    from markerstore.commit import add_step_hook

    spark = (SparkSession.builder.master(args.get("master", "local[2,4]"))
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.executor.memory", "512m").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    step = args.get("kill_driver_at")

    def crash(name: str, info: Mapping[str, Any]) -> None:
        if name == step and (name != "publish" or info["done"] == max(1, info["total"] // 2)):
            os.kill(os.getpid(), signal.SIGKILL)

    add_step_hook(crash)
    hook = None
    if args.get("kill_executor"):
        def hook(name: str, attempt: Any, files: Any) -> None:
            if name == "committed" and attempt.partition_id == 1 and attempt.attempt_number == 0:
                kill_executor_jvm()
                os._exit(1)  # no cleanup: the attempt's files and uploads stay behind

    df = spark.range(0, args["rows"], numPartitions=4).selectExpr(
        "id", "id % 2 AS day", "concat('row-', cast(id AS string)) AS payload")
    for target in args["targets"]:  # one write per table, in one Spark application
        result = ms.write(df, target["url"], partition_by=args.get("partition_by"),
                          mode=args.get("mode", "append"), options=args["options"],
                          storage_options=target["storage_options"], _task_hook=hook)
        print(json.dumps(result.to_dict()), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
