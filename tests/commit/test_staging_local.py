"""S3 staging on the worker's disk never leaks: a successful write leaves no folder, a
task attempt killed mid-write leaves a folder the next task start on that worker sweeps,
and the sweep never touches a live attempt's folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from markerstore import Table
from markerstore.commit import localdirs
from markerstore.testing.s3 import MotoS3
from tests.support.commit_checks import assert_clean, assert_exactly_committed, commit_all, split

pytestmark = pytest.mark.s3

# Stages one file of a write as a task attempt does (MultipartStaging.target), writes part
# of it, says so, and waits to be killed.
STAGER = """
import os, sys, time
from markerstore import config
from markerstore.commit.staging import MultipartStaging
from markerstore.storage import Storage
settings = config.resolve({config.STAGING_DIR: sys.argv[1]})
staging = MultipartStaging(Storage("s3://bucket/t"), sys.argv[2], sys.argv[3], settings)
target = staging.target(int(sys.argv[4]), "day=1/part-0.parquet")
os.makedirs(os.path.dirname(target), exist_ok=True)  # as the task writer does
with open(target, "wb") as out:
    out.write(b"PAR1" + b"x" * 100_000)
    out.flush()
    print(target, flush=True)
    time.sleep(600)
"""


def _stager(root: Path, attempt: int) -> tuple[subprocess.Popen[str], str]:
    """A process staging a file under `root` as attempt `attempt` of a write; its staged
    file's path."""
    proc = subprocess.Popen([sys.executable, "-c", STAGER, str(root), "20260101000000000",
                             uuid.uuid4().hex, str(attempt)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _s3_table(moto_s3: MotoS3, **options: Any) -> Table:
    bucket = moto_s3.create_bucket(f"stage-{uuid.uuid4().hex[:12]}")
    return Table(f"s3://{bucket}/t", moto_s3.storage_options(), options)


def test_a_successful_s3_write_leaves_no_local_folder(moto_s3: MotoS3, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the option, tasks stage under Spark's local dir ($SPARK_LOCAL_DIRS, as
    Spark gives its Python workers), and nothing of the write stays there."""
    spark_dir = tmp_path / "blockmgr-1"
    spark_dir.mkdir()
    monkeypatch.setenv(localdirs.SPARK_LOCAL_DIRS, f"{spark_dir},{tmp_path / 'other'}")
    assert localdirs.staging_roots(None)[0] == str(spark_dir / localdirs.FOLDER)
    table = _s3_table(moto_s3)
    commit_all(table, split(900, 3))
    assert_exactly_committed(table, 900)
    assert_clean(table)
    assert list(spark_dir.iterdir()) == []
    # Nor where the option says: no folder of the write (empty or not) stays.
    chosen = tmp_path / "chosen"
    table = _s3_table(moto_s3, **{"markerstore.write.staging.dir": str(chosen)})
    commit_all(table, split(600, 2))
    assert_exactly_committed(table, 600)
    assert not chosen.exists() or list(chosen.rglob("*")) == []


def test_a_killed_attempts_folder_is_swept_at_the_next_task_start_never_a_live_one(
        moto_s3: MotoS3, tmp_path: Path) -> None:
    root = tmp_path / "stage"
    dead, dead_file = _stager(root, 7)
    live, live_file = _stager(root, 8)
    try:
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait(timeout=30)
        assert os.path.getsize(dead_file) > 100_000  # the partial file stays behind
        # Within the grace period even a dead attempt's folder stays.
        table = _s3_table(moto_s3, **{"markerstore.write.staging.dir": str(root)})
        commit_all(table, split(300, 1))
        assert os.path.exists(dead_file) and os.path.exists(live_file)
        localdirs._swept.clear()  # a new worker process (sweeps are once a minute)
        table = _s3_table(moto_s3, **{"markerstore.write.staging.dir": str(root),
                                      "markerstore.write.staging.sweep_grace_ms": "0"})
        commit_all(table, split(600, 2))
        assert_exactly_committed(table, 600)
        assert not os.path.exists(os.path.dirname(os.path.dirname(dead_file)))
        assert os.path.exists(live_file)  # its process holds the folder's lock
        assert sorted(p.name for p in (root / localdirs.FOLDER).iterdir()) == [
            Path(os.path.dirname(os.path.dirname(live_file))).name]
    finally:
        live.kill()
        live.wait(timeout=30)
