"""The marker server killed with SIGKILL while clients create markers.

Shared by the durability test (tests/server/test_marker_durability.py), the kill campaign
(:mod:`harness.soak`) and the benchmarks: start `markerstore serve` as its
own process, read what a folder holds, and run rounds of "start a server, let clients
create markers, SIGKILL it at a random moment, check that every acknowledged marker is
on storage".
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from itertools import count
from typing import Any

from harness import child_env
from harness.s3 import free_port
from markerstore.errors import MarkerServerError
from markerstore.markers.segments import marker_names, read_batched_table
from markerstore.server.client import MarkerClient
from markerstore.storage import Storage
from markerstore.table import Table

# Small flushes and frequent compactions: more moments for a kill to land in.
KILL_OPTIONS = {"markerstore.markers.batch.interval_ms": 2,
                "markerstore.markers.batch.max_segments": 4}


def flat_storage_options(options: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested fsspec options as the `--storage-option key.sub=value` pairs of the CLI."""
    flat: dict[str, str] = {}
    for key, value in options.items():
        if isinstance(value, Mapping):
            flat.update(flat_storage_options(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = str(value)
    return flat


def start_server_process(table_url: str, options: Mapping[str, Any] | None = None,
                         storage_options: Mapping[str, Any] | None = None,
                         timeout: float = 120) -> tuple[subprocess.Popen[str], str]:
    """`markerstore serve` in its own process; (process, URL) once it listens."""
    command = [sys.executable, "-m", "markerstore.cli", "serve", "--table", table_url]
    for key, value in (options or {}).items():
        command += ["--option", f"{key}={value}"]
    for key, value in flat_storage_options(storage_options or {}).items():
        command += ["--storage-option", f"{key}={value}"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    return proc, server_url(proc, timeout)


def server_url(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    """The URL a `markerstore serve` process prints once it listens (killed if it never
    does)."""
    assert proc.stdout is not None
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        match = re.search(r"(http://\S+)", line)
        if match:
            return match.group(1)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    proc.wait()
    raise RuntimeError("the marker server process did not start")


class ServerForker:
    """Starts `markerstore serve` processes quickly: a process that has imported the CLI
    and the server forks each one (a new interpreter spends seconds importing on a busy
    machine; the campaign starts a thousand servers). Each forked server is a process of
    its own running the same command; it is killed by its pid."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.server_kills"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=child_env())

    def start(self, table_url: str, options: Mapping[str, Any] | None = None,
              storage_options: Mapping[str, Any] | None = None,
              timeout: float = 60) -> tuple[int, str]:
        """(pid, URL) of a new server process, once it accepts connections."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        port = free_port()
        args = ["serve", "--table", table_url, "--port", str(port)]
        for key, value in (options or {}).items():
            args += ["--option", f"{key}={value}"]
        for key, value in flat_storage_options(storage_options or {}).items():
            args += ["--storage-option", f"{key}={value}"]
        self.proc.stdin.write(json.dumps(args) + "\n")
        self.proc.stdin.flush()
        pid = int(self.proc.stdout.readline())
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return pid, f"http://127.0.0.1:{port}"
            except OSError:
                if not _alive(pid):
                    raise RuntimeError("a forked marker server exited before it listened "
                                       "(was the code changed under the campaign?)") from None
                time.sleep(0.02)
        kill_and_wait(pid)
        raise RuntimeError("a forked marker server did not start")

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def kill_and_wait(pid: int) -> None:
    """SIGKILL a server forked by :class:`ServerForker` and wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.005)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _fork_loop() -> None:
    """The forking process: one JSON list of CLI arguments a line; answers the pid."""
    import duckdb  # noqa: F401  (everything a server loads, imported once before any fork)
    import pyarrow.parquet  # noqa: F401
    import s3fs  # noqa: F401

    import markerstore.cli.serve  # noqa: F401
    import markerstore.server.app  # noqa: F401
    from markerstore.cli.main import main as cli_main

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the servers
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sys.stdin.close()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            sys.argv = ["markerstore", *json.loads(line)]
            try:
                cli_main()
            finally:
                os._exit(0)
        print(pid, flush=True)


def stop_server_process(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def held_markers(storage: Storage, instant: str) -> set[str]:
    """The marker names the batched folder of `instant` holds on storage."""
    return set(marker_names(read_batched_table(storage, instant)))


@dataclass
class ServerKillReport:
    """What a run of kills found (one storage)."""

    storage: str
    seed: int
    kills: int = 0
    clients: int = 0
    instants: int = 0
    acknowledged: int = 0  # markers a client got a success answer for
    creates: int = 0  # acknowledged single `create` calls
    create_many_calls: int = 0  # acknowledged `create_many` calls
    lost: int = 0  # acknowledged, yet not in the folder after the kill
    lost_examples: list[str] = field(default_factory=list)
    unknown_to_fresh_server: int = 0  # acknowledged, yet a new server does not list it
    recreated: int = 0  # acknowledged markers a new server created again (not deduped)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Round:
    """The clients of one server life: each makes calls until its server is gone."""

    def __init__(self, url: str, instant: str, rng: random.Random, names: Any,
                 max_group: int) -> None:
        self.url, self.instant, self.names, self.max_group = url, instant, names, max_group
        self.seeds = rng.random
        self.acknowledged: set[str] = set()
        self.creates = self.create_many_calls = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def client(self, seed: float) -> None:
        rng = random.Random(seed)
        client = MarkerClient(self.url, self.instant, retries=0, timeout=10,
                              initialize=False, fallback=False, pool_size=1)
        try:
            while not self.stop.is_set():
                group = 1 if rng.random() < 0.5 else rng.randint(2, self.max_group)
                items = [(f"d={rng.randrange(16)}", f"f{next(self.names)}_w.parquet")
                         for _ in range(group)]
                if group == 1:
                    done = [client.create(items[0][0], items[0][1], "CREATE")]
                else:
                    done = client.create_many([(p, f, "CREATE") for p, f in items])
                with self.lock:
                    self.acknowledged.update(f"{p}/{f}.marker.CREATE"
                                             for (p, f), ok in zip(items, done, strict=True)
                                             if ok)
                    if group == 1:
                        self.creates += 1
                    else:
                        self.create_many_calls += 1
        except MarkerServerError:
            return  # the server is gone: whatever this call asked is not acknowledged
        finally:
            client.close()


def server_kill_campaign(table: Table, kills: int, *, clients: int = 64, seed: int = 0,
                         storage_options: Mapping[str, Any] | None = None,
                         options: Mapping[str, Any] | None = None,
                         run_seconds: tuple[float, float] = (0.05, 0.8),
                         kills_per_instant: int = 50, max_group: int = 16, fork: bool = True,
                         progress: Callable[[str], None] | None = None) -> ServerKillReport:
    """`kills` times: start a marker server process on `table`, let `clients` client
    threads create markers (half `create`, half `create_many` of 2..`max_group`), SIGKILL
    the server after a random time, and compare the folder on storage with the markers
    acknowledged. A new instant every `kills_per_instant` kills; at the end of each
    instant a fresh server must list every acknowledged marker and refuse to create any
    of them again."""
    rng = random.Random(seed)
    report = ServerKillReport("s3" if table.storage.is_s3 else "local", seed, clients=clients)
    server_options = {**KILL_OPTIONS, **(options or {})}
    names = count()
    started = time.perf_counter()
    instant = ""
    acknowledged: set[str] = set()
    lost: set[str] = set()
    forker = ServerForker() if fork else None
    try:
        for round_ in range(kills):
            instant, acknowledged, lost = _kill_round(
                table, round_, kills, instant, acknowledged, lost, rng=rng, names=names,
                report=report, forker=forker, options=server_options,
                storage_options=storage_options, run_seconds=run_seconds,
                kills_per_instant=kills_per_instant, max_group=max_group)
            if progress is not None:
                progress(f"{report.storage} kill {report.kills}/{kills}: "
                         f"{report.acknowledged:,} acknowledged, {report.lost} lost")
    finally:
        if forker is not None:
            forker.stop()
    report.seconds = time.perf_counter() - started
    return report


def _kill_round(table: Table, round_: int, kills: int, instant: str, acknowledged: set[str],
                lost: set[str], *, rng: random.Random, names: Any, report: ServerKillReport,
                forker: ServerForker | None, options: Mapping[str, Any],
                storage_options: Mapping[str, Any] | None, run_seconds: tuple[float, float],
                kills_per_instant: int, max_group: int) -> tuple[str, set[str], set[str]]:
    """One server life: start, clients, SIGKILL, compare; (instant, acknowledged, lost)."""
    if round_ % kills_per_instant == 0:
        instant = table.start_commit(heartbeat=False, rollback_failed=False)
        acknowledged, lost = set(), set()
        report.instants += 1
    if forker is not None:
        pid, url = forker.start(table.path, options, storage_options)
    else:
        proc, url = start_server_process(table.path, options, storage_options)
    life = _Round(url, instant, rng, names, max_group)
    threads = [threading.Thread(target=life.client, args=(life.seeds(),))
               for _ in range(report.clients)]
    for thread in threads:
        thread.start()
    time.sleep(rng.uniform(*run_seconds))
    if forker is not None:
        kill_and_wait(pid)
    else:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    life.stop.set()
    for thread in threads:
        thread.join()
    report.kills += 1
    acknowledged |= life.acknowledged
    report.acknowledged += len(life.acknowledged)
    report.creates += life.creates
    report.create_many_calls += life.create_many_calls
    missing = acknowledged - held_markers(table.storage, instant)
    report.lost += len(missing - lost)
    lost |= missing
    report.lost_examples = sorted(set(report.lost_examples) | missing)[:20]
    if round_ % kills_per_instant == kills_per_instant - 1 or round_ == kills - 1:
        _check_fresh_server(table, instant, acknowledged, options, storage_options, report)
    return instant, acknowledged, lost


def _check_fresh_server(table: Table, instant: str, acknowledged: set[str],
                        options: Mapping[str, Any], storage_options: Mapping[str, Any] | None,
                        report: ServerKillReport) -> None:
    """A new server lists every acknowledged marker and does not create any again."""
    proc, url = start_server_process(table.path, options, storage_options)
    try:
        client = MarkerClient(url, instant, fallback=False)
        report.unknown_to_fresh_server += len(acknowledged - set(client.all()))
        some = sorted(acknowledged)[:20]
        again = client.create_many([(n.split("/", 1)[0],
                                     n.split("/", 1)[1].split(".marker.")[0], "CREATE")
                                    for n in some]) if some else []
        report.recreated += sum(again)
        client.close()
    finally:
        stop_server_process(proc)


if __name__ == "__main__":
    _fork_loop()
