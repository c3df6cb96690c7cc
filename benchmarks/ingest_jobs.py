"""The data and the three jobs of the ingest benchmark (see bench_ingest.py).

- `spark_job`: what a user writes by hand in Spark (PERMISSIVE read with a corrupt-record
  column, cached; good rows partitioned to Parquet, bad rows to JSON);
- markerstore's `ingest` (markers, error table, one atomic commit);
- `duckdb_job`: DuckDB alone on one machine, lines read as one VARCHAR column, json_valid
  and TRY_CAST of each field, the same key, partition and checks, good rows to Parquet
  partitioned by day, bad rows to JSON: the floor of what the work itself costs.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from markerstore.cli import sample

GOOD_SQL = ("event_id IS NOT NULL AND day IS NOT NULL AND "
            "coalesce(amount >= 0, true) AND coalesce(currency IN ('EUR', 'USD', 'GBP'), true)")
CSV_HEADER = "event_id,user_id,amount,currency,event_time,day"


def make_json(folder: str, rows: int, files: int = 8) -> dict[str, int]:
    """The demo's generator at about 3% bad lines (malformed, wrong type, null key, check)."""
    return sample.generate(folder, rows=rows, files=files, bad_fraction=0.03).bad


def make_csv(folder: str, rows: int, files: int = 8, seed: int = 7) -> None:
    """The same columns as CSV, about 3% bad: a short line, a wrong type, a null key, a
    failed check."""
    from datetime import datetime, timedelta, timezone

    rng = random.Random(seed)
    start = datetime(2026, 11, 19, tzinfo=timezone.utc)
    os.makedirs(folder, exist_ok=True)
    per_file = (rows + files - 1) // files
    for number in range(files):
        lines = [CSV_HEADER]
        for i in range(number * per_file, min(rows, (number + 1) * per_file)):
            when = start + timedelta(seconds=rng.randrange(3 * 86400))
            fields = [str(i), str(rng.randrange(10_000)), f"{rng.uniform(0, 500):.2f}",
                      rng.choice(("EUR", "USD", "GBP")), when.isoformat(),
                      when.strftime("%Y-%m-%d")]
            if rng.random() < 0.03:
                fields = spoiled(fields, i % 4)
            lines.append(",".join(fields))
        with open(os.path.join(folder, f"events-{number:03d}.csv"), "w") as handle:
            handle.write("\n".join(lines) + "\n")


def spoiled(fields: list[str], kind: int) -> list[str]:
    """A bad record of the benchmarks' CSV columns (id, user, amount, ...): a short line
    (kind 0), a wrong type (1), a null key (2) or a failed check (3)."""
    if kind == 0:
        return fields[:3]
    bad = list(fields)
    if kind == 1:
        bad[2] = "twelve"
    elif kind == 2:
        bad[0] = ""
    else:
        bad[2] = "-" + bad[2]
    return bad


def make_big_json(path: str, size: int, source: str) -> None:
    """One JSON-lines file of about `size` bytes: the lines of `source` repeated."""
    with open(source, "rb") as handle:
        block = handle.read()
    with open(path, "wb") as out:
        written = 0
        while written < size:
            out.write(block)
            written += len(block)


def spark_job(spark: Any, src: str, out: str, fmt: str) -> float:
    """The hand-written Spark job; its wall time."""
    started = time.perf_counter()
    reader = (spark.read.schema(sample.SCHEMA_DDL + ", _corrupt STRING")
              .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt"))
    df = reader.option("header", "true").csv(src) if fmt == "csv" else reader.json(src)
    df = df.cache()
    good = df.filter(f"_corrupt IS NULL AND {GOOD_SQL}").drop("_corrupt")
    good.write.partitionBy("day").parquet(os.path.join(out, "good"))
    df.filter(f"NOT (_corrupt IS NULL AND {GOOD_SQL})").write.json(os.path.join(out, "bad"))
    df.unpersist()
    return time.perf_counter() - started


def markerstore_job(spark: Any, src: str, out: str, hook: Any = None) -> Any:
    from markerstore.ingest.pipeline import ingest

    return ingest(src, out, schema=sample.SCHEMA_DDL, checks=sample.CHECKS, key=sample.KEY,
                  partition_by=sample.PARTITION_BY, spark=spark, progress=False,
                  _task_hook=hook)


def _nothing(batches: Any) -> Any:
    for _ in batches:
        pass
    yield from ()


def empty_job(spark: Any, tasks: int) -> float:
    """Seconds of a Spark job of `tasks` Python tasks (mapInArrow, as the ingest's) that
    do nothing: what scheduling them and starting their Python workers costs."""
    started = time.perf_counter()
    spark.range(tasks, numPartitions=tasks).mapInArrow(_nothing, "id long").collect()
    return time.perf_counter() - started


def _duck_fields(fmt: str) -> tuple[str, str]:
    """(the well-formedness test of a line, the typed fields of a well-formed line)."""
    if fmt == "csv":
        parts = [f"string_split(line, ',')[{i}]" for i in range(1, 7)]
        base = "len(string_split(line, ',')) = 6"
    else:
        parts = [f"line->>'{name}'" for name in CSV_HEADER.split(",")]
        base = "json_valid(line) AND starts_with(ltrim(line), '{')"
    types = ["BIGINT", "BIGINT", "DOUBLE", "VARCHAR", "TIMESTAMPTZ", "VARCHAR"]
    casts = ", ".join(f"TRY_CAST(nullif({p}, '') AS {t}) AS {n}"
                      for p, t, n in zip(parts, types, CSV_HEADER.split(","), strict=True))
    return base, casts


def duckdb_job(src: str, out: str, fmt: str, threads: int) -> float:
    """DuckDB alone: the floor of what the work costs on this machine."""
    import duckdb

    pattern = os.path.join(src, "*.csv" if fmt == "csv" else "*.json")
    base, casts = _duck_fields(fmt)
    nulls = ", ".join(f"NULL AS {n}" for n in CSV_HEADER.split(","))
    started = time.perf_counter()
    con = duckdb.connect(config={"threads": threads})
    con.execute("SET enable_progress_bar = false")
    con.execute(f"""CREATE TEMP TABLE raw AS SELECT line FROM read_csv('{pattern}',
        columns={{'line': 'VARCHAR'}}, delim='\x1f', quote='', escape='',
        header={'true' if fmt == 'csv' else 'false'}, auto_detect=false)""")
    con.execute(f"CREATE TEMP TABLE parsed AS SELECT line, true AS well_formed, {casts} "
                f"FROM raw WHERE {base} UNION ALL SELECT line, false, {nulls} FROM raw "
                f"WHERE NOT coalesce({base}, false)")
    good = f"well_formed AND amount IS NOT NULL AND {GOOD_SQL}"
    os.makedirs(out, exist_ok=True)
    con.execute(f"COPY (SELECT * EXCLUDE (line, well_formed) FROM parsed WHERE {good}) "
                f"TO '{out}/good' (FORMAT parquet, PARTITION_BY (day))")
    con.execute(f"COPY (SELECT line FROM parsed WHERE NOT coalesce({good}, false)) "
                f"TO '{out}/bad.json' (FORMAT json)")
    con.close()
    return time.perf_counter() - started


def rss_hook(path: str) -> Any:
    """A task hook that appends the Python worker's peak RSS (MiB) to `path`."""

    def hook(point: str, attempt: Any, files: Any) -> None:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        with open(path, "a") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "rss_mb": peak}) + "\n")

    return hook
