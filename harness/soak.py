"""The kill campaign (`make soak`): SIGKILL the marker server and the Spark driver at
random points, on local disk and on S3, and write docs/RELIABILITY.md with what it found.

* the marker server (:mod:`harness.server_kills`): `--server-kills` kills per
  storage, `--clients` client threads mixing `create` and `create_many`; every marker a
  client got a success answer for must be in the folder after the kill;
* the Spark driver (:mod:`harness.spark_kills`): `--driver-kills` kills per
  storage, of real writes (both marker types, with the error table), each followed by
  `markerstore rollback`, the next write, and the readers' check.

S3 is moto's server in its own process. Run: ``python -m harness.soak
[--server-kills 500] [--driver-kills 50] [--output docs/RELIABILITY.md]`` (the defaults
are the full campaign: 1,000 server kills and 100 driver kills over both storages).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.s3 import MotoS3
from harness.server_kills import ServerKillReport, server_kill_campaign
from harness.spark_kills import FRACTION, DriverKillReport, driver_kill_campaign
from markerstore.table import Table

STORAGES = ("local", "s3")
FULL = (1_000, 100)  # the full campaign: server kills, driver kills (both storages)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f}"


def _log(text: str) -> None:
    print(f"{datetime.now(timezone.utc):%H:%M:%S} {text}", flush=True)


RUN_SECONDS = {"local": (0.05, 0.8), "s3": (0.2, 2.0)}  # a server's life before its kill


def run(server_kills: int, driver_kills: int, *, clients: int = 64, seed: int = 13,
        storages: Sequence[str] = STORAGES, rows: int = 2000, quiet: bool = False,
        after_part: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run both parts on each storage; the figures for :func:`markdown` (also given to
    `after_part` after each part, so that a campaign cut short still reports)."""
    figures: dict[str, Any] = {
        "started": datetime.now(timezone.utc), "load_start": _load(), "clients": clients,
        "servers": [], "drivers": [], "failures": [], "done": False}
    began = time.perf_counter()
    progress = None if quiet else _log

    def part_done() -> None:
        figures["seconds"], figures["load_end"] = time.perf_counter() - began, _load()
        if after_part is not None:
            after_part(figures)

    with tempfile.TemporaryDirectory(prefix="soak-") as scratch:
        moto = MotoS3(process=True).start() if "s3" in storages else None
        try:
            for offset, kind in enumerate(storages):
                url, options = _location(kind, scratch, moto)
                if server_kills:
                    _part(figures["failures"], f"marker server kills on {kind}",
                          figures["servers"], server_kill_campaign,
                          Table(f"{url}/markers", options), server_kills, clients=clients,
                          seed=seed + offset, storage_options=options,
                          run_seconds=RUN_SECONDS[kind], progress=progress)
                    part_done()
                if driver_kills:
                    _part(figures["failures"], f"Spark driver kills on {kind}",
                          figures["drivers"], driver_kill_campaign, f"{url}/events",
                          driver_kills, storage_options=options, seed=seed + 100 + offset,
                          rows=rows, progress=progress)
                    part_done()
        finally:
            if moto is not None:
                moto.stop()
    figures["done"] = True
    part_done()
    return figures


def _part(failures: list[str], name: str, into: list[Any], part: Callable[..., Any],
          *args: Any, **kwargs: Any) -> None:
    """Run one part, its report into `into`; an exception is recorded (the campaign goes
    on, and the report says so)."""
    try:
        into.append(part(*args, **kwargs))
    except Exception as exc:
        _log(f"{name} failed: {exc!r}")
        failures.append(f"{name}: {type(exc).__name__}: {exc}")


def _location(kind: str, scratch: str, moto: MotoS3 | None) -> tuple[str, dict[str, Any]]:
    if kind == "local":
        return os.path.join(scratch, "local"), {}
    assert moto is not None
    bucket = moto.create_bucket(f"soak-{uuid.uuid4().hex[:10]}")
    return f"s3://{bucket}", moto.storage_options()


def losses(figures: dict[str, Any]) -> int:
    return sum(r.lost + r.unknown_to_fresh_server + r.recreated for r in figures["servers"])


def inconsistencies(figures: dict[str, Any]) -> int:
    return sum(r.inconsistencies for r in figures["drivers"])


def markdown(figures: dict[str, Any], command: str) -> str:
    servers: list[ServerKillReport] = figures["servers"]
    drivers: list[DriverKillReport] = figures["drivers"]
    lines = [
        "# Reliability: the kill campaign", "",
        f"Written by the campaign (`{command}`) on {figures['started']:%Y-%m-%d %H:%M} UTC; "
        f"{os.cpu_count()} cores shared with other work, Python {platform.python_version()}, "
        f"{platform.system()} {platform.machine()}. Load average (1 / 5 / 15 min) at the "
        f"start {figures['load_start']}, at the end {figures['load_end']}; "
        f"{figures['seconds'] / 60:.1f} minutes in all. S3 is moto's server in its own "
        "process on loopback.", "",
        f"**{sum(r.kills for r in servers):,} marker server kills, "
        f"{sum(r.acknowledged for r in servers):,} acknowledged markers, "
        f"{losses(figures)} lost; {sum(r.kills for r in drivers)} Spark driver kills, "
        f"{sum(r.recoveries for r in drivers)} recoveries, "
        f"{inconsistencies(figures)} inconsistencies.**", "",
    ]
    server_kills = sum(r.kills for r in servers)
    driver_kills = sum(r.kills for r in drivers)
    if server_kills < FULL[0] or driver_kills < FULL[1]:
        lines += [f"This run is smaller than the full campaign (`make soak`: {FULL[0]:,} "
                  f"marker server kills and {FULL[1]} driver kills over both storages, "
                  "hours on a shared 2-core machine).", ""]
    if not figures.get("done", True):
        lines += ["**The campaign is still running (or was stopped): these are the parts "
                  "it finished.**", ""]
    for failure in figures.get("failures", []):
        lines += [f"**A part of the campaign failed and did not finish:** {failure}", ""]
    if servers:
        lines += _server_section(servers, figures["clients"])
    if drivers:
        lines += _driver_section(drivers)
    return "\n".join(lines) + "\n"


def _server_section(reports: list[ServerKillReport], clients: int) -> list[str]:
    lines = [
        "## The marker server, SIGKILLed", "",
        f"`markerstore serve` runs as its own process (forked from one that imported "
        f"it once); {clients} client threads create markers through it, each call after "
        "the last answer, half of the calls `create` (one marker) and half `create_many` "
        "(2 to 16 markers in 16 partitions); after a random 0.05-0.8 s (local disk; "
        "0.2-2 s on S3) the server gets SIGKILL. Then the folder on storage (the segment "
        "reader) must hold every marker a client got a success answer for. Flushes every "
        "2 ms and a compaction every 4 segments give kills many writes and compactions to "
        "land in. Every 50 kills a new instant; at its end a fresh server (a new "
        "`markerstore serve`) must list every acknowledged marker and create none of them "
        "again.", "",
        "| storage | seed | kills | instants | acknowledged markers | acknowledged `create` "
        "/ `create_many` calls | lost after a kill | unknown to a fresh server "
        "| created again | minutes |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in reports:
        lines.append(f"| {r.storage} | {r.seed} | {r.kills:,} | {r.instants} "
                     f"| {r.acknowledged:,} | {r.creates:,} / {r.create_many_calls:,} "
                     f"| {r.lost} | {r.unknown_to_fresh_server} | {r.recreated} "
                     f"| {r.seconds / 60:.1f} |")
    for r in reports:
        if r.lost_examples:
            lines.append(f"\nLost on {r.storage}: {', '.join(r.lost_examples)}")
    return lines + [""]


def _driver_section(reports: list[DriverKillReport]) -> list[str]:
    lines = [
        "## The Spark driver, SIGKILLed in real writes", "",
        "Each round is a driver process (`local[2,4]`, its own process group: the Python "
        "driver, its JVM and its Python workers) that reads the table with Spark's own "
        "reader, makes a complete write, then starts another write and is SIGKILLed as a "
        "group: at a random step of job commit (half of the rounds) or at a random moment "
        f"of the write (0 to {FRACTION} times the complete write's duration, which "
        "includes the warm-up of the JVM; a kill that lands after the write completed is "
        "counted as such). Each write is "
        f"{reports[0].rows_per_write:,} rows in 3 partitions with the error table on (a "
        "null key every 25th row, a failing check every 7th), direct or batched markers "
        "chosen at random. Recovery is `markerstore rollback TABLE --force` and the next "
        "round's write. After each recovery: DuckDB and pyarrow read every data file on "
        "storage (outside `.markerstore`) and must see exactly the rows of the completed "
        "commits, once each; every data file must be one a completed commit references; "
        "no instant may stay inflight; rows + error rows = rows written (invariant 6); "
        "`markerstore verify` must exit 0 where the CLI has it; and the next driver's "
        "Spark reader must see the same rows (on S3 it reads a local copy of every object "
        "outside `.markerstore`, as an s3a listing would find them: this Spark has no "
        "hadoop-aws).", "",
        "| storage | seed | kills | kill points | markers | recoveries (rolled back / "
        "rolled forward) | completed writes | checks | verify runs | inconsistencies "
        "| rows at the end | minutes |",
        "|---|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in reports:
        points = ", ".join(f"{k} {v}" for k, v in sorted(r.kill_points.items()))
        types = ", ".join(f"{k} {v}" for k, v in sorted(r.marker_types.items()))
        lines.append(f"| {r.storage} | {r.seed} | {r.kills} | {points} | {types} "
                     f"| {r.recoveries} ({r.rolled_back} / {r.rolled_forward}) "
                     f"| {r.completed_writes} | {r.checks} | {r.verify_runs} "
                     f"| {r.inconsistencies} | {r.final.get('expected_rows', 0):,} "
                     f"| {r.seconds / 60:.1f} |")
    for r in reports:
        for text in r.problems:
            lines.append(f"\n- {r.storage}: {text}")
    if not any(r.verify_runs for r in reports):
        lines += ["", "`markerstore verify` was not on this branch when the campaign ran: "
                      "the readers' check above stands in for it."]
    return lines + [""]


# The section of the output that `make test-cluster`'s figures fill (tests/cluster): kept.
KEPT_HEADING = "## Between hosts"


def kept_section(path: Path) -> str:
    """The section from KEPT_HEADING to the end of the existing document, if any."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return ""
    at = text.find("\n" + KEPT_HEADING)
    return text[at:] if at >= 0 else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server-kills", type=int, default=500, help="per storage")
    parser.add_argument("--driver-kills", type=int, default=50, help="per storage")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--storage", action="append", choices=STORAGES)
    parser.add_argument("--rows", type=int, default=2000, help="rows per Spark write")
    parser.add_argument("--output", default="docs/RELIABILITY.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    command = ("python -m harness.soak " + " ".join(argv or sys.argv[1:])).strip()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)

    kept = kept_section(Path(args.output))

    def write(figures: dict[str, Any]) -> None:
        Path(args.output).write_text(markdown(figures, command) + kept)

    figures = run(args.server_kills, args.driver_kills, clients=args.clients, seed=args.seed,
                  storages=args.storage or STORAGES, rows=args.rows, after_part=write)
    _log(f"wrote {args.output}: {losses(figures)} lost, "
         f"{inconsistencies(figures)} inconsistencies")
    return 1 if losses(figures) or inconsistencies(figures) or figures["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
