"""Table formats benchmark: what publishing each commit as a Delta version costs, and
whether that cost grows with the table's history.

1. The same DataFrame (10M rows by default, 7 partition values) written by
   ``markerstore.spark.write`` to a local table without formats and to one with
   ``markerstore.table.formats=delta``, alternating, in one Spark application. Reports the
   write's wall time with and without, and the publish alone (delta-rs's commit of the
   version: footers read for statistics, one log entry), against the 10% budget of issue
   31. Rows: ``MARKERSTORE_BENCH_FORMATS_ROWS``.
2. 1,000 commits in a row (``MARKERSTORE_BENCH_FORMATS_COMMITS``) to a table that
   publishes Delta, and to one that publishes Iceberg, through the commit protocol itself
   (no Spark: a small batch per commit): what publishing costs each write (the formats
   checked when it starts, recovery's publish, the publish after its commit), the last 10
   commits against the first 10 (after the one that creates the format's table), against
   issue 36's 1.5x. Two workloads: each commit replaces one of 7 partitions (the history
   grows, the table does not), and each appends (both grow).

Run: ``python -m benchmarks.bench_formats [--quick] [--history]`` (``--history``: the
second part alone).
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
COMMITS = int(os.environ.get("MARKERSTORE_BENCH_FORMATS_COMMITS", "1000"))
QUICK_COMMITS = 100
GROWTH_BUDGET = 1.5  # the last commits' publish cost against the first ones'
WINDOW = 10
# A window of 10 commits holds one Delta checkpoint (every 10 versions) and one Iceberg
# manifest merge or snapshot expiry, or none (every 16): its mean is that one event's. A
# window of 100 holds each periodic piece of work as often at the start as at the end.
STEADY_WINDOW = 100


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
    return _spark_writes(quick) + "\n" + history(quick)


def _spark_writes(quick: bool) -> str:
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


def _timed_format_work() -> list[tuple[float, float]]:
    """(wall, CPU) seconds of every piece of format work in this process: the formats
    checked when a write starts, recovery's publish at its start, the publish after its
    commit and the expiry after it (Iceberg's snapshots, replaced files). CPU time is
    the process's (every thread: delta-rs works in its own), which other work on a
    shared machine does not inflate."""
    from markerstore.commit import cleanup, driver, recovery

    spent: list[tuple[float, float]] = []

    def timed(original: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent.append((time.perf_counter() - wall, time.process_time() - cpu))
        return call

    cleanup.publish = timed(cleanup.publish)
    cleanup.expire = timed(cleanup.expire)
    recovery.publish = timed(recovery.publish)
    driver.check_write = timed(driver.check_write)
    return spent


def _commits(folder: str, formats: str, commits: int, mode: str, retention: str,
             spent: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """`commits` writes in a row to a new table publishing `formats`; the format work of
    each ((wall, CPU) seconds)."""
    import pyarrow as pa

    from markerstore import Table
    from markerstore.commit import TaskAttempt, WriteJob, run_task

    table = Table(folder, None, {"markerstore.table.formats": formats,
                                 "markerstore.table.replaced_files.retention": retention})
    per_write = []
    for n in range(commits):
        ids = list(range(n * 20, n * 20 + 20))
        # the first commit fills every day, so that every later replace replaces one
        days = [i % 7 for i in ids] if n == 0 else [n % 7] * 20
        batch = pa.record_batch({"id": pa.array(ids, pa.int64()),
                                 "day": pa.array(days, pa.int64()),
                                 "payload": pa.array([f"row-{i}" for i in ids])})
        before = len(spent)
        job = WriteJob(table, partition_by=["day"], conflict_mode=mode,
                       schema=batch.schema).start()
        job.commit([run_task(job.spec, [batch], TaskAttempt(0, 1, 0, n))])
        done = spent[before:]
        per_write.append((sum(w for w, _ in done), sum(c for _, c in done)))
    return per_write


# (workload, formats, the replaced files' retention): with a retention of 0 a replace's
# snapshots and tombstones go at once, so what grows is the history alone; with the default
# (7d) every replace of the run stays for time travel, which both formats' metadata holds.
RETENTIONS = os.environ.get("MARKERSTORE_BENCH_FORMATS_RETENTIONS", "0,7d").split(",")
RUNS = [(mode, formats, retention) for retention in RETENTIONS
        for mode in ("replace", "append") for formats in ("delta", "iceberg")
        if retention == "0" or mode == "replace"]


def history(quick: bool = False) -> str:
    commits = QUICK_COMMITS if quick else COMMITS
    spent = _timed_format_work()
    base = tempfile.mkdtemp(prefix="bench-formats-history-")
    found: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    try:
        for mode, formats, retention in RUNS:
            folder = os.path.join(base, f"{mode}-{formats}-{retention}")
            found[mode, formats, retention] = _commits(folder, formats, commits, mode,
                                                       retention, spent)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return _history_markdown(commits, found)


def _history_markdown(commits: int,
                      found: dict[tuple[str, str, str], list[tuple[float, float]]]
                      ) -> str:
    load = os.getloadavg()
    lines = [
        f"## Table formats: publish cost over {commits:,} commits in a row", "",
        f"{commits:,} commits in a row to a local table publishing Delta, and to one "
        "publishing Iceberg (its SQLite catalog under `.markerstore/`), each commit a batch "
        "of 20 rows through the commit protocol itself (no Spark), partitioned by day (7 "
        "values). Timed per write: all the format work (the formats checked when the write "
        "starts, recovery's publish at its start, the publish after its commit and the "
        "expiry after it: Iceberg's superseded snapshots, replaced files). "
        "The first commit writes every day; then `replace`: each commit replaces one "
        "partition, so the history grows and the table does not; `append`: each adds a "
        "file, so both grow. First: commits 2 to "
        f"{WINDOW + 1} (the first creates the format's table); last: the last {WINDOW}; "
        f"and the same over {STEADY_WINDOW} commits (2 to {STEADY_WINDOW + 1}, and the "
        f"last {STEADY_WINDOW}). A window of {WINDOW} holds one Delta checkpoint (every 10 "
        "versions, O(live files and tombstones)) and one Iceberg manifest merge or "
        "snapshot expiry (every 16), or none, so its mean is mostly that one event's; "
        f"over {STEADY_WINDOW} each periodic piece of work counts as often at the start "
        "as at the end. "
        "The verdicts are on CPU time (the process's, all threads), which other work on a "
        "shared machine does not inflate; wall time beside it. "
        f"Load average during the run: {load[0]:.1f} (1 min) / {load[1]:.1f} (5 min) on "
        f"{os.cpu_count()} cores.", "",
        "`retention`: `markerstore.table.replaced_files.retention` (0: a replace's "
        "snapshots and tombstones go at once, and an append's superseded snapshots 16 at "
        "a time; 7d, the default: every commit of the run stays for time travel, so each "
        "format's metadata grows with it, as Delta's and Iceberg's own writers' do within "
        "their retention).", "",
        f"| workload | format | retention | first {WINDOW}, CPU ms a write | last {WINDOW} "
        f"| last / first | first {STEADY_WINDOW} | last {STEADY_WINDOW} | last / first "
        f"| wall ms first, last {STEADY_WINDOW} | verdict ({WINDOW}; {STEADY_WINDOW}) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for (mode, formats, retention), per_write in found.items():
        def mean(rows: list[tuple[float, float]], i: int) -> float:
            return statistics.mean(r[i] for r in rows) * 1000

        cells, verdicts = [], []
        for size in (WINDOW, STEADY_WINDOW):
            head, tail = per_write[1:size + 1], per_write[-size:]
            ratio = mean(tail, 1) / mean(head, 1)
            cells.append(f"{mean(head, 1):.1f} | {mean(tail, 1):.1f} | {ratio:.2f}x")
            verdicts.append("met" if ratio <= GROWTH_BUDGET else "**not met**")
        head, tail = per_write[1:STEADY_WINDOW + 1], per_write[-STEADY_WINDOW:]
        lines.append(f"| {mode} | {formats} | {retention} | {cells[0]} | {cells[1]} | "
                     f"{mean(head, 0):.0f}, {mean(tail, 0):.0f} | {'; '.join(verdicts)} "
                     f"(budget {GROWTH_BUDGET}x) |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if "--history" in sys.argv:
        print(history(quick="--quick" in sys.argv))
    else:
        print(run(quick="--quick" in sys.argv))
