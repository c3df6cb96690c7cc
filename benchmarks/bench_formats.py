"""Table formats benchmark: what publishing each commit as a Delta version costs.

The same DataFrame (10M rows by default, 7 partition values) written by
``markerstore.spark.write`` to a local table without formats and to one with
``markerstore.table.formats=delta``, alternating, in one Spark application. Reports the
write's wall time with and without, and the publish alone (delta-rs's commit of the
version: footers read for statistics, one log entry), against the 10% budget of issue 31.
Rows: ``MARKERSTORE_BENCH_FORMATS_ROWS``. Run: ``python -m benchmarks.bench_formats
[--quick]``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

ROWS = int(os.environ.get("MARKERSTORE_BENCH_FORMATS_ROWS", "10000000"))
QUICK_ROWS = 500_000
BUDGET = 0.10


def _spark() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench-formats")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.memory", "2g")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _timed_publish() -> list[float]:
    """Seconds of every publish in this process (the driver publishes): the whole of it,
    as job commit's cleanup and recovery at the write's start call it (the formats' logs
    read, the footers, the Delta commit)."""
    from markerstore.commit import cleanup, recovery

    spent: list[float] = []
    original = cleanup.publish

    def publish(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    cleanup.publish = publish
    recovery.publish = publish
    return spent


def run(quick: bool = False) -> str:
    import markerstore.spark as ms

    rows = QUICK_ROWS if quick else ROWS
    repeats = 2 if quick else 3
    spark = _spark()
    df = spark.range(0, rows, numPartitions=2).selectExpr(
        "id", "id % 7 AS k", "rand(42) AS x", "concat('s-', cast(id % 1000 AS string)) AS s")
    base = tempfile.mkdtemp(prefix="bench-formats-")
    spent = _timed_publish()
    kinds = ("none", "delta", "delta,iceberg")
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    publish: dict[str, list[float]] = {kind: [] for kind in kinds[1:]}
    files = 0
    try:
        ms.write(df.limit(10_000), os.path.join(base, "warm"), partition_by=["k"],
                 options={"markerstore.table.formats": "delta,iceberg"})
        for round_ in range(repeats):
            for kind in kinds:
                folder = os.path.join(base, f"{kind.replace(',', '-')}-{round_}")
                options = {"markerstore.table.formats": kind} if kind != "none" else {}
                before = len(spent)
                started = time.perf_counter()
                result = ms.write(df, folder, partition_by=["k"], options=options)
                timings[kind].append(time.perf_counter() - started)
                if kind != "none":
                    publish[kind].append(sum(spent[before:]))
                    files = len(result.files)
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return _markdown(rows, files, repeats, timings, publish)


def _markdown(rows: int, files: int, repeats: int, timings: dict[str, list[float]],
              publish: dict[str, list[float]]) -> str:
    none = statistics.median(timings["none"])
    load = os.getloadavg()
    lines = [
        "## Table formats: publishing each commit as a Delta version and an Iceberg snapshot",
        "",
        f"`markerstore.spark.write` of {rows:,} rows (id, k, x, s; partitioned by k: 7 "
        f"values, {files} files) to a local table, without formats, with "
        "`markerstore.table.formats=delta` and with `delta,iceberg`, alternating, "
        f"{repeats} rounds, medians; Spark local[2]. The publish is all that publishing "
        "adds to the write, timed in the driver: the formats' logs read when the write "
        "starts (recovery publishes what a crash left) and after the commit, each file's "
        "Parquet footer read for its statistics, delta-rs's commit of one version and "
        "pyiceberg's commit of one snapshot (its SQLite catalog under `.markerstore/`). "
        f"Load average during the run: {load[0]:.1f} (1 min) / {load[1]:.1f} (5 min) on "
        f"{os.cpu_count()} cores.",
        "", "| write | wall s (median) | rounds | the publish alone, s (median) | of the "
        "write without formats |", "|---|---:|---|---:|---:|",
        f"| no formats | {none:.2f} | {', '.join(f'{t:.2f}' for t in timings['none'])} "
        "| | |"]
    verdicts = []
    for kind, spent in publish.items():
        pub = statistics.median(spent)
        share = pub / none
        verdicts.append(f"{kind}: {'met' if share <= BUDGET else '**not met**'}")
        lines.append(f"| {kind} | {statistics.median(timings[kind]):.2f} | "
                     f"{', '.join(f'{t:.2f}' for t in timings[kind])} | {pub:.3f} "
                     f"| {share:.1%} |")
    lines += ["", f"Against the budget of {BUDGET:.0%} of the write: {'; '.join(verdicts)}. "
              "The wall-time differences of the writes also hold the machine's noise.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
