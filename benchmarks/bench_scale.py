"""A million markers: the marker server's memory, GET, reload; the `markers` view; reconcile.

Re-measures the table of issue 13 (4 client threads, `create_many` of 1,000 markers per
call, local disk). The marker server runs as `markerstore serve` in its own process and
its memory is read from /proc/<pid>/status (VmRSS now, VmHWM the peak; the peak is reset
through /proc/<pid>/clear_refs before the GET). The SQL count and reconcile run in a
process of their own too, so their peak is theirs alone.

Side by side: with ``MARKERSTORE_BENCH_BASELINE=<a source tree of an earlier version>``
(e.g. ``git archive main | tar -x -C /tmp/old``) every measure is taken again with that
code (its server process and its query processes get it first on PYTHONPATH), on a table
of its own, in the same run. Without it, the figures of issue 13 are quoted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import urllib3

from harness.server_kills import server_url
from markerstore.server.client import MarkerClient
from markerstore.table import Table

CLIENTS = 4
PER_CALL = 1000
LOSERS = 1000  # marker files that reconcile finds are not committed, and deletes
# Reconcile inside a real Spark write (local[2]): files in one commit, and its tasks. Each
# task writes one file per partition value it holds, so files = tasks x values.
SPARK_FILES = 4000
SPARK_TASKS = 8
BASELINE_ENV = "MARKERSTORE_BENCH_BASELINE"
# The figures of issue 13, measured on main before this work (same shape, same machine).
ISSUE = {"held": "876-898 (idle 202)", "get_s": "3.3", "get_peak": "1,203",
         "reload_s": "5.3", "count_s": "3.5", "reconcile_s": "10.5",
         "reconcile_peak": "1,367"}
TARGETS = {"held": 300, "get_peak": 400, "reload_s": 2.0, "count_s": 0.5,
           "reconcile_s": 1.0, "reconcile_peak": 500}


def _status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def _reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class Server:
    """`markerstore serve` of a local table in its own process."""

    def __init__(self, table_path: str, src: str | None) -> None:
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = src
        # `-m` puts the working folder first on sys.path: run in `src` for its code
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "markerstore.cli", "serve", "--table", table_path],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
            cwd=src or None)
        self.url = server_url(self.proc)
        self.http = urllib3.PoolManager(retries=False, timeout=600)

    def mem(self) -> dict[str, float]:
        return _status(self.proc.pid)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Result:
    label: str
    n: int = 0
    create_s: float = 0.0
    idle: float = 0.0
    held: float = 0.0
    held_peak: float = 0.0
    get_s: float = 0.0
    get_peak: float = 0.0
    get_count: int = 0
    reload_s: float = 0.0
    restart_s: float = 0.0
    reloaded: float = 0.0
    count_s: float = 0.0
    count_peak: float = 0.0
    reconcile_s: float = 0.0
    reconcile_peak: float = 0.0
    reconcile_deleted: int = 0
    rollback_s: float = 0.0
    rollback_peak: float = 0.0
    rollback_deleted: int = 0
    rollback_record: int = 0
    spark: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _names(n: int, instant: str) -> list[tuple[str, str]]:
    write = uuid.uuid4().hex[:8]
    return [(f"part={i % 100:03d}", f"{write}-{i:07d}_{i % CLIENTS}-1-0_{instant}.parquet")
            for i in range(n)]


def _create(url: str, instant: str, names: list[tuple[str, str]]) -> float:
    chunks = [names[i:i + PER_CALL] for i in range(0, len(names), PER_CALL)]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        client = MarkerClient(url, instant, initialize=False)
        try:
            for chunk in chunks[k::CLIENTS]:
                client.create_many([(p, f, "CREATE") for p, f in chunk])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            client.close()

    MarkerClient(url, instant).close()  # the driver opens the folder
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"create_many failed: {errors[0]!r}") from errors[0]
    return time.perf_counter() - started


def _get_all(server: Server, instant: str) -> tuple[float, float, int]:
    """Seconds for GET of every marker (read and parsed as the client does), the server's
    peak RSS meanwhile, and the count."""
    peak = [0.0]
    stop = threading.Event()
    reset = _reset_peak(server.proc.pid)

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], server.mem()["VmRSS"])
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    markers = MarkerClient(server.url, instant, initialize=False).all()
    elapsed = time.perf_counter() - started
    stop.set()
    sampler.join()
    if reset:
        peak[0] = max(peak[0], server.mem()["VmHWM"])
    return elapsed, peak[0], len(markers)


_CHILD = r"""
import json, sys, time
from pathlib import Path
def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
kind, path, instant, paths_file = sys.argv[1:5]
import pyarrow.parquet as pq
import markerstore
from markerstore.table import Table
print("code:", markerstore.__file__, file=sys.stderr)
table = Table(path)
if kind == "spark":
    import os
    from pyspark.sql import SparkSession
    import markerstore.spark as ms
    files, tasks = int(instant), int(paths_file)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("bench-scale")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    opts = {"markerstore.write.markers.type": "batched"}
    def frame(n):
        return spark.range(0, n * 20, numPartitions=tasks).selectExpr(
            "id", f"id % {n // tasks} AS p", "rand(7) AS x")
    ms.write(frame(tasks * 10), path + "-warm", partition_by="p", options=opts)
    result = ms.write(frame(files), path, partition_by="p", options=opts)
    spark.stop()
    t = result.timings
    print(json.dumps({"files": result.num_files, "total": result.duration,
                      "commit": t["commit"], "reconcile": t.get("commit_reconcile", 0.0)}))
elif kind == "count":
    try:  # the SQL package's import is not the query's time
        from markerstore.sql import sql as sql_views
    except ImportError:  # code from before markerstore.sql: the Table method
        sql_views = lambda table, query: table.sql(query)
    started = time.perf_counter()
    count = sql_views(table, "SELECT count(*) FROM markers").fetchall()[0][0]
    print(json.dumps({"s": time.perf_counter() - started, "peak": hwm(), "count": count}))
elif kind == "rollback":
    Path("/proc/self/clear_refs").write_text("5")
    started = time.perf_counter()
    result = table.rollback(instant, force=True)
    elapsed = time.perf_counter() - started
    deleted = len(result.deleted) if hasattr(result, "deleted") else len(result.deleted_files)
    record = sum(p.stat().st_size for p in Path(path, ".markerstore", "timeline").glob(
        "*.rollback"))
    print(json.dumps({"s": elapsed, "peak": hwm(), "deleted": deleted, "record": record}))
else:
    committed = pq.read_table(paths_file).column("path")
    import pyarrow as pa
    pa.default_memory_pool().release_unused()
    # the peak from here on: reconcile's, with its input held (not the Parquet read's)
    Path("/proc/self/clear_refs").write_text("5")
    started = time.perf_counter()
    try:  # Arrow, where reconcile takes it
        result = table.reconcile(instant, committed)
    except TypeError:  # a list of paths
        committed = committed.to_pylist()
        started = time.perf_counter()
        result = table.reconcile(instant, committed)
    elapsed = time.perf_counter() - started
    print(json.dumps({"s": elapsed, "peak": hwm(), "deleted": result.files_cleaned}))
"""


def _child(kind: str, path: str, instant: str, paths_file: str, src: str | None
           ) -> dict[str, Any]:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, path, instant, paths_file],
                         capture_output=True, text=True, env=env, check=False, timeout=1800,
                         cwd=src or None)  # `-c` too puts the working folder first
    if out.returncode != 0:
        raise RuntimeError(f"{kind} failed: {out.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return answer


def _measure(label: str, n: int, workdir: Path, src: str | None) -> Result:
    result = Result(label, n)
    path = str(workdir / f"t-{label}")
    table = Table(path)
    instant = table.start_commit(heartbeat=False)
    names = _names(n, instant)
    server = Server(path, src)
    try:
        time.sleep(1.0)
        result.idle = server.mem()["VmRSS"]
        result.create_s = _create(server.url, instant, names)
        time.sleep(3.0)  # compactions settle
        mem = server.mem()
        result.held, result.held_peak = mem["VmRSS"], mem["VmHWM"]
        result.get_s, result.get_peak, result.get_count = _get_all(server, instant)
    finally:
        server.stop()
    started = time.perf_counter()
    server = Server(path, src)
    try:
        up = time.perf_counter()
        answer = server.http.request(
            "GET", f"{server.url}/v1/markers/{instant}/exists").data
        loaded = time.perf_counter()
        assert json.loads(answer)["exists"] is True
        result.restart_s, result.reload_s = loaded - started, loaded - up
        result.reloaded = server.mem()["VmRSS"]
    finally:
        server.stop()
    count = _child("count", path, instant, "", src)
    result.count_s, result.count_peak = count["s"], count["peak"]
    if count["count"] != n:
        result.notes.append(f"count(*) answered {count['count']:,}, not {n:,}")
    # reconcile: every marker's file is committed but LOSERS, which exist and are deleted
    losers = names[:LOSERS]
    for partition, file_name in losers:
        target = Path(path) / partition / file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"PAR1 loser")
    paths_file = str(workdir / f"committed-{label}.parquet")
    pq.write_table(pa.table({"path": [f"{p}/{f}" for p, f in names[LOSERS:]]}), paths_file)
    del names, losers
    rec = _child("reconcile", path, instant, paths_file, src)
    result.reconcile_s, result.reconcile_peak = rec["s"], rec["peak"]
    result.reconcile_deleted = rec["deleted"]
    rb = _child("rollback", path, instant, "", src)
    result.rollback_s, result.rollback_peak = rb["s"], rb["peak"]
    result.rollback_deleted, result.rollback_record = rb["deleted"], rb["record"]
    result.spark = _child("spark", str(workdir / f"spark-{label}"), str(SPARK_FILES),
                          str(SPARK_TASKS), src)
    return result


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min) / {five:.1f} (5 min)"


def _cell(new: float, old: Result | None, attr: str, fmt: str, issue: str) -> str:
    text = format(new, fmt)
    if old is not None:
        before = getattr(old, attr)
        ratio = before / new if new else float("inf")
        return f"{text} (main here: {format(before, fmt)}; {ratio:.1f}x)"
    return f"{text} (issue 13: {issue})"


def _verdict(value: float, target: float) -> str:
    return "**met**" if value <= target else "**not met**"


def _section(new: Result, old: Result | None, load_before: str, load_after: str) -> str:
    n = new.n
    rows = [
        ("marker server RSS holding the markers, MiB", _cell(new.held, old, "held", ".0f",
                                                             ISSUE["held"])
         + f"; idle {new.idle:.0f}", f"<= {TARGETS['held']}",
         _verdict(new.held, TARGETS["held"])),
        ("GET all markers, s", _cell(new.get_s, old, "get_s", ".2f", ISSUE["get_s"]),
         "streamed", "**met** (streamed)"),
        ("GET all markers: server peak RSS, MiB",
         _cell(new.get_peak, old, "get_peak", ".0f", ISSUE["get_peak"]),
         f"<= {TARGETS['get_peak']}", _verdict(new.get_peak, TARGETS["get_peak"])),
        ("restart and reload (first request after the server is up), s",
         _cell(new.reload_s, old, "reload_s", ".2f", ISSUE["reload_s"])
         + f"; from spawn {new.restart_s:.2f}", f"<= {TARGETS['reload_s']}",
         _verdict(new.reload_s, TARGETS["reload_s"])),
        ("`SELECT count(*) FROM markers`, s",
         _cell(new.count_s, old, "count_s", ".2f", ISSUE["count_s"])
         + f"; peak RSS {new.count_peak:.0f} MiB", f"<= {TARGETS['count_s']}",
         _verdict(new.count_s, TARGETS["count_s"])),
        (f"`Table.reconcile` against {n - LOSERS:,} committed files, s",
         _cell(new.reconcile_s, old, "reconcile_s", ".2f", ISSUE["reconcile_s"]),
         f"<= {TARGETS['reconcile_s']}", _verdict(new.reconcile_s, TARGETS["reconcile_s"])),
        ("`Table.reconcile`: peak RSS of its process, MiB",
         _cell(new.reconcile_peak, old, "reconcile_peak", ".0f", ISSUE["reconcile_peak"]),
         f"<= {TARGETS['reconcile_peak']}",
         _verdict(new.reconcile_peak, TARGETS["reconcile_peak"])),
    ]
    lines = [
        "## Scale: a million markers (issue 13)",
        "",
        f"{n:,} markers of one instant created by {CLIENTS} client threads, `create_many` "
        f"of {PER_CALL:,} markers per call, on local disk, through `markerstore serve` in "
        "its own process (memory from /proc/<pid>/status: VmRSS, and VmHWM reset through "
        "clear_refs for a peak). The GET is the client's `all()` (the answer read and "
        "parsed). Reload: the server is stopped and started again; the time is that of "
        "the first request for the instant, which loads its folder (and from spawning the "
        "process). The `markers` view count and `Table.reconcile` (committed files read "
        f"from a Parquet file first, {LOSERS:,} marker files not committed and deleted) "
        "each run in a process of their own, so the peak RSS is theirs alone (reconcile's "
        "from the call on, VmHWM reset once its input is read and held). "
        + ("Each figure is followed by main's, measured in the same run on a table of its "
           "own with main's code, and the ratio. " if old else
           "Main's figures are quoted from issue 13. ")
        + f"Load average: {load_before} before, {load_after} after, on "
        f"{os.cpu_count()} cores shared with other work.",
        "",
        "| measure | now | target | |",
        "|---|---|---|---|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        f"- creates: {n:,} in {new.create_s:.1f} s ({n / new.create_s:,.0f}/s)"
        + (f"; main here: {old.create_s:.1f} s" if old else "")
        + f"; server peak RSS while creating {new.held_peak:.0f} MiB"
        + (f" (main: {old.held_peak:.0f})" if old else "")
        + f"; after the reload it holds {new.reloaded:.0f} MiB"
        + (f" (main: {old.reloaded:.0f})" if old else ""),
        f"- GET answered {new.get_count:,} markers; reconcile deleted "
        f"{new.reconcile_deleted:,} files",
        f"- rollback of the instant afterwards, from its markers alone (every marked file "
        f"deleted, most of them already gone; local disk), in a process of its own: "
        f"{new.rollback_s:.1f} s, peak RSS {new.rollback_peak:.0f} MiB, "
        f"{new.rollback_deleted:,} files, a rollback record of "
        f"{new.rollback_record / 1024:,.0f} KiB"
        + (f"; main here: {old.rollback_s:.1f} s, {old.rollback_peak:.0f} MiB, a record of "
           f"{old.rollback_record / 1024:,.0f} KiB" if old else ""),
    ]
    lines += _spark_lines(new, old) + [f"- {n}" for n in new.notes + (old.notes if old else [])]
    return "\n".join(lines) + "\n"


def _spark_lines(new: Result, old: Result | None) -> list[str]:
    """Reconcile inside a real Spark write: its seconds and its share of the write."""
    sp = new.spark
    if not sp:
        return []
    share = sp["reconcile"] / sp["total"] if sp["total"] else 0.0
    text = (f"- reconcile inside a real Spark write (`markerstore.spark.write`, local[2], "
            f"batched markers, stats rows from Spark's tasks): {sp['files']:,} files in "
            f"{SPARK_TASKS} tasks, reconcile {sp['reconcile']:.2f} s "
            f"({sp['reconcile'] / sp['files'] * 1000:.3f} s per 1,000 files) of a "
            f"{sp['commit']:.2f} s job commit and a {sp['total']:.1f} s write: "
            f"{share:.1%} of the write")
    if old is not None and old.spark:
        o = old.spark
        ratio = o["reconcile"] / sp["reconcile"] if sp["reconcile"] else float("inf")
        text += (f"; main here: reconcile {o['reconcile']:.2f} s of a {o['total']:.1f} s "
                 f"write ({o['reconcile'] / o['total']:.1%}), {ratio:.1f}x")
    return [text]


def run(quick: bool = False, n: int | None = None) -> str:
    n = n or (100_000 if quick else 1_000_000)
    baseline = os.environ.get(BASELINE_ENV) or None
    workdir = Path(tempfile.mkdtemp(prefix="markerstore-scale-"))
    load_before = _load()
    try:
        new = _measure("new", n, workdir, None)
        old = _measure("main", n, workdir, baseline) if baseline else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _section(new, old, load_before, _load())


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
