"""One large CSV file on every core (issue 29): markerstore's ingest, whose byte ranges
start at their first record exactly (markerstore.ingest.csvranges), side by side with
DuckDB alone (``read_csv`` -> partitioned ``COPY``, as many threads) and Spark's
``read.csv`` with ``multiLine=true`` (one task per file, the only exact Spark reading);
then the ingest on ``local[1]`` against ``local[2]`` (its scaling), the driver's first
pass alone, and a profile of one range read in one process (where a core's time goes).

The file: `rows` records (3,000,000 by default, about 150 MB), 1% holding a quoted
newline, 2% bad (a short record, a wrong type, a null key, a failed check). Run:
``python -m benchmarks.bench_csv_split [--rows N] [--rounds K]``, or through
``python -m benchmarks.run --only csv_split [--quick]``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from benchmarks.bench_ingest import _phases
from benchmarks.ingest_jobs import spoiled

CORES = 2
# Runs before the timed ones in each scaling session: the JVM compiles the code of its
# first jobs (C1 and C2 threads busy for a few of them), CPU a local[2] run shares with
# its tasks and a local[1] run leaves to the idle core.
WARM_UP = 2
SCHEMA = ("event_id BIGINT, user_id BIGINT, amount DOUBLE, note STRING, "
          "event_time TIMESTAMP, day STRING")
HEADER = "event_id,user_id,amount,note,event_time,day"
CHECKS = {"non_negative_amount": "amount >= 0"}
GOOD_SQL = "event_id IS NOT NULL AND day IS NOT NULL AND coalesce(amount >= 0, true)"
_TYPES = ["BIGINT", "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMPTZ", "VARCHAR"]


def make_file(path: str, rows: int, seed: int = 29) -> dict[str, int]:
    """The benchmark's CSV file; how many records are quoted over lines, and bad."""
    rng = random.Random(seed)
    counts = {"quoted_newline": 0, "bad": 0}
    with open(path, "w", newline="") as out:
        lines = [HEADER]
        for i in range(rows):
            day = 19 + i % 3
            note = rng.choice(("ok", "late", "refund", "gift"))
            if rng.random() < 0.01:
                note = f'"{note},\nsee ""ticket"" {i}"'
                counts["quoted_newline"] += 1
            fields = [str(i), str(rng.randrange(10_000)), f"{rng.uniform(0, 500):.2f}", note,
                      f"2026-11-{day}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00+00:00",
                      f"2026-11-{day}"]
            if rng.random() < 0.02:
                counts["bad"] += 1
                fields = spoiled(fields, i % 4)
            lines.append(",".join(fields))
            if len(lines) >= 100_000:
                out.write("\n".join(lines) + "\n")
                lines = []
        out.write("\n".join(lines) + "\n" if lines else "")
    return counts


def markerstore_job(spark: Any, src: str, out: str, split_bytes: int | None = None) -> Any:
    from markerstore import config
    from markerstore.ingest.pipeline import ingest

    options = {} if split_bytes is None else {config.INGEST_SPLIT_BYTES: str(split_bytes)}
    return ingest(src, out, schema=SCHEMA, checks=CHECKS, key="event_id",
                  partition_by="day", spark=spark, progress=False, options=options)


def duckdb_job(src: str, out: str, threads: int) -> float:
    """DuckDB alone: its parallel CSV reader (quoted newlines read right on this file),
    every field as text, TRY_CAST, good rows to Parquet partitioned by day, bad to JSON
    (the records its reader rejects, a short one, from its rejects table)."""
    import duckdb

    names = HEADER.split(",")
    casts = ", ".join(f"TRY_CAST(nullif({n}, '') AS {t}) AS {n}"
                      for n, t in zip(names, _TYPES, strict=True))
    typed = " AND ".join(f"(nullif(raw_{n}, '') IS NULL OR {n} IS NOT NULL)"
                         for n, t in zip(names, _TYPES, strict=True))
    started = time.perf_counter()
    con = duckdb.connect(config={"threads": threads})
    con.execute("SET enable_progress_bar = false")
    con.execute(f"""CREATE TEMP TABLE raw AS SELECT * FROM read_csv('{src}', header=true,
        all_varchar=true, store_rejects=true, quote='"', escape='"', auto_detect=false,
        columns={{{', '.join(f"'{n}': 'VARCHAR'" for n in names)}}})""")
    con.execute(f"CREATE TEMP TABLE parsed AS SELECT *, ({typed}) AS well_formed FROM "
                f"(SELECT {casts}, {', '.join(f'{n} AS raw_{n}' for n in names)} FROM raw)")
    os.makedirs(out, exist_ok=True)
    good = f"well_formed AND {GOOD_SQL}"
    con.execute(f"COPY (SELECT {', '.join(names)} FROM parsed WHERE {good}) "
                f"TO '{out}/good' (FORMAT parquet, PARTITION_BY (day))")
    con.execute(f"COPY (SELECT * FROM parsed WHERE NOT coalesce({good}, false)) "
                f"TO '{out}/bad.json' (FORMAT json)")
    con.execute(f"COPY (SELECT line, csv_line, error_message FROM reject_errors) "
                f"TO '{out}/rejected.json' (FORMAT json)")
    con.close()
    return time.perf_counter() - started


def spark_multiline_job(spark: Any, src: str, out: str) -> float:
    """Spark's exact reading of this file: read.csv with multiLine=true (one task)."""
    started = time.perf_counter()
    df = (spark.read.schema(SCHEMA + ", _corrupt STRING").option("header", "true")
          .option("multiLine", "true").option("escape", '"').option("mode", "PERMISSIVE")
          .option("columnNameOfCorruptRecord", "_corrupt").csv(src)).cache()
    good = df.filter(f"_corrupt IS NULL AND {GOOD_SQL}").drop("_corrupt")
    good.write.partitionBy("day").parquet(os.path.join(out, "good"))
    df.filter(f"NOT (_corrupt IS NULL AND {GOOD_SQL})").write.json(os.path.join(out, "bad"))
    df.unpersist()
    return time.perf_counter() - started


def _clean(*folders: str) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(folder + "_errors", ignore_errors=True)
    os.sync()


def _timed_ingest(spark: Any, src: str, out: str, split: int | None) -> tuple[float, Any]:
    started = time.perf_counter()
    result = markerstore_job(spark, src, out, split)
    seconds = time.perf_counter() - started
    _clean(out)
    return seconds, result


def side_by_side(base: str, src: str, rounds: int, split: int | None) -> dict[str, Any]:
    """The three jobs alternating in one Spark application on local[CORES]."""
    from markerstore.ingest.pipeline import spark_session

    spark = spark_session(f"local[{CORES}]")
    times: dict[str, list[float]] = {"markerstore": [], "duckdb": [], "spark_multiline": []}
    phases: list[dict[str, float]] = []
    try:
        _, result = _timed_ingest(spark, src, os.path.join(base, "warm"), split)  # warm-up
        spark_multiline_job(spark, src, os.path.join(base, "warm-spark"))
        _clean(os.path.join(base, "warm-spark"))
        for i in range(rounds):
            seconds, result = _timed_ingest(spark, src, os.path.join(base, f"ms-{i}"), split)
            times["markerstore"].append(seconds)
            phases.append(_phases(result, seconds))
            out = os.path.join(base, f"duck-{i}")
            times["duckdb"].append(duckdb_job(src, out, CORES))
            _clean(out)
            out = os.path.join(base, f"spark-{i}")
            times["spark_multiline"].append(spark_multiline_job(spark, src, out))
            _clean(out)
            print(f"   round {i}: {json.dumps({k: v[-1] for k, v in times.items()})}",
                  flush=True)
    finally:
        spark.stop()
    fastest = phases[times["markerstore"].index(min(times["markerstore"]))]
    return {"times": times, "phases": fastest, "splits": result.source_tasks,
            "tasks": result.spark_tasks,
            "rows": result.commit.rows_written, "errors": sum(result.error_records.values()),
            "records": result.source_records}


def _rounded(runs: dict[str, list[float]]) -> dict[str, list[float]]:
    return {k: [round(v, 2) for v in values] for k, values in runs.items()}


def scaling(base: str, src: str, rounds: int, split: int | None) -> dict[str, list[float]]:
    """The ingest alone on local[1], then on local[2], then both again (a session each,
    `rounds` runs in each after WARM_UP runs): the machine's drift over the minutes of a
    run falls on both sides alike."""
    from markerstore.ingest.pipeline import spark_session

    found: dict[str, list[float]] = {"local[1]": [], "local[2]": []}
    for turn, cores in enumerate((1, 2, 1, 2)):
        spark = spark_session(f"local[{cores}]")
        try:
            for i in range(WARM_UP):
                _timed_ingest(spark, src, os.path.join(base, f"warm{turn}-{i}"), split)
            found[f"local[{cores}]"] += [
                _timed_ingest(spark, src, os.path.join(base, f"scale-{turn}-{i}"), split)[0]
                for i in range(rounds)]
        finally:
            spark.stop()
        print(f"   {json.dumps(found)}", flush=True)
    return found


def profile(src: str, split: int | None, top: int = 12) -> dict[str, Any]:
    """One range of the file read, parsed and validated in this process (no writing):
    seconds per phase and the functions that take the most time."""
    import errortable
    from markerstore.commit import TaskSpec
    from markerstore.ingest.infer import csv_header
    from markerstore.ingest.schema import ddl_to_arrow
    from markerstore.ingest.sources import list_tasks
    from markerstore.ingest.task import IngestTask, _Timer

    validator = errortable.Validator(ddl_to_arrow(SCHEMA), "event_id", ["day"], CHECKS)
    task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"), validator,
                      errortable.CaptureContext)
    ranges = list_tasks(src, split_bytes=split) if split else list_tasks(src)
    one = ranges[1] if len(ranges) > 1 else ranges[0]
    header = csv_header(ranges[0], None)
    seconds: dict[str, float] = {}
    ctx = errortable.CaptureContext(task_attempt="bench", source_file=one.url)
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    records = sum(good.num_rows + (errors.num_rows if errors is not None else 0)
                  for good, errors in task.results(one, header, ctx, _Timer(seconds)))
    profiler.disable()
    wall = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    rows = sorted(((v[3], f"{k[2]} ({os.path.basename(k[0])}:{k[1]})")
                   for k, v in stats.stats.items()),  # type: ignore[attr-defined]
                  reverse=True)[:top]
    return {"bytes": (one.end or os.path.getsize(src)) - one.start, "records": records,
            "wall": wall, "phases": {k[len("ingest_"):]: v for k, v in seconds.items()},
            "top": [(round(t, 3), name) for t, name in rows]}


def look_back_cost(src: str, split: int | None) -> dict[str, float]:
    """What finding every range's quote state costs, alone (the price of exactness): the
    driver's first pass (markerstore.ingest.quotestates)."""
    from markerstore.ingest.options import read_options
    from markerstore.ingest.quotestates import quote_states
    from markerstore.ingest.sources import list_tasks

    ranges = list_tasks(src, split_bytes=split) if split else list_tasks(src)
    started = time.perf_counter()
    quote_states(ranges, None, read_options({}))
    return {"ranges": sum(1 for t in ranges if t.start),
            "seconds": time.perf_counter() - started}


def markdown(size: int, counts: dict[str, int], rows: int, sbs: dict[str, Any],
             scale: dict[str, list[float]], prof: dict[str, Any], look: dict[str, float],
             load: str, split: int | None) -> str:
    best = {k: min(v) for k, v in sbs["times"].items()}
    med = {k: statistics.median(v) for k, v in sbs["times"].items()}
    one, two = min(scale["local[1]"]), min(scale["local[2]"])
    out = [
        "## One large CSV file on every core (byte ranges, exact records)\n",
        f"One file of {size / 1e6:.0f} MB, {rows:,} records ({counts['quoted_newline']:,} "
        f"with a quoted newline, {counts['bad']:,} bad); local[{CORES}], local disk, "
        f"partitioned Parquet out, bad records kept; best of {len(sbs['times']['duckdb'])} "
        f"rounds alternating in one Spark application (median beside it). Load average "
        f"at the start: {load}.\n",
        "| job | best | median | x DuckDB (best) |", "|---|---|---|---|"]
    names = {"duckdb": f"DuckDB alone (read_csv -> partitioned COPY, {CORES} threads)",
             "markerstore": f"markerstore ingest ({sbs['splits']} ranges of about "
                            f"{size / sbs['splits'] / 1e6:.0f} MB in {sbs['tasks']} Spark "
                            "tasks)",
             "spark_multiline": "Spark read.csv, multiLine=true (one task per file)"}
    for key in ("duckdb", "markerstore", "spark_multiline"):
        out.append(f"| {names[key]} | {best[key]:.2f} s | {med[key]:.2f} s | "
                   f"{best[key] / best['duckdb']:.2f}x |")
    out += [
        "", f"markerstore wrote {sbs['rows']:,} rows and {sbs['errors']:,} error records of "
        f"{sbs['records']:,} source records. Spark multiLine / markerstore: "
        f"**{best['spark_multiline'] / best['markerstore']:.2f}x** (target >= 4x); "
        f"markerstore / DuckDB: **{best['markerstore'] / best['duckdb']:.2f}x** "
        f"(target <= 1.5x). Where the ingest's fastest round went (task phases in "
        f"seconds over the cores, then the driver's): "
        f"{json.dumps({k: round(v, 2) for k, v in sbs['phases'].items()})}.\n",
        f"Scaling of the ingest alone (sessions of local[1], local[2], local[1], local[2] "
        f"in turn, {WARM_UP} warm-up runs in each, best of each): local[1] {one:.2f} s, "
        f"local[2] {two:.2f} s: "
        f"**{one / two:.2f}x** (target >= 1.8x; runs {_rounded(scale)}).\n",
        f"The quote state at the start of all {look['ranges']:.0f} ranges after the first "
        f"(the driver's first pass, alone): {look['seconds'] * 1000:.1f} ms.\n",
        f"One range ({prof['bytes'] / 1e6:.0f} MB, {prof['records']:,} records) read, parsed "
        f"and validated in one process, no writing: {prof['wall']:.2f} s "
        f"({prof['records'] / prof['wall'] / 1e6:.2f} M records/s per core); phases "
        f"{json.dumps({k: round(v, 2) for k, v in prof['phases'].items()})}. "
        "Functions by cumulative time:\n", "```"]
    out += [f"{t:8.3f} s  {name}" for t, name in prof["top"]]
    out.append("```\n")
    return "\n".join(out)


def run(quick: bool = False, rows: int | None = None, rounds: int | None = None,
        split: int | None = None) -> str:
    """The section; `split`: the ranges' size (markerstore.ingest.split_bytes; by default
    the option's default at the full size, and a quarter of the file at a smaller one)."""
    rows = rows or (300_000 if quick else 3_000_000)
    rounds = rounds or (1 if quick else 3)
    base = tempfile.mkdtemp(prefix="bench-csv-split-")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    one, five, _ = os.getloadavg()
    load = f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"
    try:
        src = os.path.join(base, "one.csv")
        counts = make_file(src, rows)
        size = os.path.getsize(src)
        if split is None and rows < 3_000_000:
            split = -(-size // (2 * CORES))
        look = look_back_cost(src, split)
        prof = profile(src, split)
        print(f"   profile: {json.dumps(prof)}", flush=True)
        sbs = side_by_side(base, src, rounds, split)
        scale = scaling(base, src, rounds, split)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return markdown(size, counts, rows, sbs, scale, prof, look, load, split)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--split-bytes", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(run(args.quick, args.rows, args.rounds, args.split_bytes))
