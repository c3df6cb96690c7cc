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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
    try:
        built.start()
        FIGURES["cluster_start_s"] = round(built.timings["start"], 1)
        yield built
    finally:
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


@pytest.fixture(scope="module")
def driver(cluster: Cluster) -> Iterator[Runner]:
    """A Spark driver on the driver's host, configured only by spark-defaults.conf (the
    cluster's SPARK_CONF_DIR): one application for the module's writes."""
    runner = Runner(cluster, "driver", "driver-runner")
    try:
        started = time.monotonic()
        runner.call("session", timeout=240, app_name="markerstore-cluster-writes")
        FIGURES["driver_session_s"] = round(time.monotonic() - started, 1)
        yield runner
    finally:
        runner.close()


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
