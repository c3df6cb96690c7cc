"""`markerstore ingest` on the cluster, configured as a Spark user configures a driver: the
cluster's spark-defaults.conf (SPARK_CONF_DIR) says where the master is and which address
the driver has; the command line says nothing about Spark."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.cluster.checks import assert_exact, expected_ids, new_table
from tests.cluster.conftest import record, release_driver
from tests.cluster.harness import PYTHON, Cluster, Runner

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow, pytest.mark.timeout(900)]
FILES, ROWS = 4, 500
INGEST_TIMEOUT = 420


def storage_flags(options: dict[str, Any]) -> list[str]:
    """--storage-option flags for the S3 host's endpoint and credentials."""
    return ["--storage-option", f"endpoint_url={options['endpoint_url']}",
            "--storage-option", f"key={options['key']}",
            "--storage-option", f"secret={options['secret']}",
            "--storage-option",
            f"client_kwargs.region_name={options['client_kwargs']['region_name']}"]


def ingest_source(cluster: Cluster, client: Runner, name: str) -> tuple[str, str, dict]:
    """A table URL and a source of FILES Parquet files on S3 (every 50th id null)."""
    url, options = new_table(cluster, client, name)
    source = url.rsplit("/", 1)[0] + "/source"
    client.call("source_files", folder=source, files=FILES, rows=ROWS,
                storage_options=options)
    return url, source, options


def ingest_argv(source: str, url: str, options: dict[str, Any], *extra: str) -> list[str]:
    return [PYTHON, "-m", "markerstore.cli", "ingest", source, url, "--key", "id",
            "--partition-by", "day", "--json", *storage_flags(options), *extra]


def test_ingest_configured_by_spark_defaults(cluster: Cluster, client: Runner) -> None:
    """Nothing about Spark on the command line, no SPARK_LOCAL_IP: spark-defaults.conf
    names the master and the driver's address (ingest used to pin the address to
    loopback, and the master relaunched executors without end; and its own default
    master, local[*], overrode spark.master). The ingest
    runs on the cluster's executors (the master lists its application) and commits
    exactly."""
    release_driver()
    url, source, options = ingest_source(cluster, client, "ingest-defaults")
    before = len(cluster.applications("markerstore-ingest"))
    started = time.monotonic()
    proc = cluster.run("driver", ingest_argv(source, url, options),
                       timeout=INGEST_TIMEOUT,
                       env={"SPARK_CONF_DIR": str(cluster.folder / "conf")})
    record("ingest_spark_defaults_s", round(time.monotonic() - started, 1))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["rows_written"] == len(expected_ids(FILES * ROWS))
    apps = cluster.applications("markerstore-ingest")
    assert len(apps) == before + 1, apps  # it ran on the cluster
    assert all(a["state"] == "FINISHED" for a in apps), apps
    facts = client.call("facts", url=url, storage_options=options)
    assert_exact(facts, expected_ids(FILES * ROWS), error_records=FILES * ROWS // 50)
