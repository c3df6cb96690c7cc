"""Ingest benchmark: `markerstore ingest` against the Spark job a user would write by hand,
with DuckDB alone as the floor (issue 15).

Side by side in one Spark application (`local[2]`), alternating rounds, local disk:
the hand-written Spark job, markerstore's ingest (markers, error table, atomic commit)
and the DuckDB job, on JSON lines and on CSV (about 3% bad lines); then parse+validate
alone per core, the peak RSS of a Python worker on one big file, and the cold CLI case
(fresh processes). Run: ``python -m benchmarks.run --only ingest [--quick]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks import ingest_cold
from benchmarks import ingest_jobs as jobs

CORES = 2


def _session() -> Any:
    from markerstore.ingest.pipeline import spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return spark_session(f"local[{CORES}]")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def side_by_side(spark: Any, base: str, fmt: str, rows: int, rounds: int) -> dict[str, Any]:
    src = os.path.join(base, f"src-{fmt}")
    if fmt == "csv":
        jobs.make_csv(src, rows)
    else:
        jobs.make_json(src, rows)
    size = sum(os.path.getsize(os.path.join(src, f)) for f in os.listdir(src))
    warm = os.path.join(base, f"warm-{fmt}")
    jobs.spark_job(spark, src, warm + "-spark", fmt)  # JIT, workers, caches: not measured
    warmed = jobs.markerstore_job(spark, src, warm + "-ms")
    for folder in (warm + "-spark", warm + "-ms", warm + "-ms_errors"):
        shutil.rmtree(folder, ignore_errors=True)
    times: dict[str, list[float]] = {"spark": [], "markerstore": [], "duckdb": [],
                                     "empty": []}
    splits, tasks = warmed.source_tasks, warmed.spark_tasks  # splits packed into tasks
    details: list[dict[str, float]] = []
    loads = []
    for i in range(rounds):
        loads.append(os.getloadavg()[0])
        # Each job starts with the disk idle (`os.sync()`), so that none pays for the
        # writeback of the one before it (markerstore's fsyncs would wait for it).
        os.sync()
        out = os.path.join(base, f"{fmt}-spark-{i}")
        times["spark"].append(jobs.spark_job(spark, src, out, fmt))
        shutil.rmtree(out, ignore_errors=True)
        os.sync()
        out = os.path.join(base, f"{fmt}-ms-{i}")
        started = time.perf_counter()
        result = jobs.markerstore_job(spark, src, out)
        times["markerstore"].append(time.perf_counter() - started)
        details.append(_phases(result, times["markerstore"][-1]))
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(out + "_errors", ignore_errors=True)
        os.sync()
        out = os.path.join(base, f"{fmt}-duck-{i}")
        times["duckdb"].append(jobs.duckdb_job(src, out, fmt, CORES))
        shutil.rmtree(out, ignore_errors=True)
        times["empty"].append(jobs.empty_job(spark, tasks))
        _progress(f"{fmt} round {i}", {k: v[-1] for k, v in times.items()}, details[-1])
    best = {k: min(v) for k, v in times.items()}
    median = {k: statistics.median(v) for k, v in times.items()}
    fastest = details[times["markerstore"].index(best["markerstore"])]
    return {"fmt": fmt, "rows": rows, "bytes": size, "times": times, "best": best,
            "median": median, "detail": fastest, "loads": loads,
            "ratio_best": best["spark"] / best["markerstore"],
            "ratio_median": median["spark"] / median["markerstore"],
            "floor_best": best["markerstore"] / best["duckdb"], "splits": splits,
            "tasks": tasks}


def _progress(label: str, *values: Any) -> None:
    """Each measurement on stdout as it is made (a long run's figures survive it)."""
    print(f"   {label}: {json.dumps(values, default=str)}", flush=True)


def _phases(result: Any, wall: float) -> dict[str, float]:
    """Where an ingest's time goes: task phases (task-seconds over the cores), markers and
    the job commit."""
    t = result.commit.timings
    phases = {k[len("task_ingest_"):]: v / CORES for k, v in t.items()
              if k.startswith("task_ingest_")}
    phases["markers"] = t.get("task_markers", 0.0) / CORES
    phases["parquet"] = t.get("task_write", 0.0) / CORES
    phases["commit"] = t.get("commit", 0.0)
    phases["job"] = t.get("job", 0.0)
    phases["wall"] = wall
    phases["rows_written"] = result.commit.rows_written
    phases["errors"] = sum(result.error_records.values())
    return phases


def parse_rate(base: str, rows: int) -> dict[str, float]:
    """Parse + validate alone (no writing), one process: records per CPU-second."""
    import errortable
    from markerstore.cli import sample
    from markerstore.commit import TaskSpec
    from markerstore.ingest.schema import ddl_to_arrow
    from markerstore.ingest.sources import list_tasks
    from markerstore.ingest.task import IngestTask

    src = os.path.join(base, "src-json")
    validator = errortable.Validator(ddl_to_arrow(sample.SCHEMA_DDL), sample.KEY,
                                     [sample.PARTITION_BY], sample.CHECKS)
    run = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"), validator,
                     errortable.CaptureContext)
    tasks = list_tasks(src)[:2]
    seconds: dict[str, float] = {}
    from markerstore.ingest.task import _Timer

    started = time.process_time()
    count = 0
    for task in tasks:
        ctx = errortable.CaptureContext(task_attempt="bench", source_file=task.url)
        for good, errors in run.results(task, None, ctx, _Timer(seconds)):
            count += good.num_rows + (errors.num_rows if errors is not None else 0)
    cpu = time.process_time() - started
    return {"records": count, "cpu": cpu, "rate": count / cpu,
            **{k[len("ingest_"):]: v for k, v in seconds.items()}}


def worker_rss(spark: Any, base: str, size: int) -> dict[str, Any]:
    """Peak RSS of the Python workers ingesting one file of `size` bytes."""
    big = os.path.join(base, "big")
    os.makedirs(big, exist_ok=True)
    first = sorted(os.listdir(os.path.join(base, "src-json")))[0]
    jobs.make_big_json(os.path.join(big, "one.json"), size,
                       os.path.join(base, "src-json", first))
    log = os.path.join(base, "rss.jsonl")
    started = time.perf_counter()
    result = jobs.markerstore_job(spark, big, os.path.join(base, "big-out"),
                                  hook=jobs.rss_hook(log))
    seconds = time.perf_counter() - started
    with open(log) as handle:
        peaks = [json.loads(line)["rss_mb"] for line in handle]
    shutil.rmtree(big, ignore_errors=True)
    shutil.rmtree(os.path.join(base, "big-out"), ignore_errors=True)
    shutil.rmtree(os.path.join(base, "big-out_errors"), ignore_errors=True)
    return {"bytes": os.path.getsize(log) and size, "splits": result.source_tasks,
            "tasks": len(peaks),
            "peak_mb": max(peaks), "seconds": seconds, "rows": result.rows_read}


_COLD_SPARK = """
import sys, time
t0 = time.perf_counter()
from markerstore.ingest.pipeline import spark_session
spark = spark_session("local[2]")
t1 = time.perf_counter()
from benchmarks.ingest_jobs import spark_job
spark_job(spark, sys.argv[1], sys.argv[2], "json")
print(f"{t1 - t0:.3f} {time.perf_counter() - t1:.3f}")
"""


def cold(base: str) -> dict[str, float]:
    """Fresh processes, the demo's 100,000 rows: the CLI ingest and the hand-written job."""
    from markerstore.cli import sample

    src = os.path.join(base, "demo-src")
    sample.generate(src, rows=100_000, files=4)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    args = ["--schema", sample.SCHEMA_DDL, "--key", sample.KEY, "--partition-by",
            sample.PARTITION_BY, "--master", f"local[{CORES}]", "--no-progress", "--json",
            *[a for n, e in sample.CHECKS.items() for a in ("--check", f"{n}={e}")]]
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "markerstore.cli", "ingest", src,
                          os.path.join(base, "cold-ms"), *args], capture_output=True,
                         text=True, env=env, timeout=900)
    ms_wall = time.perf_counter() - started
    summary = json.loads(out.stdout) if out.returncode == 0 else {}
    started = time.perf_counter()
    hand = subprocess.run([sys.executable, "-c", _COLD_SPARK, src,
                           os.path.join(base, "cold-spark")], capture_output=True, text=True,
                          env=env, timeout=900, cwd=os.getcwd())
    spark_wall = time.perf_counter() - started
    session, job = (float(x) for x in hand.stdout.split()[-2:]) if hand.returncode == 0 \
        else (0.0, 0.0)
    parts = _guard(lambda: ingest_cold.profile(src, base), {})
    return {"ms_wall": ms_wall, "ms_ingest": float(summary.get("duration_s", 0.0)),
            "ms_ok": out.returncode == 0, "spark_wall": spark_wall,
            "spark_session": session, "spark_job": job, "spark_ok": hand.returncode == 0,
            "parts": parts}


_COLD_FAILED = {"ms_wall": 0.0, "ms_ingest": 0.0, "ms_ok": False, "spark_wall": 0.0,
                "spark_session": 0.0, "spark_job": 0.0, "spark_ok": False}


def _guard(measure: Any, failed: dict[str, Any]) -> dict[str, Any]:
    """One measurement; a failure is reported in the section, not the end of the run."""
    try:
        value = dict(measure())
        _progress("measured", value)
        return value
    except Exception as exc:
        print(f"   failed: {type(exc).__name__}: {exc}", flush=True)
        return {**failed, "failed": f"{type(exc).__name__}: {exc}"}


def run(quick: bool = False) -> str:
    """The benchmark as a Markdown section (numbers measured in this run)."""
    from benchmarks.ingest_report import markdown

    rows = 200_000 if quick else 2_000_000
    rounds = 2 if quick else 3
    base = tempfile.mkdtemp(prefix="bench-ingest-")
    load_before = _load()
    try:
        cold_case = _guard(lambda: cold(base), _COLD_FAILED)
        spark = _session()
        try:
            results = [side_by_side(spark, base, fmt, rows, rounds) for fmt in ("json", "csv")]
            rate = _guard(lambda: parse_rate(base, rows), {"records": 0, "cpu": 1, "rate": 0})
            size = (256 if quick else 2048) * 1024 * 1024
            rss = _guard(lambda: worker_rss(spark, base, size),
                         {"bytes": 0, "splits": 0, "tasks": 0, "peak_mb": 0, "seconds": 0,
                          "rows": 0})
        finally:
            spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return markdown(results, rate, rss, cold_case, quick, load_before, _load())


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
