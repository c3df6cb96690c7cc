"""Crashes around a Spark write: a killed executor, a killed driver during job commit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

import markerstore.spark as ms
from markerstore import Table
from markerstore.sql import sql as sql_views
from tests.support.commit_checks import assert_clean, assert_exactly_committed, open_table, uploads

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.campaign]
SCRIPT = ["-m", "tests.support.spark_crash_writer"]
OPTIONS = {"markerstore.write.target_file_size": 8000, "markerstore.write.commit.threads": 1}


def run_driver(args: dict[str, Any], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, *SCRIPT, json.dumps(args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.mark.s3
def test_killed_executor_leaves_only_the_winners(moto_s3: Any, tmp_path: Any) -> None:
    """local-cluster[2,1,1024]: the first attempt of partition 1 kills its executor JVM
    after its files are written (local) or uploaded (S3). Spark reruns it elsewhere; the
    commit holds exactly the winners, and no upload of the write is left."""
    del tmp_path
    bucket = moto_s3.create_bucket(f"lc-{uuid.uuid4().hex[:10]}")
    # S3 only: a local cluster takes long to start, and a killed Python worker (the
    # writer tests) already leaves a task's local files behind on local disk.
    targets = [{"url": f"s3://{bucket}/t", "storage_options": moto_s3.storage_options()}]
    proc = run_driver({"master": "local-cluster[2,1,1024]", "kill_executor": True,
                       "rows": 4000, "options": OPTIONS, "targets": targets}, timeout=420)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Lost executor" in proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(targets)
    for target, result in zip(targets, results, strict=True):
        assert result["rows_written"] == 4000 and result["files_cleaned"] >= 1
        table = Table(target["url"], target["storage_options"])
        assert_exactly_committed(table, 4000)
        assert uploads(table) == []
        assert_clean(table)


@pytest.mark.s3
def test_killed_driver_during_job_commit(spark: Any, moto_s3: Any) -> None:
    """A Spark driver dies in the middle of completing the uploads; the table stays
    all-or-nothing, and the next write rolls the crashed one forward. (Every step of job
    commit, on both storages, is crashed in tests/commit/test_commit_recovery.py with a
    driver process that runs the same job commit without Spark.)"""
    bucket = moto_s3.create_bucket(f"dc-{uuid.uuid4().hex[:10]}")
    where = SimpleNamespace(url=f"s3://{bucket}/t", storage_options=moto_s3.storage_options())
    ms.write(spark.range(0, 500, numPartitions=2).selectExpr(
        "id", "id % 2 AS day", "concat('row-', cast(id AS string)) AS payload"),
        where.url, options=OPTIONS, storage_options=where.storage_options)
    proc = run_driver({"kill_driver_at": "publish", "rows": 2000, "options": OPTIONS,
                       "targets": [{"url": where.url,
                                    "storage_options": where.storage_options}]})
    assert proc.returncode == -9, proc.stderr[-4000:]
    table = open_table(where)
    crashed = [i.instant for i in table.timeline() if i.state == "inflight"]
    assert len(crashed) == 1
    view = sql_views(table, "SELECT coalesce(sum(rows), 0) FROM files").fetchall()[0][0]
    assert view == 500  # nothing of the crashed write is visible yet

    follow = ms.write(spark.range(10_000, 10_100, numPartitions=1).selectExpr(
        "id", "id % 2 AS day", "'late' AS payload"), where.url, options=OPTIONS,
        storage_options=where.storage_options)
    assert table.state(crashed[0]) == "completed"  # rolled forward
    assert follow.rows_written == 100
    assert_exactly_committed(table, 500 + 2000 + 100)
    assert_clean(table)
