"""The test code that runs on a cluster host: started with ``ip netns exec HOST python -m
tests.cluster.runner``, it reads one JSON command per line on stdin and answers each with
one line ``@@ {"ok": ..., "result"|"error": ...}`` on stdout (Spark may print other
lines). One runner is one Spark driver (or Spark Connect client) at most.

Commands (``op``): session, stop, bucket, write, facts, completed, source_files,
stream_start, stream_wait, quit.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

STATE: dict[str, Any] = {}
KEY_EVERY = 50  # every 50th row has a null key: an error record when the key is "id"


def frame(spark: Any, rows: int, partitions: int, slow_ms: int = 0) -> Any:
    """`rows` rows (id, day, payload), every KEY_EVERY-th id null; `slow_ms` per row in the
    JVM (Thread.sleep by reflection) stretches the write so faults land in the middle."""
    # reflect gives Thread.sleep's "null"; its first 0 characters join the payload, which
    # keeps the call from being optimized away.
    pause = (f"left(reflect('java.lang.Thread', 'sleep', cast({slow_ms} AS bigint)), 0)"
             if slow_ms else "''")
    columns = [f"CASE WHEN id % {KEY_EVERY} = {KEY_EVERY - 1} THEN NULL ELSE id END AS id",
               "id % 3 AS day", f"concat('row-', cast(id AS string), {pause}) AS payload"]
    return spark.range(0, rows, numPartitions=partitions).selectExpr(*columns)


def op_session(remote: str | None = None, conf: dict[str, str] | None = None,
               app_name: str = "markerstore-cluster") -> dict[str, Any]:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if remote:
        builder = builder.remote(remote)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    import markerstore.spark as ms

    ms.register(spark)
    STATE["spark"] = spark
    info: dict[str, Any] = {"driver_host": spark.conf.get("spark.driver.host", None)}
    if not remote:
        spark.sparkContext.setLogLevel("WARN")
        info["app_id"] = spark.sparkContext.applicationId
        info["master"] = spark.sparkContext.master
    return info


def op_stop() -> None:
    spark = STATE.pop("spark", None)
    if spark is not None:
        spark.stop()


def op_bucket(endpoint: str, name: str) -> str:
    import boto3

    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=name)
    return name


def op_write(writer: str, url: str, storage_options: dict[str, Any], rows: int,
             partitions: int = 4, markers: str = "batched", error_table: bool = True,
             slow_ms: int = 0, hook: str | None = None,
             options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One write with the function writer or the format writer; the outcome either way."""
    import markerstore.spark as ms
    from tests.cluster.hooks import HOOKS

    spark = STATE["spark"]
    settings = {"markerstore.write.markers.type": markers,
                "markerstore.write.error.table.enabled": str(error_table).lower(),
                "markerstore.write.target_file_size": 8000, **(options or {})}
    df = frame(spark, rows, partitions, slow_ms)
    started = time.monotonic()
    try:
        if writer == "function":
            result = ms.write(df, url, partition_by="day", options=settings, key="id",
                              storage_options=storage_options,
                              _task_hook=HOOKS[hook] if hook else None)
            outcome: dict[str, Any] = {"committed": True, "result": result.to_dict()}
        else:
            if hook:
                raise ValueError("task hooks go with the function writer")
            (df.write.format("markerstore").mode("append")
             .option("markerstore.write.partition_by", "day")
             .option("markerstore.write.key", "id")
             .option("markerstore.storage_options", json.dumps(storage_options))
             .options(**{k: str(v) for k, v in settings.items()}).save(url))
            last = ms.last_commit(url, storage_options)
            outcome = {"committed": True, "result": last.to_dict() if last else None}
    except Exception as exc:  # the scenario may expect a failed, rolled back write
        outcome = {"committed": False, "error": f"{type(exc).__name__}: {first_line(exc)}"}
    outcome["seconds"] = round(time.monotonic() - started, 2)
    return outcome


def op_facts(url: str, storage_options: dict[str, Any]) -> dict[str, Any]:
    """What a reader finds in the table: the rows by pyarrow and by DuckDB, the files on
    storage against the committed ones, leftovers, the instants, the error rows."""
    import duckdb

    import errortable
    from markerstore import Table
    from tests.support.commit_checks import (
        data_files,
        live_paths,
        marker_folders,
        staged_files,
        uploads,
    )

    table = Table(url, storage_options)
    states: dict[str, int] = {}
    for instant in table.timeline():
        states[instant.state] = states.get(instant.state, 0) + 1
    facts: dict[str, Any] = {"states": states, "data_files": data_files(table),
                             "committed_files": live_paths(table),
                             "markers": marker_folders(table), "staged": staged_files(table),
                             "uploads": [u.key for u in uploads(table)]}
    if not states.get("completed"):
        facts.update(pyarrow_ids=[], duckdb_ids=[], errors=0)
        return facts
    snapshot = table.snapshot()
    arrow = snapshot.dataset().to_table(columns=["id", "payload"])
    facts["pyarrow_ids"] = sorted(arrow.column("id").to_pylist())
    facts["payload_mismatches"] = sum(
        1 for i, p in zip(arrow.column("id").to_pylist(), arrow.column("payload").to_pylist(),
                          strict=True) if p != f"row-{i}")
    con = duckdb.connect()
    con.register_filesystem(table.storage.fs)
    listing = ", ".join("'" + u.replace("'", "''") + "'" for u in snapshot.urls)
    facts["duckdb_ids"] = sorted(r[0] for r in con.sql(
        f"SELECT id FROM read_parquet([{listing}], hive_partitioning = true)").fetchall())
    try:
        facts["errors"] = int(errortable.read(url.rstrip("/") + "_errors", storage_options)
                              .aggregate("count(*)").fetchall()[0][0])
    except Exception as exc:  # no error table: reported, the test decides
        facts["errors"] = f"{type(exc).__name__}: {first_line(exc)}"
    return facts


def op_completed(url: str, storage_options: dict[str, Any]) -> dict[str, int]:
    from markerstore import Table

    states: dict[str, int] = {}
    for instant in Table(url, storage_options).timeline():
        states[instant.state] = states.get(instant.state, 0) + 1
    return states


def op_source_files(folder: str, files: int, rows: int, storage_options: dict[str, Any]
                    | None = None) -> int:
    """`files` Parquet files of `rows` rows each (ids continue across files) in `folder`
    (a local folder, or an S3 URL with `storage_options`)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(folder, **(storage_options or {}))
    fs.makedirs(root, exist_ok=True)
    for n in range(files):
        ids = list(range(n * rows, (n + 1) * rows))
        batch = pa.table({"id": pa.array([None if i % KEY_EVERY == KEY_EVERY - 1 else i
                                          for i in ids], pa.int64()),
                          "day": pa.array([i % 3 for i in ids], pa.int64()),
                          "payload": pa.array([f"row-{i}" for i in ids])})
        with fs.open(f"{root}/part-{n:04d}.parquet", "wb") as handle:
            pq.write_table(batch, handle)
    return files * rows


def op_stream_start(source: str, url: str, checkpoint: str, storage_options: dict[str, Any],
                    options: dict[str, Any] | None = None) -> str:
    """A streaming query into the markerstore sink: one source file per micro-batch."""
    spark = STATE["spark"]
    schema = "id BIGINT, day BIGINT, payload STRING"
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
    writer = (stream.writeStream.format("markerstore").trigger(availableNow=True)
              .option("checkpointLocation", checkpoint)
              .option("markerstore.write.partition_by", "day")
              .option("markerstore.write.key", "id")
              .option("markerstore.storage_options", json.dumps(storage_options)))
    for key, value in (options or {}).items():
        writer = writer.option(key, str(value))
    query = writer.start(url)
    STATE["query"] = query
    return str(query.id)


def op_stream_wait(seconds: float) -> dict[str, Any]:
    query = STATE["query"]
    finished = query.awaitTermination(seconds)
    progress = query.lastProgress
    return {"finished": bool(finished), "batch": progress["batchId"] if progress else None}


def first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:400]
    return type(exc).__name__


OPS: dict[str, Callable[..., Any]] = {
    "session": op_session, "stop": op_stop, "bucket": op_bucket, "write": op_write,
    "facts": op_facts, "completed": op_completed, "source_files": op_source_files,
    "stream_start": op_stream_start, "stream_wait": op_stream_wait}


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever else prints goes to the log, not the answers
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            answer = {"ok": True, "result": OPS[op](**command)}
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {first_line(exc)}",
                      "traceback": traceback.format_exc()[-4000:]}
        out.write("@@ " + json.dumps(answer, default=str) + "\n")
        out.flush()
    op_stop()


if __name__ == "__main__":
    main()
