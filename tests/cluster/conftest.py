"""One cluster (tests/cluster/harness.py) per test session, shared by every cluster test.

`make test-cluster` runs every test here (MARKERSTORE_CLUSTER=full); `make test` runs
only the tests marked ``cluster_slice``. Both skip, with the reason on one line, where
the machine cannot build namespaces (not root, `ip netns` refused). The hosts' logs stay
in the run folder when a test failed (its path is printed); otherwise it is removed.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.harness import Cluster, Runner
from tests.support.netns import unavailable

FULL = os.environ.get("MARKERSTORE_CLUSTER") == "full"
FIGURES: dict[str, Any] = {}


# Modules in this order: each holds the cluster's two cores with one application at a
# time (the writers' and the faults' driver first, then ingest's, then the Connect server).
ORDER = ["test_writers", "test_faults", "test_ingest", "test_connect"]
DRIVERS: dict[str, Runner] = {}
WRITES_APP = "markerstore-cluster-writes"
# Executors silent for 20 s are lost (Spark's default is 120 s): a 30 s cut outlasts it.
DRIVER_CONF = {"spark.network.timeout": "20s", "spark.network.timeoutInterval": "5s",
               "spark.executor.heartbeatInterval": "2s",
               # several batches per task: faults meet tasks between marker requests
               "spark.sql.execution.arrow.maxRecordsPerBatch": "100"}


def _rank(item: pytest.Item) -> int:
    module = item.nodeid.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
    return ORDER.index(module) if module in ORDER else len(ORDER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cluster_items = [i for i in items if "tests/cluster/" in i.nodeid]
    if cluster_items:
        first = items.index(cluster_items[0])
        rest = [i for i in items if "tests/cluster/" not in i.nodeid]
        items[:] = rest[:first] + sorted(cluster_items, key=_rank) + rest[first:]
    if FULL:
        return
    skip = pytest.mark.skip(reason="the full cluster suite runs with `make test-cluster`")
    for item in items:
        if "tests/cluster/" in item.nodeid and "cluster_slice" not in item.keywords:
            item.add_marker(skip)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # so every finally and teardown runs


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="markerstore-cluster-"))
    built = Cluster(folder)
    atexit.register(built.close)
    previous = signal.signal(signal.SIGTERM, _sigterm)
    def first_driver() -> None:  # the writes' driver starts with the cluster
        DRIVERS["driver"] = _driver(built)

    try:
        wants_driver = any("driver" in getattr(item, "fixturenames", ())
                           for item in request.session.items)
        built.start(alongside=first_driver if wants_driver else None)
        FIGURES["cluster_start_s"] = round(built.timings["start"], 1)
        yield built
    finally:
        release_driver()
        built.close()
        signal.signal(signal.SIGTERM, previous)
        failed = request.session.testsfailed
        if failed or os.environ.get("MARKERSTORE_CLUSTER_KEEP"):
            print(f"\ncluster logs kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
        report = os.environ.get("MARKERSTORE_CLUSTER_REPORT")
        if report:
            Path(report).write_text(json.dumps(FIGURES, indent=2, sort_keys=True) + "\n")


def _driver(cluster: Cluster) -> Runner:
    runner = Runner(cluster, "driver", "driver-runner")
    started = time.monotonic()
    runner.call("session", timeout=240, app_name=WRITES_APP, conf=DRIVER_CONF)
    FIGURES["driver_session_s"] = round(time.monotonic() - started, 1)
    return runner


def release_driver() -> None:
    """Stop the writes' driver (its application ends): a module with an application of
    its own needs the two cores it holds."""
    runner = DRIVERS.pop("driver", None)
    if runner is not None:
        runner.close()


@pytest.fixture
def driver(cluster: Cluster) -> Runner:
    """A Spark driver on the driver's host, configured by spark-defaults.conf (the
    cluster's SPARK_CONF_DIR) and DRIVER_CONF: one application for the writers' and the
    faults' writes, started with the cluster, until release_driver()."""
    if "driver" not in DRIVERS:
        DRIVERS["driver"] = _driver(cluster)
    return DRIVERS["driver"]


@pytest.fixture(scope="session")
def client(cluster: Cluster) -> Iterator[Runner]:
    """Test code on the client's host, no Spark: it creates buckets and reads tables back."""
    runner = Runner(cluster, "client", "client-checks")
    try:
        yield runner
    finally:
        runner.close()


def record(name: str, value: Any) -> None:
    """A figure for docs/RELIABILITY.md (MARKERSTORE_CLUSTER_REPORT=FILE writes them)."""
    FIGURES[name] = value
