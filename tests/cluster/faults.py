"""Faults on the links between cluster hosts, injected for real in the hosts' namespaces:

* loss: iptables ``-m statistic --mode random`` drops a share of the packets between a
  worker and the driver's host, Spark's own RPC ports spared (so the loss hits what
  executors send to the marker server);
* latency: a transparent delaying TCP proxy (tests/support/delay_proxy.py) in a worker's
  namespace, iptables ``REDIRECT`` sending it the worker's connections to the driver's
  host (Spark's ports spared);
* a cut link: every packet between a worker and the driver's host dropped, both ways.

Each returns how to undo it; the counters prove the fault was on the path.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from tests.cluster.harness import BLOCK_MANAGER_PORT, DRIVER_PORT, PYTHON, ROOT, Cluster
from tests.support.netns import Host

SPARK_PORTS = f"{DRIVER_PORT},{BLOCK_MANAGER_PORT}"
PROXY_PORT = 15999
PROXY_MARK = 119


def firewall_unavailable(host: Host) -> str | None:
    """Why iptables cannot filter in a namespace here (one line), or None."""
    try:
        proc = host.run(["iptables", "-w", "-t", "nat", "-S"], timeout=30)
    except FileNotFoundError:
        return "iptables is not installed (apt-get install -y iptables)"
    if proc.returncode != 0:
        return f"iptables does not work in a namespace here: {proc.stderr.strip()[:200]}"
    return None


def dropped_packets(host: Host, comment: str) -> int:
    """Packets the rules tagged `comment` dropped so far (iptables' own counters)."""
    proc = host.run(["iptables", "-w", "-L", "-v", "-x", "-n"], timeout=30)
    return sum(int(line.split()[0]) for line in proc.stdout.splitlines()
               if f"/* {comment} */" in line and "DROP" in line)


def _rules(host: Host, rules: list[list[str]]) -> Iterator[None]:
    done: list[list[str]] = []
    try:
        for rule in rules:
            host.iptables(*rule)
            done.append(rule)
        yield
    finally:
        for rule in reversed(done):
            table = rule[:2] if rule[0] == "-t" else []
            spec = rule[len(table):]
            with contextlib.suppress(RuntimeError):
                host.iptables(*table, "-D", *spec[1:])


@contextlib.contextmanager
def packet_loss(cluster: Cluster, role: str, probability: float,
                comment: str = "markerstore-loss") -> Iterator[None]:
    driver = cluster.address("driver")
    share = ["-m", "statistic", "--mode", "random", "--probability", str(probability)]
    spare = ["-m", "multiport", "!", "--ports", SPARK_PORTS]
    tag = ["-m", "comment", "--comment", comment]
    yield from _rules(cluster.host(role), [
        ["-A", "OUTPUT", "-p", "tcp", "-d", driver, *spare, *share, *tag, "-j", "DROP"],
        ["-A", "INPUT", "-p", "tcp", "-s", driver, *spare, *share, *tag, "-j", "DROP"]])


@contextlib.contextmanager
def cut_link(cluster: Cluster, role: str, comment: str = "markerstore-cut") -> Iterator[None]:
    driver = cluster.address("driver")
    tag = ["-m", "comment", "--comment", comment]
    yield from _rules(cluster.host(role), [
        ["-I", "OUTPUT", "-d", driver, *tag, "-j", "DROP"],
        ["-I", "INPUT", "-s", driver, *tag, "-j", "DROP"]])


@contextlib.contextmanager
def latency(cluster: Cluster, role: str, delay_ms: float) -> Iterator[dict[str, int]]:
    """Every new connection from `role` to the driver's host (Spark's ports spared) goes
    through a proxy that delays what the worker sends by `delay_ms`. Yields the proxy's
    counts, read when the block ends."""
    host = cluster.host(role)
    stats = host.folder / "delay-proxy.json"
    proxy = host.popen("delay-proxy", [PYTHON, "-m", "tests.support.delay_proxy",
                                       "--port", str(PROXY_PORT), "--delay-ms", str(delay_ms),
                                       "--mark", str(PROXY_MARK), "--stats", str(stats)],
                       env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
    counts: dict[str, int] = {}
    try:
        cluster.wait_for(f"the delay proxy on {role}", stats.exists, timeout=60)
        rule = ["-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-d", cluster.address("driver"),
                "-m", "multiport", "!", "--dports", SPARK_PORTS,
                "-m", "mark", "!", "--mark", str(PROXY_MARK),
                "-j", "REDIRECT", "--to-ports", str(PROXY_PORT)]
        with contextlib.contextmanager(_rules)(host, [rule]):
            yield counts
    finally:
        proxy.stop()
        host.procs.remove(proxy)
        with contextlib.suppress(OSError, ValueError):
            counts.update(json.loads(stats.read_text()))

