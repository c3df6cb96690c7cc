"""The streaming sink: df.writeStream.format("markerstore"), one instant per micro-batch,
exactly once across a driver killed between the sink's commit and Spark's checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import errortable
from harness.spark_sources import hooked_stream_source
from markerstore import Table
from markerstore.commit import FileStats, TaskAttempt
from markerstore.spark.jobhost import HOST_FILE, live_query_host, process_alive, query_dir
from markerstore.spark.source import parse_options
from tests.support.commit_checks import assert_clean, assert_exactly_committed
from tests.support.entry_points import format_name

pytestmark = pytest.mark.spark
DRIVER = ["-m", "tests.support.spark_stream_driver"]
ERRORS = {"markerstore.write.error.table.enabled": "true", "markerstore.write.key": "id",
          "markerstore.write.target_file_size": 4000}


def _start_stream(spark: Any, tmp_path: Path, fmt: str, url: str) -> Any:
    """A stream of tmp_path/in (a file per batch) into `url` through the sink `fmt`, with
    the error table on, checkpointed in tmp_path/ck, until the input is used up."""
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(
        str(tmp_path / "in"))
    writer = stream.writeStream.format(fmt).option(
        "checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
    for key, value in ERRORS.items():
        writer = writer.option(key, value)
    return writer.start(url)


def input_files(folder: Path, files: int, rows: int) -> tuple[set[int], int]:
    """`files` Parquet files of `rows` rows (id, day, payload); every 25th id is null (a
    bad row: no key). Returns the good ids and the number of bad rows."""
    folder.mkdir(parents=True)
    good: set[int] = set()
    bad = 0
    for n in range(files):
        ids = list(range(n * rows, (n + 1) * rows))
        keys = [None if i % 25 == 0 else i for i in ids]
        good.update(i for i in keys if i is not None)
        bad += sum(1 for i in keys if i is None)
        pq.write_table(pa.table({"id": pa.array(keys, pa.int64()),
                                 "day": pa.array([i % 2 for i in ids], pa.int64()),
                                 "payload": pa.array([f"row-{i}" for i in ids])}),
                       folder / f"part-{n:03d}.parquet")
    return good, bad


def table_ids(url: str) -> list[int]:
    snapshot = Table(url).snapshot()
    return sorted(snapshot.dataset().to_table(columns=["id"]).column("id").to_pylist())


def error_rows(url: str) -> int:
    rows = errortable.read(url + "_errors").query("e", "SELECT count(*) FROM e").fetchall()
    return int(rows[0][0])


def stream_batches(url: str) -> list[tuple[str, int]]:
    table = Table(url)
    found = []
    for info in table.timeline():
        if info.state == "completed":
            stream = table.commit_metadata(info.instant).get("stream") or {}
            found.append((stream.get("query_id"), stream.get("batch_id")))
    return found


def test_micro_batches_commit_one_instant_each(spark: Any, tmp_path: Path) -> None:
    """Three files, one per micro-batch; the first attempt of partition 0 in every batch
    fails after writing its files (retried): no duplicate, every bad row once."""
    good, bad = input_files(tmp_path / "in", 3, 200)
    url = str(tmp_path / "table")

    def fail_first(step: str, attempt: TaskAttempt, files: list[FileStats]) -> None:
        if step == "committed" and attempt.partition_id == 0 and attempt.attempt_number == 0:
            raise RuntimeError("injected task failure after writing its files")

    query = _start_stream(spark, tmp_path, format_name(spark, fail_first), url)
    query.awaitTermination()
    assert query.exception() is None
    batches = stream_batches(url)
    assert [b for _, b in batches] == [0, 1, 2]
    assert len({q for q, _ in batches}) == 1 and batches[0][0].startswith("checkpoint-")
    assert table_ids(url) == sorted(good)
    assert error_rows(url) == bad
    table = Table(url)
    assert_exactly_committed(table, len(good))
    assert_clean(table)


def run_driver(args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, *DRIVER, json.dumps(args)], capture_output=True,
                          text=True, timeout=600, env=env)


@pytest.mark.slow
@pytest.mark.campaign
def test_driver_killed_after_the_sink_commit_replays_nothing_twice(tmp_path: Path) -> None:
    """The driver (JVM and Python) is SIGKILLed right after batch 1's instant completes,
    before Spark's checkpoint records batch 1. Restarted from the same checkpoint, Spark
    replays batch 1: the sink finds it committed, commits nothing and rolls the replay
    back. Every input row is in the table once, every bad row once in the error table."""
    good, bad = input_files(tmp_path / "in", 3, 200)
    url = str(tmp_path / "table")
    args = {"input": str(tmp_path / "in"), "table": url, "checkpoint": str(tmp_path / "ck"),
            "options": ERRORS}
    crashed = run_driver({**args, "kill_after_batch": 1})
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert [b for _, b in stream_batches(url)] == [0, 1]
    assert not (tmp_path / "ck" / "commits" / "1").exists()  # the checkpoint missed it

    resumed = run_driver(args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    table = Table(url)
    states = [i.state for i in table.timeline()]
    assert states.count("completed") == 3 and states.count("rolledback") == 1, states
    assert [b for _, b in stream_batches(url)] == [0, 1, 2]
    assert table_ids(url) == sorted(good)
    assert error_rows(url) == bad
    assert_exactly_committed(table, len(good))
    assert_clean(table)


def test_a_failed_batch_is_rolled_back_and_the_restart_writes_it_once(spark: Any,
                                                                      tmp_path: Path) -> None:
    """Every attempt of a task of the first batch fails: Spark aborts the batch, the sink
    rolls its instant back, the query stops. Restarted from the checkpoint (the tasks now
    succeed), the batch is written once."""
    good, bad = input_files(tmp_path / "in", 2, 100)
    url = str(tmp_path / "table")

    def always(step: str, attempt: TaskAttempt, files: list[FileStats]) -> None:
        if step == "committed" and attempt.partition_id == 0:
            raise RuntimeError("this batch never succeeds")

    def run(fmt: str) -> Any:
        return _start_stream(spark, tmp_path, fmt, url)

    failed = run(format_name(spark, always))
    with pytest.raises(Exception, match="never succeeds"):
        failed.awaitTermination()
    table = Table(url)
    assert [i.state for i in table.timeline()] == ["rolledback"]
    assert table.snapshot().files == []
    resumed = run(format_name(spark))
    resumed.awaitTermination()
    assert [b for _, b in stream_batches(url)] == [0, 1]
    assert table_ids(url) == sorted(good)
    assert error_rows(url) == bad
    assert_exactly_committed(table, len(good))
    assert_clean(table)


def host_pids(url: str) -> list[int]:
    """The job host pid recorded in each completed batch's instant, in batch order."""
    table = Table(url)
    return [int((table.commit_metadata(i.instant).get("stream") or {})["job_host_pid"])
            for i in table.timeline() if i.state == "completed"]


alive = process_alive


def killing_host_source(kill_after: int) -> type:
    """The sink, SIGKILLing the query's job host right after batch `kill_after` commits
    (between two batches). Runs in a Spark worker: nothing from this test module."""

    def committed(self: Any, result: Any, batch_id: int) -> None:
        if batch_id == kill_after:
            from markerstore.spark.jobhost import HOST_FILE, process_alive, query_dir

            with open(os.path.join(query_dir(self.request.query_id), HOST_FILE)) as handle:
                pid = int(json.load(handle)["pid"])
            os.kill(pid, signal.SIGKILL)
            while process_alive(pid):
                time.sleep(0.02)

    return hooked_stream_source("markerstore_host_killing", committed, "host_killing")


@pytest.mark.parametrize("markers", ["batched", "direct"])
def test_the_job_host_lives_for_the_query_and_a_dead_one_is_replaced(
        spark: Any, tmp_path: Path, markers: str) -> None:
    """Four batches of one query: a stale host file (a dead pid, no socket) is ignored;
    batches 0 and 1 share one host process; the host is SIGKILLed after batch 1 commits;
    batch 2 starts a new host, which batch 3 reuses. Every row lands exactly once."""
    good, bad = input_files(tmp_path / "in", 4, 100)
    url = str(tmp_path / "table")
    checkpoint = str(tmp_path / "ck")
    query_id = parse_options({"path": url, "checkpointLocation": checkpoint}).query_id
    assert query_id is not None
    folder = query_dir(query_id)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open(os.path.join(folder, HOST_FILE), "w") as out:  # a stale host file
        json.dump({"pid": dead.pid, "control": os.path.join(folder, "gone.sock"),
                   "table": Table(url).storage.url(), "serve_markers": markers == "batched",
                   "bind_host": "127.0.0.1", "watch_pid": os.getpid()}, out)
    spark.dataSource.register(killing_host_source(kill_after=1))
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(
        str(tmp_path / "in"))
    writer = stream.writeStream.format("markerstore_host_killing").option(
        "checkpointLocation", checkpoint).option(
        "markerstore.write.markers.type", markers).trigger(availableNow=True)
    for key, value in ERRORS.items():
        writer = writer.option(key, value)
    query = writer.start(url)
    try:
        query.awaitTermination()
        assert query.exception() is None
        assert [b for _, b in stream_batches(url)] == [0, 1, 2, 3]
        first, again, replaced, reused = host_pids(url)
        assert first == again, "batch 1 did not reuse the query's job host"
        assert not alive(first)
        assert replaced != first and reused == replaced
        host = live_query_host(folder)
        assert host is not None and host.pid == replaced and alive(replaced)
        assert (host.url is not None) == (markers == "batched")
        assert table_ids(url) == sorted(good)
        assert error_rows(url) == bad
        table = Table(url)
        assert [i.state for i in table.timeline()].count("completed") == 4
        assert_exactly_committed(table, len(good))
        assert_clean(table)
    finally:
        host = live_query_host(folder)
        if host is not None:
            host.stop(timeout=10.0)
    assert host is not None and not alive(host.pid)
    assert not os.path.exists(os.path.join(folder, HOST_FILE))
