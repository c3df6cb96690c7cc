"""Where the cold ingest's time goes: fresh processes, each measuring one part.

- ``first run``: the order of `markerstore ingest` (the driver's imports, then the Spark
  session, then ingest), then a second ingest of the same source into a new table in the
  same session: the first run's extra cost, split into the Spark job, the job commit and
  the driver's own work around them (listing, schema, table, instant, marker server,
  error table);
- ``workers``: a fresh session's first empty Python job against its second (starting the
  Python worker processes and the JVM's Python runner), and what a fresh Python worker
  spends importing what an ingest task needs (pandas, which pyarrow loads at its first
  array, and markerstore, errortable, DuckDB, fsspec).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

_FIRST_RUN = """
import json, sys, time
t0 = time.perf_counter()
import errortable  # noqa: F401
import markerstore.spark  # noqa: F401 - before the session, as the CLI imports it
from markerstore.cli import sample
from markerstore.ingest.pipeline import ingest, spark_session
t1 = time.perf_counter()
spark = spark_session("local[2]")
t2 = time.perf_counter()

def run(out):
    started = time.perf_counter()
    result = ingest(sys.argv[1], out, schema=sample.SCHEMA_DDL, checks=sample.CHECKS,
                    key=sample.KEY, partition_by=sample.PARTITION_BY, spark=spark,
                    progress=False)
    wall = time.perf_counter() - started
    t = result.commit.timings
    return {"wall": wall, "job": t.get("job", 0.0), "commit": t.get("commit", 0.0)}

first = run(sys.argv[2] + "-1")
second = run(sys.argv[2] + "-2")
print(json.dumps({"imports": t1 - t0, "session": t2 - t1, "first": first,
                  "second": second}))
"""

_WORKERS = """
import json, time
from markerstore.ingest.pipeline import spark_session
spark = spark_session("local[2]")

def nothing(batches):
    for _ in batches:
        pass
    yield from ()

def imports(batches):
    import time
    import pyarrow as pa
    started = time.perf_counter()
    pa.array([0])  # pyarrow loads pandas at its first array
    loaded = time.perf_counter()
    import errortable  # noqa: F401
    import markerstore.ingest.task  # noqa: F401
    done = time.perf_counter()
    for _ in batches:
        pass
    yield pa.record_batch({"pandas": [loaded - started], "ours": [done - loaded]})

def job(function, schema):
    started = time.perf_counter()
    rows = spark.range(2, numPartitions=2).mapInArrow(function, schema).collect()
    return time.perf_counter() - started, rows

cold, _ = job(nothing, "id long")
warm, _ = job(nothing, "id long")
_, rows = job(imports, "pandas double, ours double")
print(json.dumps({"empty_cold": cold, "empty_warm": warm,
                  "worker_pandas": max(r.pandas for r in rows),
                  "worker_ours": max(r.ours for r in rows)}))
"""


def _child(script: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, env=env, timeout=900, cwd=os.getcwd())
    if done.returncode != 0:
        raise RuntimeError(f"cold probe failed: {done.stderr.strip().splitlines()[-1:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def profile(src: str, base: str) -> dict[str, Any]:
    """The first run's parts (seconds), from two fresh processes."""
    first = _child(_FIRST_RUN, src, os.path.join(base, "cold-parts"))
    workers = _child(_WORKERS)
    return {**first, **workers}


def rows(p: dict[str, Any]) -> list[str]:
    """The Markdown table of :func:`profile`'s parts."""
    first, second = p["first"], p["second"]

    def driver(run: dict[str, float]) -> float:
        return run["wall"] - run["job"] - run["commit"]

    return [
        "| part of the first run | first run s | warm s | what |",
        "|---|---|---|---|",
        f"| the driver's imports (markerstore, errortable, pyspark) | {p['imports']:.2f} | "
        "- | once a process |",
        f"| Spark session start | {p['session']:.2f} | - | the JVM |",
        f"| `ingest()` of the 100,000 rows | {first['wall']:.2f} | {second['wall']:.2f} | "
        "the same source into a new table, again in the same session |",
        f"| of which the Spark job | {first['job']:.2f} | {second['job']:.2f} | |",
        f"| of which the job commit | {first['commit']:.2f} | {second['commit']:.2f} | |",
        f"| of which the driver around them | {driver(first):.2f} | {driver(second):.2f} | "
        "listing, schema, table and instant, marker server, error table |",
        f"| an empty Python job (2 tasks) in a fresh session | {p['empty_cold']:.2f} | "
        f"{p['empty_warm']:.2f} | starting the Python workers, the JVM's Python runner |",
        f"| a fresh Python worker importing pandas | {p['worker_pandas']:.2f} | - | pyarrow "
        "loads it at its first array |",
        f"| a fresh Python worker importing markerstore, errortable, DuckDB, fsspec | "
        f"{p['worker_ours']:.2f} | - | what an ingest task needs |",
    ]
