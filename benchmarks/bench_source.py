"""Data source benchmark: df.write.format("markerstore") against markerstore.spark.write
on the same DataFrame (alternating, one Spark application), and the streaming sink's
micro-batches: batches per second and the marker and commit share of each batch.
Run: ``python -m benchmarks.bench_source [--quick]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.bench_writer import _frame, _spark


def bench_batch(spark: Any, rows: int, partitions: int, rounds: int) -> dict[str, Any]:
    import markerstore.spark as ms

    ms.register(spark)
    base = tempfile.mkdtemp(prefix="bench-source-")
    times: dict[str, list[float]] = {"function": [], "format": []}
    try:
        df = _frame(spark, rows, partitions).cache()
        df.count()
        ms.write(df.limit(10_000), os.path.join(base, "warm-fn"))
        df.limit(10_000).write.format("markerstore").mode("append").save(
            os.path.join(base, "warm-fmt"))
        for i in range(rounds):  # alternate, so that noise hits both alike
            folder = os.path.join(base, f"fn-{i}")
            started = time.perf_counter()
            assert ms.write(df, folder).rows_written == rows
            times["function"].append(time.perf_counter() - started)
            shutil.rmtree(folder, ignore_errors=True)
            folder = os.path.join(base, f"fmt-{i}")
            started = time.perf_counter()
            df.write.format("markerstore").mode("append").save(folder)
            times["format"].append(time.perf_counter() - started)
            last = ms.last_commit(folder)
            assert last is not None and last.rows_written == rows
            shutil.rmtree(folder, ignore_errors=True)
        df.unpersist()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    median = {k: statistics.median(v) for k, v in times.items()}
    return {"rows": rows, "partitions": partitions, "rounds": rounds, "times": times,
            "median": median, "overhead": median["format"] / median["function"] - 1}


def _recording_source(log_path: str) -> type:
    """The sink, recording each batch's CommitResult timings in `log_path`."""
    from harness.spark_sources import hooked_stream_source

    def committed(self: Any, result: Any, batch_id: int) -> None:
        with open(log_path, "a") as out:
            out.write(json.dumps({"batch": batch_id, "timings": result.timings,
                                  "rows": result.rows_written}) + "\n")

    return hooked_stream_source("markerstore_recording", committed, "bench_recording")


def bench_stream(spark: Any, batches: int, rows: int, marker_type: str) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    log_path = str(base / "commits.jsonl")
    try:
        inputs = base / "in"
        inputs.mkdir()
        for n in range(batches):
            ids = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
            pq.write_table(pa.table({"id": ids, "k": pc.bit_wise_and(ids, 7),
                                     "s": pc.cast(ids, pa.string())}),
                           inputs / f"part-{n:03d}.parquet")
        spark.dataSource.register(_recording_source(log_path))
        schema = spark.read.parquet(str(inputs)).schema
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(
            str(inputs))
        started = time.perf_counter()
        query = (stream.writeStream.format("markerstore_recording")
                 .option("checkpointLocation", str(base / "ck"))
                 .option("markerstore.write.markers.type", marker_type)
                 .trigger(availableNow=True).start(str(base / "t")))
        query.awaitTermination()
        seconds = time.perf_counter() - started
        progress = {p["batchId"]: p["durationMs"] for p in query.recentProgress}
        commits = [json.loads(line) for line in Path(log_path).read_text().splitlines()]
    finally:
        shutil.rmtree(base, ignore_errors=True)
    cores = os.cpu_count() or 2
    per_batch = []
    for commit in commits:
        wall = progress.get(commit["batch"], {}).get("addBatch", 0) / 1000
        timings = commit["timings"]
        per_batch.append({"batch": commit["batch"], "wall": wall,
                          "markers": timings.get("task_markers", 0.0) / cores,
                          "commit": timings.get("commit", 0.0)})
    return {"batches": len(commits), "rows": rows, "seconds": seconds,
            "per_second": len(commits) / seconds, "marker_type": marker_type,
            "per_batch": per_batch}


def run(quick: bool = False) -> str:
    rows, rounds = (200_000, 2) if quick else (1_000_000, 3)
    batches, batch_rows = (3, 20_000) if quick else (10, 100_000)
    spark = _spark(os.cpu_count() or 2)
    try:
        batch = bench_batch(spark, rows, 4, rounds)
        # The application's first streaming query pays Spark's warm-up (about 15 s here),
        # whichever marker type it uses: a small unmeasured query takes it first.
        bench_stream(spark, 2, 1_000, "direct")
        streams = [bench_stream(spark, batches, batch_rows, t) for t in ("batched", "direct")]
    finally:
        spark.stop()
    lines = ["## Spark data source (`format(\"markerstore\")`)", "",
             f"Batch: {batch['rows']:,} rows in {batch['partitions']} partitions, local disk, "
             f"{batch['rounds']} alternating rounds of each entry point on one cached "
             "DataFrame, direct markers.", "",
             "| entry point | median s | rounds (s) |", "|---|---|---|"]
    for name in ("function", "format"):
        lines.append(f"| {'markerstore.spark.write' if name == 'function' else 'df.write.format'}"
                     f" | {batch['median'][name]:.2f} | "
                     f"{', '.join(f'{t:.2f}' for t in batch['times'][name])} |")
    target = "met" if batch["overhead"] <= 0.05 else "NOT met"
    lines += ["", f"Format writer against the function: {batch['overhead']:+.1%} "
              f"(target within 5%: {target}). The format writer also starts a job host "
              "process per write (heartbeat, marker server); a streaming query starts one "
              "for the query.", ""]
    for stream in streams:
        walls = [b["wall"] for b in stream["per_batch"]] or [0.0]
        markers = [b["markers"] / b["wall"] for b in stream["per_batch"] if b["wall"]]
        commits = [b["commit"] / b["wall"] for b in stream["per_batch"] if b["wall"]]
        lines += [f"Streaming, {stream['marker_type']} markers: {stream['batches']} "
                  f"micro-batches of {stream['rows']:,} rows (one Parquet file each, "
                  "availableNow, after an unmeasured warm-up query): "
                  f"{stream['per_second']:.2f} batches/s over "
                  f"{stream['seconds']:.1f} s; per batch (sink write + commit) median "
                  f"{statistics.median(walls):.2f} s, markers "
                  f"{statistics.median(markers or [0]):.1%} and job commit "
                  f"{statistics.median(commits or [0]):.1%} of it (median over batches).", ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
