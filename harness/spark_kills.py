"""The Spark driver killed with SIGKILL at random points of real writes, then recovered.

One round: a driver process (its own process group: the Python driver, its JVM and its
Python workers) reads the table with Spark's own reader (the state the last recovery
left), makes one complete write (the next write after a recovery), then starts another
write and dies in it: SIGKILLed as a group either at a random step of job commit (a step
hook of :mod:`markerstore.commit`) or at a random moment of the write (a fraction of the
complete write's duration, from outside). Recovery is ``markerstore rollback TABLE
--force`` (and the next round's write); then :func:`check_table` compares what DuckDB
and pyarrow read from every data file on storage with what the timeline says was
committed, and ``markerstore verify`` runs when the CLI has it.

Every write has an error table (rows with a null key or a failing check go there), so
each completed commit must hold `rows` = written + error rows (invariant 6).

Driver: ``python -m harness.spark_kills '<json>'``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import child_env
from harness.server_kills import flat_storage_options
from markerstore.commit.job import STEPS  # the job commit's kill points
from markerstore.sql import sql as sql_views

WRITE_OPTIONS = {"markerstore.write.target_file_size": 8000,
                 "markerstore.write.commit.threads": 1,
                 "markerstore.write.error.table.enabled": "true"}
CHECKS = {"non_negative": "amount >= 0"}
# A random-moment kill lands within this share of the first write's duration: the killed
# write is the driver's second, and a warm JVM makes it several times faster.
FRACTION = 0.35


# --- the driver process ------------------------------------------------------------------------
def _frame(spark: Any, first: int, rows: int) -> Any:
    """`rows` rows from id `first`: every 25th has a null key, every 7th a negative amount."""
    return spark.range(first, first + rows, numPartitions=4).selectExpr(
        "CASE WHEN id % 25 = 0 THEN NULL ELSE id END AS id", "id % 3 AS day",
        "concat('row-', cast(id AS string)) AS payload",
        "CAST(id % 7 AS DOUBLE) - 1.0 AS amount")


def _spark_sees(spark: Any, url: str, storage_options: Mapping[str, Any]) -> dict[str, int]:
    """Rows and distinct ids Spark's own reader finds in the table folder (on S3: in a
    local copy of every object outside .markerstore, as s3a would list them)."""
    from markerstore.storage import Storage

    storage = Storage(url, dict(storage_options))
    files = data_files(storage)
    if not files:
        return {"rows": 0, "distinct": 0}
    with tempfile.TemporaryDirectory() as copy:
        folder = url
        if not storage.is_local:
            for rel in files:
                target = os.path.join(copy, rel)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(target, "wb") as handle:
                    handle.write(storage.get(storage.path(rel)))
            folder = copy
        row = spark.read.parquet(folder).selectExpr("count(*) AS n",
                                                    "count(DISTINCT id) AS d").collect()[0]
    return {"rows": int(row["n"]), "distinct": int(row["d"])}


def driver(args: dict[str, Any]) -> None:
    from pyspark.sql import SparkSession

    import markerstore.spark as ms
    from markerstore.commit import add_step_hook

    spark = (SparkSession.builder.master("local[2,4]")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.executor.memory", "512m").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    url, storage_options = args["url"], args["storage_options"]
    options = {**WRITE_OPTIONS, "markerstore.write.markers.type": args["markers"]}

    def write(first: int) -> dict[str, Any]:
        result = ms.write(_frame(spark, first, args["rows"]), url, partition_by="day",
                          options=options, storage_options=storage_options, key="id",
                          checks=CHECKS)
        return result.to_dict()

    _say({"spark": _spark_sees(spark, url, storage_options)})
    started = time.perf_counter()
    _say({"write": write(args["first"]), "seconds": time.perf_counter() - started})
    if args.get("kill") is None:
        _say({"spark": _spark_sees(spark, url, storage_options)})
        spark.stop()
        return
    step = args["kill"].get("step")

    def crash(name: str, info: Mapping[str, Any]) -> None:
        if name == step and (name != "publish" or info["done"] >= info["total"] // 2):
            os.killpg(os.getpgrp(), signal.SIGKILL)

    add_step_hook(crash)
    _say({"go": time.perf_counter() - started})
    _say({"survived": write(args["first"] + args["rows"])})
    sys.stdin.read()  # the kill lands after the write: wait for it


def _say(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


# --- checks ------------------------------------------------------------------------------------
def data_files(storage: Any) -> list[str]:
    """Every file under the table outside .markerstore, relative to the table."""
    found = [storage.relative(p) for p in storage.find(storage.root)]
    return sorted(p for p in found if not p.startswith(".markerstore/"))


def check_table(url: str, storage_options: Mapping[str, Any], rows: int) -> dict[str, Any]:
    """What each reader sees against what the completed commits hold; `problems` lists
    every inconsistency (empty when consistent)."""
    import duckdb
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from markerstore import Table

    table = Table(url, dict(storage_options))
    completed = [i.instant for i in table.timeline() if i.state == "completed"]
    inflight = [i.instant for i in table.timeline() if i.state not in ("completed",
                                                                          "rolledback")]
    committed = [int(table.commit_metadata(i).get("counts", {}).get("rows", 0))
                 for i in completed]
    expected = sum(committed)
    on_storage = data_files(table.storage)
    live = sorted(r[0] for r in sql_views(table, "SELECT path FROM files").fetchall())
    urls = [table.storage.url(table.storage.path(p)) for p in on_storage]
    con = duckdb.connect()
    filesystem = None
    if not table.storage.is_local:
        con.register_filesystem(table.storage.fs)
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        filesystem = PyFileSystem(FSSpecHandler(table.storage.fs))
    seen = {"duckdb": (0, 0), "pyarrow": (0, 0)}
    if urls:
        listing = ", ".join("'" + u.replace("'", "''") + "'" for u in urls)
        duck = con.sql(f"SELECT count(*), count(DISTINCT id) FROM read_parquet([{listing}])")
        seen["duckdb"] = tuple(int(x) for x in duck.fetchall()[0])  # type: ignore[assignment]
        paths = [table.storage.path(p) for p in on_storage] if filesystem else urls
        ids = ds.dataset(paths, format="parquet", filesystem=filesystem).to_table(
            columns=["id"]).column("id")
        seen["pyarrow"] = (len(ids), int(pc.count_distinct(ids).as_py()))
    errors = _error_rows(url, storage_options)
    problems = []
    if inflight:
        problems.append(f"instants left inflight: {inflight}")
    if on_storage != live:
        problems.append(f"data files not committed: {sorted(set(on_storage) - set(live))[:5]};"
                        f" committed files missing: {sorted(set(live) - set(on_storage))[:5]}")
    for reader, (n, distinct) in seen.items():
        if n != expected or distinct != expected:
            problems.append(f"{reader} sees {n} rows ({distinct} distinct ids), the "
                            f"completed commits hold {expected}")
    if int(errors) + expected != rows * len(completed):
        problems.append(f"invariant 6: {expected} rows + {errors} error rows in "
                        f"{len(completed)} commit(s) of {rows} rows each")
    return {"completed": len(completed), "expected_rows": expected, "error_rows": int(errors),
            "seen": {k: list(v) for k, v in seen.items()}, "problems": problems}


def _error_rows(url: str, storage_options: Mapping[str, Any]) -> int:
    """Rows of the committed error instants (0 before the first commit made the table)."""
    import errortable
    from markerstore.errors import NotAnErrorTableError

    try:
        counted = errortable.read(url + "_errors", dict(storage_options)).query(
            "e", "SELECT count(*) FROM e")
    except NotAnErrorTableError:
        return 0
    return int(counted.fetchall()[0][0]) if counted is not None else 0


def verify(url: str, storage_options: Mapping[str, Any]) -> tuple[bool | None, str]:
    """``markerstore verify TABLE``: (consistent, its output), or (None, why) when this
    CLI has no verify command."""
    result = _cli(["verify", url], storage_options)
    if result.returncode == 2 and "No such command" in result.stderr:
        return None, "markerstore verify is not available"
    return result.returncode == 0, (result.stdout + result.stderr).strip()[-2000:]


def _cli(args: list[str], storage_options: Mapping[str, Any]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "markerstore.cli", *args]
    for key, value in flat_storage_options(storage_options).items():
        command += ["--storage-option", f"{key}={value}"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


# --- the campaign ------------------------------------------------------------------------------
@dataclass
class DriverKillReport:
    """What a run of driver kills found (one storage)."""

    storage: str
    seed: int
    rows_per_write: int
    kills: int = 0
    kill_points: dict[str, int] = field(default_factory=dict)
    marker_types: dict[str, int] = field(default_factory=dict)
    recoveries: int = 0
    rolled_back: int = 0
    rolled_forward: int = 0
    completed_writes: int = 0
    checks: int = 0
    verify_runs: int = 0
    inconsistencies: int = 0
    problems: list[str] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def problem(self, text: str) -> None:
        self.inconsistencies += 1
        if len(self.problems) < 20:
            self.problems.append(text)


class _Driver:
    """A driver process in its own process group, read line by line with a deadline."""

    def __init__(self, args: dict[str, Any]) -> None:
        env = child_env({**os.environ, "PYSPARK_PYTHON": sys.executable,
                         "PYSPARK_DRIVER_PYTHON": sys.executable})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.spark_kills", json.dumps(args)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True, env=env)
        self.selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line, or None when the process ended (or `timeout` passed)."""
        assert self.proc.stdout is not None
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.selector.select(max(0.0, deadline - time.time())):
                break
            line = self.proc.stdout.readline()
            if not line:
                return None
            if line.startswith("{"):
                return dict(json.loads(line))
        return None

    def kill(self) -> None:
        """SIGKILL the whole group (driver, JVM, workers) and wait until it is gone."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        self.selector.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def driver_kill_campaign(url: str, kills: int, *, storage_options: Mapping[str, Any] | None
                         = None, seed: int = 0, rows: int = 2000,
                         progress: Callable[[str], None] | None = None) -> DriverKillReport:
    """`kills` rounds of write, killed write, recovery and checks on the table at `url`,
    then a last driver that writes once more and reads; see the module docstring."""
    rng = random.Random(seed)
    options = dict(storage_options or {})
    report = DriverKillReport("local" if "://" not in url else url.split("://")[0], seed, rows)
    started = time.perf_counter()
    first = 0
    last_check: dict[str, Any] | None = None
    for round_ in range(kills + 1):
        markers = rng.choice(("direct", "batched"))
        kill = None
        if round_ < kills:
            kill = ({"step": rng.choice(STEPS)} if rng.random() < 0.5
                    else {"fraction": rng.uniform(0.0, FRACTION)})
        args = {"url": url, "storage_options": options, "markers": markers, "rows": rows,
                "first": first, "kill": kill}
        first += 2 * rows
        _round(args, report, last_check)
        if kill is None:
            break
        report.kills += 1
        report.marker_types[markers] = report.marker_types.get(markers, 0) + 1
        last_check = _recover_and_check(url, options, rows, report)
        if progress is not None:
            progress(f"{report.storage} driver kill {report.kills}/{kills} "
                     f"({_point(kill)}, {markers}): {report.inconsistencies} inconsistencies")
    report.final = check_table(url, options, rows)
    for text in report.final["problems"]:
        report.problem(f"final: {text}")
    report.seconds = time.perf_counter() - started
    return report


def _point(kill: Mapping[str, Any]) -> str:
    return f"step {kill['step']}" if "step" in kill else "at a random moment"


def _round(args: dict[str, Any], report: DriverKillReport,
           last_check: dict[str, Any] | None) -> None:
    """One driver: its Spark read of the recovered table, its complete write, its kill."""
    driver = _Driver(args)
    try:
        seen = driver.next(600)
        if seen is None or "spark" not in seen:
            report.problem("a driver did not start")
            return
        if last_check is not None and seen["spark"] != {
                "rows": last_check["expected_rows"], "distinct": last_check["expected_rows"]}:
            report.problem(f"spark sees {seen['spark']} after recovery, the completed "
                           f"commits hold {last_check['expected_rows']}")
        done = driver.next(900)
        if done is None or "write" not in done:
            report.problem("the write after a recovery did not complete")
            return
        report.completed_writes += 1
        _check_write(done["write"], args["rows"], report)
        kill = args["kill"]
        if kill is None:
            final = driver.next(600)
            if final is None or final.get("spark", {}).get("rows") is None:
                report.problem("the last driver did not read the table")
            return
        go = driver.next(60)
        if go is None or "go" not in go:
            report.problem("a driver did not start its second write")
            return
        if "fraction" in kill:
            time.sleep(kill["fraction"] * done["seconds"])
            late = driver.next(0.01)  # the write may be done already (a warm JVM is faster)
            point = "random moment" if late is None else "after the write completed"
        else:
            # the driver kills itself at that step, or the write never reaches it
            survived = driver.next(900)
            point = f"step {kill['step']}" if survived is None else \
                f"after the write (step {kill['step']} not reached)"
        report.kill_points[point] = report.kill_points.get(point, 0) + 1
    finally:
        driver.kill()


def _check_write(result: Mapping[str, Any], rows: int, report: DriverKillReport) -> None:
    errors = sum(result["error_records"].values())
    if result["rows_written"] + errors != rows:
        report.problem(f"invariant 6: a write of {rows} rows wrote {result['rows_written']} "
                       f"and {errors} error rows")


def _recover_and_check(url: str, options: Mapping[str, Any], rows: int,
                       report: DriverKillReport) -> dict[str, Any]:
    rollback = _cli(["rollback", url, "--force", "--json"], options)
    report.recoveries += 1
    if rollback.returncode != 0:
        report.problem(f"markerstore rollback failed: {rollback.stderr.strip()[-300:]}")
    else:
        for row in json.loads(rollback.stdout or "[]"):
            if row["status"] == "rolled forward":
                report.rolled_forward += 1
            elif row["status"] == "rolled back":
                report.rolled_back += 1
    check = check_table(url, options, rows)
    report.checks += 1
    for text in check["problems"]:
        report.problem(text)
    consistent, output = verify(url, options)
    if consistent is not None:
        report.verify_runs += 1
        if not consistent:
            report.problem(f"markerstore verify: {output[-500:]}")
    return check


if __name__ == "__main__":
    driver(json.loads(sys.argv[1]))
