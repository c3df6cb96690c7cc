"""One mid-sized JSON-lines file (issue 37): a 36 MB file under ``split_bytes`` (64 MiB)
was one task, one core busy on local[2]; the split plan now cuts a file of two minimal
ranges or more into ranges, two a core. Measured side by side in each session: the
ingest with the plan as it is, and with ``split_bytes`` given as 64 MiB (the file read
whole by one task: the plan before), on local[1] and on local[2] in turn (sessions of
local[1], local[2], local[1], local[2], warm-up runs first in each).

Run: ``python -m benchmarks.bench_json_file [--rows N] [--rounds K]``, or through
``python -m benchmarks.run --only json_file [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

WARM_UP = 2
ONE_TASK = str(64 * 1024 * 1024)  # split_bytes as given: the file read whole, as before


def _timed(spark: Any, src: str, out: str, options: dict[str, str]) -> tuple[float, Any]:
    from markerstore.cli import sample
    from markerstore.ingest.pipeline import ingest

    started = time.perf_counter()
    result = ingest(src, out, schema=sample.SCHEMA_DDL, checks=sample.CHECKS, key=sample.KEY,
                    spark=spark, markers="batched", progress=False, options=options)
    seconds = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + "_errors", ignore_errors=True)
    return seconds, result


def sessions(base: str, src: str, rounds: int) -> dict[str, Any]:
    """Seconds of each run: (cores, plan) -> runs, the two plans alternating in a session;
    and the splits and tasks of each."""
    from markerstore.ingest.pipeline import spark_session

    runs: dict[str, list[float]] = {}
    shape: dict[str, tuple[int, int]] = {}
    overlap: dict[str, list[float]] = {}  # the Spark job's wall time over its tasks' time
    plans = {"split plan": {}, "one task": {"markerstore.ingest.split_bytes": ONE_TASK}}
    for turn, cores in enumerate((1, 2, 1, 2)):
        spark = spark_session(f"local[{cores}]")
        try:
            for i in range(WARM_UP):
                _timed(spark, src, os.path.join(base, f"warm-{turn}-{i}"), {})
            for i in range(rounds):
                for name, options in plans.items():
                    seconds, result = _timed(spark, src,
                                             os.path.join(base, f"t-{turn}-{i}"), options)
                    key = f"local[{cores}], {name}"
                    runs.setdefault(key, []).append(round(seconds, 2))
                    shape[key] = (result.source_tasks, result.spark_tasks)
                    timings = result.commit.timings
                    work = sum(v for k, v in timings.items() if k.startswith("task_"))
                    overlap.setdefault(key, []).append(timings.get("job", 0.0) / work)
        finally:
            spark.stop()
        print(f"   {json.dumps(runs)}", flush=True)
    return {"runs": runs, "shape": shape, "overlap": overlap}


def markdown(size: int, rows: int, found: dict[str, Any], load: str) -> str:
    runs, shape, overlap = found["runs"], found["shape"], found["overlap"]
    best = {k: min(v) for k, v in runs.items()}
    med = {k: statistics.median(v) for k, v in runs.items()}
    out = ["## One mid-sized JSON-lines file on local[1] and local[2]\n",
           f"One JSON-lines file of {size / 1e6:.1f} MB ({rows:,} records of the demo's "
           "events, about 1% bad; schema, key and two checks), under `split_bytes` (64 MiB). "
           "Each session runs the ingest with the split plan as it is and with "
           f"`split_bytes={ONE_TASK}` given (the file read whole by one task, the plan "
           "before), alternating, after "
           f"{WARM_UP} warm-up runs; sessions of local[1], local[2], local[1], local[2] in "
           f"turn. Load at the start: {load}.\n",
           "| cores, plan | source splits | Spark tasks | best (s) | median (s) | "
           "job / task time | runs (s) |", "|---|---|---|---|---|---|---|"]
    for key in runs:
        splits, tasks = shape[key]
        out.append(f"| {key} | {splits} | {tasks} | {best[key]:.2f} | {med[key]:.2f} | "
                   f"{statistics.median(overlap[key]):.2f} | "
                   f"{', '.join(f'{v:.2f}' for v in runs[key])} |")
    two, one_task = best["local[2], split plan"], best["local[2], one task"]
    one = best["local[1], split plan"]
    out += ["", f"On local[2] the split plan takes **{two / one_task:.2f}x** the time of one "
            f"task (best of each; {med['local[2], split plan'] / med['local[2], one task']:.2f}x "
            f"median), and local[2] takes {two / one:.2f}x the time of local[1] with the "
            "split plan. *job / task time* is the Spark job's wall time over the time its "
            "tasks spent (median): 1.0 when one task does the work, 0.5 when two tasks run "
            "side by side the whole time. A perfect split on two idle cores halves the "
            "tasks' part; the job's fixed cost (starting it, the commit, the error table) "
            "one more range does not shrink.\n"]
    return "\n".join(out)


def run(quick: bool = False, rows: int | None = None, rounds: int | None = None) -> str:
    """The section: `rows` records (265,000: about 36 MB), `rounds` runs of each plan in
    each session."""
    from markerstore.cli import sample

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    load = "{:.1f} (1 min), {:.1f} (5 min)".format(*os.getloadavg()[:2])
    base = tempfile.mkdtemp(prefix="bench-json-file-")
    try:
        src = sample.generate(os.path.join(base, "src"), rows=rows or (
            60_000 if quick else 265_000), files=1).paths[0]
        found = sessions(base, src, rounds or (1 if quick else 3))
        size = os.path.getsize(src.removeprefix("file://"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return markdown(size, rows or (60_000 if quick else 265_000), found,
                    f"{load} on {os.cpu_count()} cores")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(run(args.quick, args.rows, args.rounds))
