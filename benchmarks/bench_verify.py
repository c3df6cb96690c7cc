"""`markerstore verify` benchmark: a 200,000-file table on local disk, a smaller one on S3.

The table is built the way commits leave it (files under Hive partitions, each commit's
completed instant listing its files: written through the timeline API, without markers,
to build it faster), plus 1% orphan files no commit references. Each run goes in a fresh
child process, which reports its wall time, its peak RSS (and its RSS after the imports,
before the run) and the storage requests it made:

* ``verify``: :func:`markerstore.commit.verify.verify` (the listing streamed in Arrow
  chunks to Parquet files that DuckDB anti-joins with the committed files);
* ``naive`` (the baseline, side by side): the same orphan / missing check holding one
  Python string per file (``fs.find`` into a set, the committed files into a set, set
  differences), as a first fsck would.

S3 is moto's server in its own process (no added latency: requests are what S3 bills and
what its latency multiplies). Both checks must find exactly the orphans put there.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.s3 import MotoS3
from markerstore.table import Table

BODY = b"PAR1" + b"\0" * 96 + b"PAR1"  # 104 bytes: the size is checked, not the content
PARTITIONS = 100
ORPHAN_SHARE = 100  # one orphan per 100 committed files


def _put_many(table: Table, paths: list[str]) -> None:
    storage = table.storage
    if storage.is_local:
        for path in paths:
            full = storage.path(path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as handle:
                handle.write(BODY)
        return
    batches = [paths[i:i + 500] for i in range(0, len(paths), 500)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda b: storage.fs.pipe({storage.path(p): BODY for p in b}), batches))


def build(url: str, storage_options: dict[str, Any], files: int, commits: int) -> int:
    """`files` committed files over `commits` commits, and files/100 orphans (named like
    data files of the last commit, never committed). Returns the number of orphans."""
    table = Table(url, storage_options)
    per = files // commits
    instant = ""
    for _ in range(commits):
        instant = table.start_commit(heartbeat=False)
        write_uuid = table.write_uuid(instant)
        paths = [f"part={k % PARTITIONS}/{write_uuid}-{k}_{k}-1-{k}_{instant}.parquet"
                 for k in range(per)]
        _put_many(table, paths)
        # The completed instant a commit of these files writes (files with path, size and
        # rows); written through the timeline, without markers, to build the table faster.
        table._timeline.complete(instant, {
            "write_uuid": write_uuid, "operation": "write",
            "files": [{"path": p, "size": len(BODY), "rows": 1} for p in paths],
            "counts": {"files": len(paths), "bytes": len(BODY) * len(paths),
                       "rows": len(paths)}})
    stray = str(uuid.uuid4())
    orphans = [f"part={k % PARTITIONS}/{stray}-{k}_{k}-1-{k}_{instant}.parquet"
               for k in range(files // ORPHAN_SHARE)]
    _put_many(table, orphans)
    return len(orphans)


def _rss_mib(field: str = "VmHWM") -> float:
    """This process's peak RSS (VmHWM) or current RSS (VmRSS), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(mode: str, url: str, options_json: str) -> None:
    """Run one check in this (fresh) process and print its figures as JSON."""
    # The same imports in both checks before the idle RSS: markerstore's (pyarrow, DuckDB)
    # and pandas, which pyarrow imports on its first conversion from Python objects.
    import pandas  # noqa: F401

    import markerstore.commit.verify as verify_module

    table = Table(url, json.loads(options_json))
    import gc

    gc.collect()
    idle = _rss_mib("VmRSS")
    table.storage.reset_requests()
    started = time.perf_counter()
    if mode == "verify":
        report = verify_module.verify(table)
        orphans = report.counts().get("orphan_file", 0)
        missing = report.counts().get("missing_file", 0)
        listed = report.files_listed
    else:
        storage = table.storage
        base = storage.root.rstrip("/") + "/"
        on_storage = {p[len(base):] for p in storage.fs.find(storage.root)}
        on_storage = {p for p in on_storage if not p.startswith(".markerstore/")}
        committed = {f["path"] for _, meta in table._timeline.completed()
                     for f in meta.get("files", [])}
        orphans, missing, listed = len(on_storage - committed), len(committed - on_storage), \
            len(on_storage)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rss_mib": _rss_mib(), "idle_mib": idle,
                      "requests": table.storage.requests(), "orphans": orphans,
                      "missing": missing, "listed": listed}))


def measure(mode: str, url: str, storage_options: dict[str, Any]) -> dict[str, Any]:
    code = "import sys; from benchmarks.bench_verify import child; child(*sys.argv[1:])"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", code, mode, url, json.dumps(storage_options)],
                         capture_output=True, text=True, check=True, timeout=3600, env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _row(where: str, files: int, mode: str, r: dict[str, Any], base: dict[str, Any]) -> str:
    total = r["requests"].get("total", sum(v for k, v in r["requests"].items()
                                           if k != "total"))
    per_k = total / (files / 1000)
    ratio = "" if mode == "naive" else \
        f" ({base['seconds'] / r['seconds']:.1f}x the baseline's speed, " \
        f"{(r['rss_mib'] - r['idle_mib']) / max(base['rss_mib'] - base['idle_mib'], 1):.2f}x " \
        "its memory)"
    return (f"| {where} | {files:,} | {mode} | {r['seconds']:.2f}{ratio} | "
            f"{r['rss_mib']:.0f} ({r['rss_mib'] - r['idle_mib']:+.0f}) | {total:,} | "
            f"{per_k:.2f} | {r['orphans']:,} / {r['missing']:,} |")


def _case(where: str, url: str, options: dict[str, Any], files: int, commits: int
          ) -> tuple[list[str], float]:
    started = time.perf_counter()
    orphans = build(url, options, files, commits)
    built = time.perf_counter() - started
    naive = measure("naive", url, options)
    fast = measure("verify", url, options)
    for r in (naive, fast):
        assert r["orphans"] == orphans and r["missing"] == 0, r
    listed = files + orphans
    return [_row(where, listed, "naive", naive, naive),
            _row(where, listed, "verify", fast, naive)], built


def run(quick: bool = False) -> str:
    """Build the tables, measure both checks, return a Markdown section."""
    local_files = 20_000 if quick else 200_000
    s3_files = 2_000 if quick else 20_000
    base = tempfile.mkdtemp(prefix="bench-verify-")
    rows: list[str] = []
    notes: list[str] = []
    try:
        for files in (local_files // 10, local_files):
            lines, built = _case("local disk", os.path.join(base, f"table{files}"), {}, files,
                                 20)
            rows += lines
            notes.append(f"local table of {files:,} files built in {built:.0f} s")
        with MotoS3(process=True) as moto:
            bucket = moto.create_bucket(f"bench-verify-{uuid.uuid4().hex[:8]}")
            lines, built = _case("S3 (moto)", f"s3://{bucket}/table", moto.storage_options(),
                                 s3_files, 10)
            rows += lines
            notes.append(f"S3 table built in {built:.0f} s")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return "\n".join([
        "## Verify: `markerstore verify` over a large table", "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{sys.version.split()[0]}. Load average after the runs: "
        f"{os.getloadavg()[0]:.1f} (1 min) / {os.getloadavg()[1]:.1f} (5 min) on "
        f"{os.cpu_count()} cores, shared with other work."
        + (" **Quick run: sizes scaled down 10x.**" if quick else ""), "",
        "Each table holds its committed files (20 commits on local disk, 10 on S3, "
        f"{PARTITIONS} partitions) plus 1% orphans; both checks find exactly those orphans "
        "and no missing file. `verify` streams the listing in Arrow chunks to Parquet files "
        "that DuckDB reads and anti-joins with the committed files (also loaded in chunks, "
        "a few commits at a time); `naive` (the baseline) holds a Python set of every listed "
        "and every committed path. Each runs in a fresh process; RSS is its peak, with the "
        "growth over its RSS after the same imports in both (markerstore, pyarrow, DuckDB, "
        "pandas) in parentheses: what the check itself holds. S3 is moto's server in its "
        f"own process; the S3 table is {s3_files:,} files (moto takes minutes to PUT "
        "200,000 objects on this shared machine; the requests per 1,000 files do not depend "
        "on the size: one LIST page per 1,000 keys, one GET per commit).", "",
        "| storage | files listed | check | seconds | peak RSS MiB (growth) | storage requests "
        "| requests per 1,000 files | orphans / missing found |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
        *rows, "", "; ".join(notes) + ".", ""])


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
