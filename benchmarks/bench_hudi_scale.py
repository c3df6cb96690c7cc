"""Hudi's failing scale (apache/hudi#13356): 150 executors, ~1,200 partitions in a commit.

Hudi's timeline-server markers time out there and users fall back to direct markers.
Two measures, on S3 (moto in its own process behind :class:`ProxyProcess`, 20 ms a
request, as in :mod:`benchmarks.bench_markers`, whose helpers this reuses):

1. 150 concurrent clients (25 threads in each of 6 processes, as the tasks of 6
   executors) create markers of files spread over 1,200 partitions, one `create` a call
   (Hudi's shape: one request a marker), through one `markerstore serve` process; no
   client retries (`retries=0`), so a timeout or an error shows as a failed client.
   Figures: timeouts and errors, client ack p50/p99, the server's RSS (peak) and CPU
   time, HTTP requests and storage requests per marker.
2. 100,000 files' markers in one commit, end to end (create by 64 clients, reconcile,
   delete): batched markers against direct markers, storage requests by kind and wall
   time. Direct markers are measured at `--direct-max` (default 10,000) and scaled
   linearly above it (one PUT a marker; a LIST and a bulk DELETE a 1,000 keys).

Run alone: ``python -m benchmarks.run --only hudi_scale --output /tmp/x.md``, or
``python -m benchmarks.bench_hudi_scale [--quick] [--direct-max N]``.
"""

from __future__ import annotations

import os
import random
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from benchmarks import bench_markers as bm
from harness.s3 import MotoS3, storage_options
from markerstore import MarkerClient, Table

CLIENTS = 150
PROCESSES = 6
PARTITIONS = 1_200
FILES_PER_PARTITION = 10  # 12,000 markers in the commit
BIG = 100_000


@dataclass
class Scale:
    """The 150-client run."""

    markers: int
    partitions: int
    wall: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    failure: str = ""  # the clients' errors (timeouts included), if any
    http: dict[str, int] = field(default_factory=dict)  # requests served by status
    storage: dict[str, int] = field(default_factory=dict)  # by kind
    rss_mib: float = 0.0
    peak_rss_mib: float = 0.0
    cpu_seconds: float = 0.0
    server_p50_ms: float | None = None
    server_p99_ms: float | None = None


def _proc_figures(pid: int) -> tuple[float, float, float]:
    """(RSS MiB, peak RSS MiB, CPU seconds) of a process, from /proc."""
    with open(f"/proc/{pid}/status") as handle:
        status = dict(line.split(":", 1) for line in handle.read().splitlines() if ":" in line)
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024,
            (int(fields[11]) + int(fields[12])) / ticks)


def _http_requests(server: bm.ServerProcess) -> dict[str, int]:
    """Create requests the server answered, by status."""
    text = server.http.request("GET", f"{server.url}/metrics").data.decode()
    counts: dict[str, int] = {}
    for labels, value in re.findall(r"^markerstore_marker_requests_total{(.*)} (\S+)$",
                                    text, re.MULTILINE):
        if "/create" not in labels:
            continue  # the creates' requests, not the reads of /metrics
        status = re.search(r'status="(\d+)"', labels)
        key = status.group(1) if status else "?"
        counts[key] = counts.get(key, 0) + int(float(value))
    return counts


def _scale_names(n: int, instant: str, partitions: int) -> list[tuple[str, str]]:
    """`n` files over `partitions` partitions, shuffled so that each client's files fall
    in many partitions (an executor's tasks write into partitions all over the table)."""
    write = uuid.uuid4().hex[:8]
    names = [(f"part={i % partitions:04d}",
              f"{write}-{i:07d}_{i % CLIENTS}-1-0_{instant}.parquet") for i in range(n)]
    random.Random(13).shuffle(names)
    return names


def _scale(options: dict[str, Any], endpoint: str, n: int, partitions: int) -> Scale:
    table_url = f"s3://{bm.BUCKET}/hudi-scale-{uuid.uuid4().hex[:6]}"
    table = Table(table_url, options)
    instant = table.start_commit(heartbeat=False)
    names = _scale_names(n, instant, partitions)
    result = Scale(n, partitions)
    server = bm.ServerProcess(table_url, options, endpoint)
    try:
        MarkerClient(server.url, instant)  # the driver opens the folder
        before_storage, before_http = server.requests(), _http_requests(server)
        acks_before = server.histogram("markerstore_marker_ack_seconds")
        _, _, cpu_before = _proc_figures(server.proc.pid)
        spec = bm.ClientSpec("batched", server.url, instant, {"retries": 0})
        try:
            result.wall, result.latencies_ms, _ = bm._run_clients(
                spec, names, 1, clients=CLIENTS, processes=PROCESSES)
        except RuntimeError as exc:
            result.failure = str(exc)
        result.rss_mib, result.peak_rss_mib, cpu_after = _proc_figures(server.proc.pid)
        result.cpu_seconds = cpu_after - cpu_before
        after_storage, after_http = server.requests(), _http_requests(server)
        result.storage = {k: v - before_storage.get(k, 0) for k, v in after_storage.items()}
        result.http = {k: v - before_http.get(k, 0) for k, v in after_http.items()
                       if v - before_http.get(k, 0)}
        acks = [(le, a - b) for (le, a), (_, b) in
                zip(server.histogram("markerstore_marker_ack_seconds"), acks_before,
                    strict=True)]
        result.server_p50_ms = bm._bucket_quantile(acks, 0.5)
        result.server_p99_ms = bm._bucket_quantile(acks, 0.99)
        held = len(MarkerClient(server.url, instant, initialize=False).all())
        if not result.failure and held != n:
            result.failure = f"the server holds {held} markers, {n} were acknowledged"
    finally:
        server.stop()
    return result


def _big(options: dict[str, Any], endpoint: str, n: int, direct_max: int) -> list[bm.Run]:
    """One commit of `n` files' markers: batched (1 and 16 a call), direct (measured at
    up to `direct_max`, scaled above)."""
    runs = [bm._batched(options, endpoint, n, group) for group in (bm.GROUP, 1)]
    measured = bm._direct(options, min(n, direct_max))
    if measured.markers < n:
        scaled = bm._scaled(measured, n)
        factor = n / measured.markers
        scaled.kinds.update({k: round(v * factor) for k, v in measured.kinds.items()})
        runs.append(scaled)
    runs.append(measured)
    return runs


def run(quick: bool = False, direct_max: int = 10_000) -> str:
    files_per_partition = 2 if quick else FILES_PER_PARTITION
    big = 5_000 if quick else BIG
    direct_max = min(direct_max, 1_000 if quick else direct_max)
    load_start = os.getloadavg()
    with MotoS3(process=True) as moto, bm.ProxyProcess(moto.endpoint, bm.DELAY_MS) as proxy:
        moto.create_bucket(bm.BUCKET)
        options = storage_options(proxy.endpoint,
                                  config_kwargs={"max_pool_connections": bm.CLIENTS * bm.GROUP})
        scale = _scale(options, proxy.endpoint, PARTITIONS * files_per_partition, PARTITIONS)
        print(f"   scale: {scale.markers:,} markers in {scale.wall:.1f} s "
              f"{scale.failure or 'no errors'}", flush=True)
        runs = _big(options, proxy.endpoint, big, direct_max)
        print("   big: " + "; ".join(f"{r.mechanism}x{r.group} {r.markers:,} "
                                     f"{r.total_seconds:.1f} s" for r in runs), flush=True)
    return _section(scale, runs, quick, load_start, os.getloadavg())


def _pct(run: Any, q: float) -> str:
    value = run.percentile(q) if isinstance(run, bm.Run) else _quantile(run.latencies_ms, q)
    return "" if value is None else f"{value:.0f}"


def _quantile(values: list[float], q: float) -> float | None:
    probe = bm.Run("", 0)
    probe.latencies_ms = values
    return probe.percentile(q)


def _kinds(counts: dict[str, int]) -> str:
    shown = [(k, v) for k, v in sorted(counts.items()) if k != "total" and v]
    return ", ".join(f"{k} {v:,}" for k, v in shown) or "none"


def _section(scale: Scale, runs: list[bm.Run], quick: bool,
             load_start: tuple[float, ...], load_end: tuple[float, ...]) -> str:
    http = sum(scale.http.values())
    errors = sum(v for k, v in scale.http.items() if k != "200")
    storage = scale.storage.get("total", 0)
    lines = [
        "## Hudi's failing scale: 150 executors, 1,200 partitions in one commit (S3, 20 ms)",
        "",
        "apache/hudi#13356: timeline-server markers time out at about 1,200 partitions per "
        "commit with 150 executors, and users fall back to direct markers. Here "
        f"{CLIENTS} clients ({PROCESSES} processes of {CLIENTS // PROCESSES} threads, as the "
        f"tasks of {PROCESSES} executors) create the markers of {scale.markers:,} files in "
        f"{scale.partitions:,} partitions, one `create` a call and one call after another "
        "(Hudi's shape: one request a marker), through one `markerstore serve` process "
        f"(`batch.interval_ms={bm.INTERVAL_MS}`) writing to S3: moto in its own process "
        f"behind a proxy adding {bm.DELAY_MS} ms a request. The clients do not retry "
        "(`retries=0`, 30 s timeout), so any timeout or error fails a client. Load average "
        f"(1 min) {load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end, on "
        f"{os.cpu_count()} cores shared with other work.", "",
        "| markers | partitions | clients | timeouts and errors | wall s | creates/s "
        "| ack p50 / p99 ms, client | server | server RSS MiB (peak) | server CPU s "
        "| HTTP requests per marker | storage requests per marker (by kind) |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {scale.markers:,} | {scale.partitions:,} | {CLIENTS} "
        f"| {scale.failure or f'0 ({errors} non-200 answers)'} | {scale.wall:.1f} "
        f"| {scale.markers / scale.wall if scale.wall else 0:,.0f} "
        f"| {_pct(scale, 0.5)} / {_pct(scale, 0.99)} "
        f"| <= {bm._ms(scale.server_p50_ms)} / <= {bm._ms(scale.server_p99_ms)} "
        f"| {scale.rss_mib:.0f} ({scale.peak_rss_mib:.0f}) | {scale.cpu_seconds:.1f} "
        f"| {http / scale.markers:.3f} | {storage / scale.markers:.4f} "
        f"({_kinds(scale.storage)}) |", "",
    ]
    if not scale.failure:
        lines += [f"No timeout and no error: each of the {scale.markers:,} markers was "
                  f"acknowledged on its first request ({http:,} create requests) and the "
                  "server lists all of them at the end.", ""]
    lines += _big_section(runs)
    if quick:
        lines += ["", "Quick sizes: a smoke run, not the figures of the issue."]
    return "\n".join(lines) + "\n"


def _big_section(runs: list[bm.Run]) -> list[str]:
    n = max(r.markers for r in runs)
    direct = next(r for r in runs if r.mechanism == "direct" and r.markers == n)
    lines = [
        f"### {n:,} files' markers in one commit, end to end: batched against direct", "",
        f"{bm.CLIENTS} clients (threads of {bm.PROCESSES} processes) create the markers, "
        "then reconcile reads them, then they are deleted; the same S3 and proxy. Storage "
        "requests by kind, of the clients, the marker server and the driver together.", "",
        "| markers | mechanism | markers per call | create s | reconcile s | delete s "
        "| total s | storage requests (by kind) | vs direct |",
        "|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for run in sorted(runs, key=lambda r: (-r.markers, r.mechanism != "batched", -r.group)):
        est = " (est.)" if run.estimated else ""
        versus = ""
        if run.mechanism == "batched":
            versus = (f"{direct.total_seconds / run.total_seconds:.1f}x faster, "
                      f"{100 * run.total_requests / direct.total_requests:.2f}% of the "
                      "requests")
        lines.append(f"| {run.markers:,} | {run.mechanism}{est} | {run.group} "
                     f"| {run.seconds['create']:.1f} | {run.seconds['reconcile']:.2f} "
                     f"| {run.seconds['delete']:.2f} | {run.total_seconds:.1f} "
                     f"| {run.total_requests:,} ({_kinds(dict(run.kinds))}) | {versus} |")
    if direct.estimated:
        measured = min(r.markers for r in runs if r.mechanism == "direct")
        lines += ["", f"Direct at {n:,} is the measured {measured:,} row scaled linearly "
                  "(creates are one PUT each, whatever the size; "
                  "listing and bulk deletes are one request a 1,000 keys): direct markers "
                  "at 100,000 took 744 s alone before, too long on this shared machine."]
    return lines


if __name__ == "__main__":
    argv = sys.argv[1:]
    limit = int(argv[argv.index("--direct-max") + 1]) if "--direct-max" in argv else 10_000
    started = time.time()
    print(run(quick="--quick" in argv, direct_max=limit))
    print(f"{time.time() - started:.0f} s", file=sys.stderr)
