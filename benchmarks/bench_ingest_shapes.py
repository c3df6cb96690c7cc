"""Ingest benchmark of two shapes (issue 38): wide records, and blocks that are all errors.

1. Wide records: CSV files of 100 records of 1,000, 10,000 and 100,000 columns side by
   side. End to end, ``ingest()`` (``local[2]``, the schema inferred): the seconds per
   column against 1,000 columns' (linear in the columns: 1x). In one process, the task's
   own work (read, parse, validate, write Parquet) in CPU time, per column against
   1,000 columns'.
2. Blocks that are all errors against one of good records, in one process (so per core),
   in records per CPU-second: the task's work (read, parse, validate, build the error
   records, write the error file or the data file) over 2,000,000 one-byte bad JSON lines
   and over 2,000,000 good ones; and two files of errors of other shapes: CSV lines read
   as JSON (another format: each line decoded by Python's JSON decoder) and JSON objects
   with a member the schema lacks (another schema: each a record, then an error). End to
   end, ``ingest()`` of the bad file and of the good one side by side.

Run: ``python -m benchmarks.run --only shapes [--quick]``.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

WIDTHS = (1_000, 10_000, 100_000)
CORES = 2


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def _wide_csv(path: str, width: int, rows: int) -> None:
    with open(path, "w") as handle:
        handle.write(",".join(f"c{i}" for i in range(width)) + "\n")
        for r in range(rows):
            handle.write(",".join(str(r * width + i) for i in range(width)) + "\n")


def _task(schema: pa.Schema) -> Any:
    import errortable
    from markerstore.commit import TaskSpec
    from markerstore.ingest.task import IngestTask

    return IngestTask(TaskSpec("file:///unused", "i", "u", "direct"),
                      errortable.Validator(schema), errortable.CaptureContext)


def _results(path: str, schema: pa.Schema, header: bool) -> Iterator[tuple[Any, Any]]:
    """The task's blocks of `path` (good rows, error rows), as a Spark task reads them."""
    import errortable
    from markerstore.ingest.header import read_header_at
    from markerstore.ingest.options import read_options
    from markerstore.ingest.sources import list_tasks

    task = _task(schema)
    for split in list_tasks(path):
        text = read_header_at(split, None, read_options(None)).text if header else None
        ctx = errortable.CaptureContext(task_attempt="bench", source_file=split.url,
                                        commit_time="20260101000000000", table_name="t",
                                        table_path="/bench/t")
        yield from task.results(split, text, ctx)


def _work(path: str, schema: pa.Schema, out: str, header: bool = False) -> dict[str, float]:
    """The task's work over `path` in CPU seconds: its blocks, the data file (row groups
    cut as the task writer cuts them) and the error file (Parquet, as the task writers
    write them)."""
    from errortable.writing.files import ErrorFileWriter
    from markerstore import config
    from markerstore.commit.task import ROW_GROUP_MIN_ROWS, WIDE_ROW_GROUP_BYTES

    cut = config.OPTIONS[config.ROW_GROUP_BYTES].default
    started = time.process_time()
    data: pq.ParquetWriter | None = None
    errors: ErrorFileWriter | None = None
    buffered: list[pa.Table] = []
    records = 0
    with open(out + ".errors.parquet", "wb") as handle:
        for good, bad in _results(path, schema, header):
            records += good.num_rows + (0 if bad is None else bad.num_rows)
            if good.num_rows:
                data = data or pq.ParquetWriter(out + ".parquet", good.schema,
                                                compression="snappy")
                buffered.append(good)
                size, rows = sum(t.nbytes for t in buffered), sum(len(t) for t in buffered)
                if size >= cut and (rows >= ROW_GROUP_MIN_ROWS or size >= WIDE_ROW_GROUP_BYTES):
                    data.write_table(pa.concat_tables(buffered))
                    buffered.clear()
            if bad is not None and bad.num_rows:
                errors = errors or ErrorFileWriter(handle, "parquet")
                errors.write_arrow(bad.drop_columns(["reason"]))
        if errors is not None:
            errors.close()
    if data is not None:
        if buffered:
            data.write_table(pa.concat_tables(buffered))
        data.close()
    cpu = time.process_time() - started
    return {"records": records, "cpu": cpu, "rate": records / cpu if cpu else 0.0}


def wide_in_process(base: str, rows: int) -> list[dict[str, Any]]:
    """Per width: the task's work over `rows` records, and the schema's inference."""
    from markerstore.ingest.infer import infer_schema
    from markerstore.ingest.sources import list_tasks

    found = []
    for width in WIDTHS:
        path = os.path.join(base, f"wide-{width}.csv")
        _wide_csv(path, width, rows)
        started = time.process_time()
        schema = infer_schema(list_tasks(path), None, {})
        inferred = time.process_time() - started
        work = _work(path, schema, os.path.join(base, f"wide-{width}"), header=True)
        found.append({"width": width, "rows": rows, "infer": inferred, **work})
        os.remove(path)
    return found


def _ingest(spark: Any, source: str, table: str, **kwargs: Any) -> tuple[float, Any]:
    from markerstore.ingest.pipeline import ingest

    started = time.perf_counter()
    result = ingest(source, table, spark=spark, progress=False, markers="direct", **kwargs)
    return time.perf_counter() - started, result


def wide_end_to_end(spark: Any, base: str, rows: int) -> list[dict[str, Any]]:
    found = []
    warm = os.path.join(base, "warm.csv")
    _wide_csv(warm, WIDTHS[0], rows)
    _ingest(spark, warm, os.path.join(base, "warm-t"))  # workers and caches: not measured
    for width in WIDTHS:
        path = os.path.join(base, f"e2e-{width}.csv")
        _wide_csv(path, width, rows)
        seconds, result = _ingest(spark, path, os.path.join(base, f"e2e-{width}-t"))
        assert result.commit.rows_written == rows, result.summary()
        found.append({"width": width, "rows": rows, "seconds": seconds,
                      "job": result.commit.timings.get("job", 0.0)})
        shutil.rmtree(os.path.join(base, f"e2e-{width}-t"), ignore_errors=True)
        os.remove(path)
    return found


SHAPES: dict[str, Callable[[int], bytes]] = {
    "good": lambda i: b'{"a": %d}\n' % i,
    "bad": lambda i: b"x\n",
    "another format (CSV read as JSON)": lambda i: b"%d,name %d,2024-01-01\n" % (i, i),
    "another schema (a member it lacks)": lambda i: b'{"b": %d}\n' % i,
}


def blocks(base: str, lines: int) -> list[dict[str, Any]]:
    from markerstore.ingest.schema import ddl_to_arrow

    schema = ddl_to_arrow("a BIGINT")
    found = []
    for name, line in SHAPES.items():
        path = os.path.join(base, "block.json")
        with open(path, "wb") as handle:
            for start in range(0, lines, 100_000):
                handle.write(b"".join(line(i) for i in range(start, min(lines,
                                                                          start + 100_000))))
        found.append({"shape": name, "lines": lines, "bytes": os.path.getsize(path),
                      **_work(path, schema, os.path.join(base, "block"))})
        os.remove(path)
    return found


def blocks_end_to_end(spark: Any, base: str, lines: int) -> list[dict[str, Any]]:
    found = []
    for name in ("good", "bad"):
        source = os.path.join(base, f"e2e-{name}")
        os.makedirs(source)
        with open(os.path.join(source, "x.json"), "wb") as handle:
            handle.write(b"".join(SHAPES[name](i) for i in range(lines)))
        seconds, result = _ingest(spark, source, os.path.join(base, f"e2e-{name}-t"),
                                  schema="a BIGINT")
        assert result.rows_read == lines, result.summary()
        found.append({"shape": name, "seconds": seconds, "lines": lines,
                      "tasks": result.spark_tasks,
                      "errors": sum(result.error_records.values())})
    return found


def _guard(measure: Callable[[], Any], failed: Any) -> Any:
    try:
        return measure()
    except Exception as exc:  # reported in the section, not the end of the run
        print(f"   failed: {type(exc).__name__}: {exc}", flush=True)
        return failed


def run(quick: bool = False) -> str:
    from markerstore.ingest.pipeline import spark_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    base = tempfile.mkdtemp(prefix="bench-shapes-")
    load_before = _load()
    rows = 10 if quick else 100
    lines = 200_000 if quick else 2_000_000
    try:
        wide = _guard(lambda: wide_in_process(base, rows), [])
        bad = _guard(lambda: blocks(base, lines), [])
        spark = spark_session(f"local[{CORES}]")
        try:
            wide_e2e = _guard(lambda: wide_end_to_end(spark, base, rows), [])
            bad_e2e = _guard(lambda: blocks_end_to_end(spark, base, lines), [])
        finally:
            spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return _markdown(wide, wide_e2e, bad, bad_e2e, quick, load_before, _load())


def _by_width(rows: list[dict[str, Any]], key: str, title: str, text: list[str],
              header: str, cells: Callable[[dict[str, Any], float], str],
              after: Callable[[dict[str, Any]], str] = lambda r: "") -> list[str]:
    """A table of one measure (`key`) per width, each row's measure per column against
    the first width's (linear in the columns: 1x)."""
    first = rows[0][key] / rows[0]["width"]
    lines = [title, "", *text, header, "|---:" * (header.count("|") - 1) + "|"]
    for r in rows:
        per = r[key] / r["width"]
        lines.append(f"{cells(r, per)} **{per / first:.2f}x** |{after(r)}")
    return [*lines, ""]


def _markdown(wide: list[dict[str, Any]], wide_e2e: list[dict[str, Any]],
              bad: list[dict[str, Any]], bad_e2e: list[dict[str, Any]], quick: bool,
              load_before: str, load_after: str) -> str:
    lines = ["## Ingest shapes: wide records, and blocks that are all errors (issue 38)", "",
             f"Load average before the run: {load_before}; after: {load_after} (the machine "
             "is shared: the ratios, measured side by side, are what count)"
             f"{'; quick sizes' if quick else ''}.", ""]
    if wide_e2e:
        lines += _by_width(
            wide_e2e, "seconds", f"### Wide records end to end: `ingest()` of "
            f"{wide_e2e[0]['rows']} records, `local[2]`", [],
            "| columns | values | seconds | Spark job s | seconds per 1,000 columns "
            "| against 1,000 columns |", lambda r, per: (
                f"| {r['width']:,} | {r['width'] * r['rows']:,} | {r['seconds']:.1f} | "
                f"{r['job']:.1f} | {1000 * per:.2f} |"))
    if wide:
        lines += _by_width(
            wide, "cpu", f"### Wide records in one process: the task's work over "
            f"{wide[0]['rows']} records", ["CPU seconds of one process (a Spark task's work: "
                                           "read, parse, validate, write Parquet); inference "
                                           "(the driver's, of the same records) apart.", ""],
            "| columns | task CPU s | us per value | CPU s per 1,000 columns | against 1,000 "
            "columns | inference CPU s |", lambda r, per: (
                f"| {r['width']:,} | {r['cpu']:.2f} | "
                f"{r['cpu'] / r['records'] / r['width'] * 1e6:.3f} | {1000 * per:.3f} |"),
            lambda r: f" {r['infer']:.2f} |")
    if bad:
        good = bad[0]["rate"]
        lines += ["### Blocks that are all errors, per core", "",
                  "CPU seconds of one process: a Spark task's work (read, parse, validate, "
                  "build the error records, write the error file or the data file; Parquet) "
                  "over one file of JSON lines, schema `a BIGINT`.", "",
                  "| file | lines | bytes | CPU s | records/s per core | good / this |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in bad:
            lines.append(f"| {r['shape']} | {r['lines']:,} | {r['bytes']:,} | "
                         f"{r['cpu']:.2f} | {r['rate']:,.0f} | "
                         f"**{good / r['rate']:.1f}x** |")
        lines += ["", "Target: at least 200,000 records/s per core for the bad block, "
                  "and a few times the good block's time at most.", ""]
    if bad_e2e:
        good = bad_e2e[0]["seconds"]
        lines += ["### The same two files end to end: `ingest()`, `local[2]`", "",
                  "Wall time (the machine is shared); records/s per Spark task that read "
                  "the file (each file here is one task's, on one core).", "",
                  "| file | seconds | Spark tasks | error records | records/s per task "
                  "| against good |", "|---|---:|---:|---:|---:|---:|"]
        for r in bad_e2e:
            per_task = r["lines"] / r["seconds"] / min(r["tasks"], CORES)
            lines.append(f"| {r['shape']} | {r['seconds']:.2f} | {r['tasks']} | "
                         f"{r['errors']:,} | {per_task:,.0f} | "
                         f"**{r['seconds'] / good:.1f}x** |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
