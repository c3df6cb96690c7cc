"""The writers on a standalone cluster: a driver on its own host, executors on two worker
hosts, the table on an S3 host. Both writers with both marker types, a task that dies
after its uploads, and an executor JVM SIGKILLed mid-write."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.cluster.checks import (
    assert_exact,
    executors_launched,
    expected_ids,
    new_table,
    staging_left,
)
from tests.cluster.conftest import WRITES_APP, record
from tests.cluster.harness import Cluster, Runner

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow, pytest.mark.timeout(900)]
ROWS = 2000


def test_the_driver_runs_on_the_cluster(cluster: Cluster, driver: Runner) -> None:
    """The session is the cluster's (spark-defaults.conf alone said so), its executors on
    the worker hosts."""
    apps = cluster.applications(WRITES_APP)
    assert [a["state"] for a in apps] == ["RUNNING"], apps
    assert apps[0]["cores"] == 2


def _write(cluster: Cluster, driver: Runner, client: Runner, writer: str, markers: str,
           **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    url, options = new_table(cluster, client, f"{writer}-{markers}")
    started = time.monotonic()
    outcome = driver.call("write", writer=writer, url=url, storage_options=options,
                          rows=ROWS, markers=markers, **extra)
    facts = client.call("facts", url=url, storage_options=options)
    record(f"write_{writer}_{markers}{'_' + extra['hook'] if 'hook' in extra else ''}_s",
           round(time.monotonic() - started, 1))
    return outcome, facts


@pytest.mark.cluster_slice
def test_function_writer_batched_markers(cluster: Cluster, driver: Runner,
                                         client: Runner) -> None:
    """markerstore.spark.write with the marker server in the driver, reached by the
    executors at the driver's address with its token."""
    outcome, facts = _write(cluster, driver, client, "function", "batched")
    assert outcome["committed"], outcome
    assert outcome["result"]["rows_written"] == len(expected_ids(ROWS))
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    assert staging_left(cluster) == []  # not even an empty folder on the workers' disks


@pytest.mark.parametrize("writer, markers", [("function", "direct"), ("format", "batched"),
                                             ("format", "direct")])
def test_writers_and_marker_types(cluster: Cluster, driver: Runner, client: Runner,
                                  writer: str, markers: str) -> None:
    outcome, facts = _write(cluster, driver, client, writer, markers)
    assert outcome["committed"], outcome
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    assert staging_left(cluster) == []


@pytest.mark.parametrize("markers", ["batched", "direct"])
def test_a_task_dies_after_its_uploads(cluster: Cluster, driver: Runner, client: Runner,
                                       markers: str) -> None:
    """The first attempt of one task uploads its files (multipart, not completed), then
    its Python worker exits: no abort runs. Spark retries the task on a worker; the commit
    holds exactly the winners and aborts the dead attempt's uploads."""
    outcome, facts = _write(cluster, driver, client, "function", markers,
                            hook="exit_after_upload")
    assert outcome["committed"], outcome
    assert outcome["result"]["files_cleaned"] >= 1
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)


def test_an_executor_is_sigkilled_mid_write(cluster: Cluster, driver: Runner,
                                            client: Runner) -> None:
    """The first attempt of one task SIGKILLs its executor JVM after its uploads: the
    master starts a new executor on that worker, Spark reruns the lost tasks, and the
    commit holds exactly the winners."""
    before = executors_launched(cluster)
    outcome, facts = _write(cluster, driver, client, "function", "batched",
                            hook="kill_executor")
    assert outcome["committed"], outcome
    assert outcome["result"]["files_cleaned"] >= 1
    assert_exact(facts, expected_ids(ROWS), error_records=ROWS // 50)
    assert executors_launched(cluster) > before  # the killed executor was replaced
