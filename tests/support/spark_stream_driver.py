"""A Spark driver running a streaming query into the markerstore sink, for the crash tests.

Argument: JSON {input, table, checkpoint, kill_after_batch (or null), options}. The input
folder's Parquet files are read one per micro-batch (availableNow). With
`kill_after_batch`, the sink's commit of that batch completes its instant and then the
driver (this process and its JVM) is killed with SIGKILL: before Spark's checkpoint
records the batch as committed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from pyspark.sql import SparkSession

from markerstore.spark.source import MarkerStoreDataSource, MarkerStoreStreamWriter

ARGS: dict[str, Any] = json.loads(sys.argv[1])
DRIVER_PID = os.getpid()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


class KillingStreamWriter(MarkerStoreStreamWriter):
    kill_after = ARGS.get("kill_after_batch")
    driver_pid = DRIVER_PID

    def commit(self, messages: Any, batchId: int) -> None:  # noqa: N803 (Spark's name)
        super().commit(messages, batchId)
        if batchId == self.kill_after:
            # This commit worker's parent is Spark's Python daemon, whose parent is the
            # driver JVM: kill the JVM and the Python driver before the checkpoint commit.
            jvm = _parent(os.getppid())
            os.kill(self.driver_pid, signal.SIGKILL)
            os.kill(jvm, signal.SIGKILL)


class KillingSource(MarkerStoreDataSource):
    @classmethod
    def name(cls) -> str:
        return "markerstore_killing"

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802
        writer = super().streamWriter(schema, overwrite)
        killing = KillingStreamWriter.__new__(KillingStreamWriter)
        killing.__dict__.update(writer.__dict__)
        return killing


def main() -> None:
    spark = (SparkSession.builder.master("local[2,4]").appName("markerstore-stream-crash")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KillingSource)
    schema = spark.read.parquet(ARGS["input"]).schema
    stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
              .parquet(ARGS["input"]))
    writer = (stream.writeStream.format("markerstore_killing")
              .option("checkpointLocation", ARGS["checkpoint"]).trigger(availableNow=True))
    for key, value in ARGS.get("options", {}).items():
        writer = writer.option(key, str(value))
    query = writer.start(ARGS["table"])
    query.awaitTermination()
    print(json.dumps({"batches": query.lastProgress["batchId"] + 1
                      if query.lastProgress else 0}), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
