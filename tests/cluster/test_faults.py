"""Faults between the cluster's hosts during real writes (tests/cluster/faults.py): loss and
latency between the executors and the marker server, the link from one worker to the
driver cut for 30 s, a worker host removed. A write under a fault commits exactly, or
fails and is rolled back: never anything in between. The figures go to
docs/RELIABILITY.md ("Between hosts")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.cluster import faults
from tests.cluster.checks import (
    assert_exact,
    assert_rolled_back,
    executors_launched,
    expected_ids,
    new_table,
    staging_left,
)
from tests.cluster.conftest import WRITES_APP, record, release_driver
from tests.cluster.harness import Cluster, ClusterError, Runner

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow, pytest.mark.timeout(900)]
ROWS = 2000


@pytest.fixture
def faulty(cluster: Cluster, driver: Runner) -> Runner:
    """The writes' driver, where iptables works in the hosts' namespaces."""
    reason = faults.firewall_unavailable(cluster.host("worker1"))
    if reason:
        pytest.skip(reason)
    return driver


def _timed_write(cluster: Cluster, runner: Runner, client: Runner, name: str,
                 **extra: Any) -> tuple[dict[str, Any], dict[str, Any], str, dict[str, Any]]:
    url, options = new_table(cluster, client, name)
    outcome = runner.call("write", timeout=600, writer="function", url=url,
                          storage_options=options, rows=ROWS, **extra)
    return outcome, client.call("facts", url=url, storage_options=options), url, options


def test_loss_and_latency_to_the_marker_server(cluster: Cluster, faulty: Runner,
                                               client: Runner) -> None:
    """Batched markers with 10% packet loss, then 200 ms more per round trip, between
    both workers and the driver's host: the writes commit exactly, slower."""
    figures: dict[str, Any] = {}
    outcome, _, _, _ = _timed_write(cluster, faulty, client, "warm-up")  # executors' Pythons
    assert outcome["committed"], outcome
    outcome, facts, _, _ = _timed_write(cluster, faulty, client, "baseline")
    assert outcome["committed"], outcome
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    figures["baseline_s"] = outcome["seconds"]

    with faults.packet_loss(cluster, "worker1", 0.1), \
            faults.packet_loss(cluster, "worker2", 0.1):
        outcome, facts, _, _ = _timed_write(cluster, faulty, client, "loss")
        dropped = sum(faults.dropped_packets(cluster.host(w), "markerstore-loss")
                      for w in ("worker1", "worker2"))
    assert outcome["committed"], outcome
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    assert dropped > 0  # the loss was on the path
    figures.update(loss_s=outcome["seconds"], loss_dropped_packets=dropped)

    with faults.latency(cluster, "worker1", 200) as one, \
            faults.latency(cluster, "worker2", 200) as two:
        outcome, facts, _, _ = _timed_write(cluster, faulty, client, "latency")
    assert outcome["committed"], outcome
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    connections = one.get("connections", 0) + two.get("connections", 0)
    assert connections > 0  # the executors' marker requests went through the proxies
    figures.update(latency_s=outcome["seconds"], latency_connections=connections,
                   latency_delayed_sends=one.get("delayed_chunks", 0)
                   + two.get("delayed_chunks", 0))
    record("loss_and_latency", figures)


def _write_under(cluster: Cluster, runner: Runner, client: Runner, name: str,
                 fault: Any) -> dict[str, Any]:
    """A slow write (about 40 s of tasks) with `fault(started)` run in the middle."""
    url, options = new_table(cluster, client, name)
    answer: dict[str, Any] = {}

    def write() -> None:
        try:
            answer["outcome"] = runner.call(
                "write", timeout=900, writer="function", url=url, storage_options=options,
                rows=ROWS, partitions=8, slow_ms=20)
        except ClusterError as exc:
            answer["error"] = exc

    executors = executors_launched(cluster)
    thread = threading.Thread(target=write, name=f"write-{name}")
    started = time.monotonic()
    thread.start()
    deadline = started + 300
    while not client.call("completed", url=url, storage_options=options).get("inflight"):
        assert time.monotonic() < deadline, "the write never started"
        time.sleep(0.5)
    time.sleep(8)  # the tasks are running: writing, uploading, asking for markers
    answer["fault_at_s"] = round(time.monotonic() - started, 1)
    fault()
    thread.join(960)
    if "error" in answer:
        raise answer["error"]
    outcome = answer["outcome"]
    facts = client.call("facts", url=url, storage_options=options)
    if outcome["committed"]:
        assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    else:
        assert_rolled_back(facts)
    return {"outcome": "committed" if outcome["committed"] else "rolled back",
            "error": outcome.get("error"), "seconds": outcome["seconds"],
            "fault_at_s": answer["fault_at_s"],
            "executors_started": executors_launched(cluster) - executors,
            "files_cleaned": (outcome.get("result") or {}).get("files_cleaned")}


def test_the_link_from_a_worker_to_the_driver_is_cut_for_30_s(
        cluster: Cluster, faulty: Runner, client: Runner) -> None:
    """Mid-write, worker1 can reach neither the driver nor its marker server for 30 s
    (it still reaches S3 and the master). Its executor is lost, its tasks run again on
    worker2; the write commits exactly, or fails and is rolled back."""
    def cut() -> None:
        with faults.cut_link(cluster, "worker1"):
            time.sleep(30)  # the fault's own length
            dropped = faults.dropped_packets(cluster.host("worker1"), "markerstore-cut")
        assert dropped > 0

    figures = _write_under(cluster, faulty, client, "cut", cut)
    record("link_cut_30s", figures)


def test_a_worker_host_is_removed_mid_write(cluster: Cluster, faulty: Runner,
                                            client: Runner) -> None:
    """Mid-write, worker2's host vanishes: its link goes, then every process on it, then
    its namespace. The write commits exactly on worker1, or fails and is rolled back. A
    fresh worker2 joins afterwards, so the cluster is whole again."""
    def remove() -> None:
        cluster.remove_host("worker2")

    try:
        figures = _write_under(cluster, faulty, client, "removed", remove)
    finally:
        if "worker2" not in cluster.network.hosts:
            cluster.add_worker("worker2", 4)
    record("worker_removed", figures)


def test_nothing_staged_is_left_once_the_application_ends(cluster: Cluster,
                                                          driver: Runner) -> None:
    """The attempts killed in the writers' scenarios and by the faults could not remove
    their staging folders; they were under the executors' Spark local dirs, which go with
    the application."""
    release_driver()
    cluster.wait_for("the writes' application to finish", lambda: all(
        a["state"] == "FINISHED" for a in cluster.applications(WRITES_APP)))
    cluster.wait_for("the workers to remove the application's folders",
                     lambda: staging_left(cluster) == [], timeout=60)
