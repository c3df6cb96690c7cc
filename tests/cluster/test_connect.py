"""Spark Connect across hosts: the Connect server (the Spark driver) on the driver's host,
the client on the client's host. `markerstore ingest --remote`, the format writer, and a
streaming query whose driver is SIGKILLed and which is restarted from its checkpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster.checks import assert_exact, expected_ids, new_table
from tests.cluster.conftest import record, release_driver
from tests.cluster.harness import Cluster, Runner, start_connect_server
from tests.cluster.test_ingest import FILES, INGEST_TIMEOUT, ROWS, ingest_argv, ingest_source

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow, pytest.mark.timeout(900)]
CONNECT_APP = "markerstore-connect"


@pytest.fixture(scope="module")
def connect_server(cluster: Cluster) -> Iterator[Any]:
    release_driver()
    started = time.monotonic()
    proc = start_connect_server(cluster)
    record("connect_server_start_s", round(time.monotonic() - started, 1))
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def remote(cluster: Cluster, connect_server: Any) -> Iterator[Runner]:
    """Test code on the client's host with a Spark Connect session to the server."""
    runner = Runner(cluster, "client", "connect-client")
    try:
        runner.call("session", timeout=240, remote=cluster.connect_url)
        yield runner
    finally:
        runner.close()


def test_ingest_over_spark_connect(cluster: Cluster, connect_server: Any,
                                   client: Runner) -> None:
    """`markerstore ingest --remote sc://...` from the client's host: the Connect server's
    application does the work (no application of its own), and the table is exact."""
    url, source, options = ingest_source(cluster, client, "ingest-remote")
    started = time.monotonic()
    proc = cluster.run("client", ingest_argv(source, url, options, "--remote",
                                             cluster.connect_url), timeout=INGEST_TIMEOUT)
    record("ingest_remote_s", round(time.monotonic() - started, 1))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert cluster.applications("markerstore-ingest") == [] or all(
        a["state"] == "FINISHED" for a in cluster.applications("markerstore-ingest"))
    facts = client.call("facts", url=url, storage_options=options)
    assert_exact(facts, expected_ids(FILES * ROWS), error_records=FILES * ROWS // 50)


@pytest.mark.parametrize("writer", ["format", "function"])
def test_writers_over_spark_connect(cluster: Cluster, remote: Runner, client: Runner,
                                    writer: str) -> None:
    """Batched markers: the marker server runs beside Spark's driver (the Connect
    server), which the executors reach; the client's host is reached by no one."""
    url, options = new_table(cluster, client, f"connect-{writer}")
    outcome = remote.call("write", writer=writer, url=url, storage_options=options,
                          rows=2000, markers="batched")
    assert outcome["committed"], outcome
    record(f"connect_{writer}_writer_s", outcome["seconds"])
    facts = client.call("facts", url=url, storage_options=options)
    assert_exact(facts, expected_ids(2000), error_records=2000 // 50)


def test_stream_restarted_after_its_driver_is_killed(cluster: Cluster, connect_server: Any,
                                                     client: Runner) -> None:
    """A streaming query over Connect (one source file per micro-batch) loses its driver:
    the Connect server's JVM is SIGKILLed once a batch has committed. A new server starts
    on the same host; the client starts the query again from its checkpoint. Every source
    row is in the table exactly once, nothing of the killed batch is left."""
    files, rows = 4, 300
    url, options = new_table(cluster, client, "stream")
    source = str(cluster.folder / "stream-source")  # the hosts share this disk
    client.call("source_files", folder=source, files=files, rows=rows)
    checkpoint = str(cluster.folder / "stream-checkpoint")
    args: dict[str, Any] = {
        "source": source, "url": url, "checkpoint": checkpoint, "storage_options": options,
        "options": {"markerstore.write.markers.type": "batched",
                    "markerstore.write.error.table.enabled": "true"}}
    first = Runner(cluster, "client", "stream-client-1")
    try:
        first.call("session", timeout=240, remote=cluster.connect_url)
        first.call("stream_start", **args)
        cluster.wait_for("a committed micro-batch", lambda: client.call(
            "completed", url=url, storage_options=options).get("completed", 0) >= 1)
        states = client.call("completed", url=url, storage_options=options)
        connect_server.kill()  # the driver: the Connect server's JVM
    finally:
        first.proc.stop(grace=2)
    record("stream_killed_at", states)
    restarted = start_connect_server(cluster, name="connect-restarted")
    second = Runner(cluster, "client", "stream-client-2")
    try:
        started = time.monotonic()
        second.call("session", timeout=240, remote=cluster.connect_url)
        second.call("stream_start", **args)
        done = second.call("stream_wait", timeout=600, seconds=540)
        record("stream_restart_s", round(time.monotonic() - started, 1))
        assert done["finished"], done
    finally:
        second.close()
        restarted.stop()
    facts = client.call("facts", url=url, storage_options=options)
    assert_exact(facts, expected_ids(files * rows), error_records=files * rows // 50)
