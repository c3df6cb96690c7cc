"""Write the figures of a `make test-cluster` run into docs/RELIABILITY.md ("Between
hosts", the section `make soak` keeps):

    MARKERSTORE_CLUSTER_REPORT=/tmp/figures.json make test-cluster
    .venv/bin/python -m tests.cluster.report /tmp/figures.json [docs/RELIABILITY.md]
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from harness.soak import KEPT_HEADING

ROWS = "2,000 rows (40 with a null key: error records), `markerstore.spark.write`, batched markers"


def _s(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "-"


def _fault_row(name: str, where: str, figures: dict[str, Any]) -> str:
    outcome = {"committed": "committed exactly",
               "rolled back": "failed, rolled back"}.get(figures.get("outcome", ""), "-")
    if figures.get("error"):
        outcome += f" ({figures['error']})"
    return (f"| {name} | {where} | {ROWS}, 8 tasks of 20 ms a row | {outcome} | "
            f"{_s(figures.get('seconds'))} | at {_s(figures.get('fault_at_s'))} s; "
            f"{figures.get('executors_started', '-')} executors started in its place; "
            f"{figures.get('files_cleaned', '-')} files of lost attempts deleted at commit |")


def faults_table(figures: dict[str, Any]) -> list[str]:
    ll = figures.get("loss_and_latency", {})
    rows = ["| fault | between | write | outcome | seconds | evidence |",
            "|---|---|---|---|---:|---|",
            f"| none (baseline) | - | {ROWS}, 4 tasks | committed exactly | "
            f"{_s(ll.get('baseline_s'))} | - |",
            f"| 10% packet loss, both ways | both workers and the driver's host (the marker "
            f"server; Spark's RPC ports spared) | the same | committed exactly | "
            f"{_s(ll.get('loss_s'))} | {ll.get('loss_dropped_packets', '-')} packets dropped "
            f"(iptables counters) |",
            f"| 200 ms more per round trip | the same | the same | committed exactly | "
            f"{_s(ll.get('latency_s'))} | {ll.get('latency_connections', '-')} connections "
            f"through the delaying proxies, {ll.get('latency_delayed_sends', '-')} sends held "
            f"back 200 ms each |"]
    if "link_cut_30s" in figures:
        rows.append(_fault_row("link cut for 30 s", "worker1 and the driver's host (worker1 "
                               "still reaches S3 and the master)", figures["link_cut_30s"]))
    if "worker_removed" in figures:
        rows.append(_fault_row("worker host removed (link, processes, namespace)",
                               "worker2 and everything", figures["worker_removed"]))
    return rows


def times_table(figures: dict[str, Any]) -> list[str]:
    names = {"cluster_start_s": "cluster start (6 hosts, master, 2 workers, S3)",
             "driver_session_s": "a driver's session on the cluster",
             "connect_server_start_s": "Spark Connect server start",
             "stream_restart_s": "stream restarted after its driver was killed, to its end",
             "ingest_spark_defaults_s": "`markerstore ingest --master spark://...`, the rest "
                                        "from spark-defaults.conf",
             "write_function_batched_s": "first write of the driver (its executors' Python "
                                         "workers start): function writer, batched",
             "ingest_remote_s": "`markerstore ingest --remote`"}
    rows = ["| step | seconds |", "|---|---:|"]
    for key, value in sorted(figures.items()):
        if not isinstance(value, (int, float)):
            continue
        label = names.get(key) or key.removesuffix("_s").replace("_", " ")
        rows.append(f"| {label} | {_s(value)} |")
    return rows


def _stream_line(figures: dict[str, Any]) -> str:
    killed = figures.get("stream_killed_at") or {}
    return ("A streaming query over Spark Connect (one source file per micro-batch, batched "
            "markers, error table) lost its driver, the Connect server's JVM SIGKILLed with "
            f"{killed.get('completed', '-')} micro-batch committed and "
            f"{killed.get('inflight', 0)} in flight; a new server on the same host and the "
            f"query started again from its checkpoint finished in "
            f"{_s(figures.get('stream_restart_s'))} s, every source row in the table once.")


def section(figures: dict[str, Any]) -> str:
    load = os.getloadavg()[0]
    lines = [
        KEPT_HEADING + ": faults on a Spark cluster",
        "",
        f"Written by `make test-cluster` (tests/cluster, `python -m tests.cluster.report`), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores shared with other work (load "
        f"average {load:.1f} when written). Each host is a network namespace on one bridge: "
        f"a Spark standalone master, two workers with one core each, moto's S3 server, the "
        f"driver (and a Spark Connect server), a client. Faults are injected in the workers' "
        f"namespaces: iptables drops (`-m statistic --mode random`), a transparent TCP proxy "
        f"that delays what a worker sends by 200 ms, a cut link, a host removed. After each "
        f"write pyarrow and DuckDB read the table back: exact rows, every data file named by "
        f"a completed commit, no marker, staged object or open multipart upload left, the "
        f"error table's count.",
        "",
        *faults_table(figures),
        "",
        _stream_line(figures),
        "",
        "What each scenario took, on the same run (a write's seconds include Spark's job "
        "and the commit; the checks that read the table back are not counted):",
        "",
        *times_table(figures),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    figures = json.loads(Path(argv[0]).read_text())
    target = Path(argv[1] if len(argv) > 1 else "docs/RELIABILITY.md")
    text = target.read_text()
    at = text.find("\n" + KEPT_HEADING)
    head = text if at < 0 else text[:at]
    after = -1 if at < 0 else text.find("\n## ", at + 1)  # sections after this one: kept
    tail = "" if after < 0 else text[after:]
    target.write_text(head.rstrip("\n") + "\n\n" + section(figures) + tail)


if __name__ == "__main__":
    main(sys.argv[1:])
