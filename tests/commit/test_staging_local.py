"""S3 staging on the worker's disk never leaks: a successful write leaves no folder, a
task attempt killed mid-write leaves a folder the next task start on that worker sweeps,
and the sweep never touches a live attempt's folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.s3 import MotoS3
from markerstore import Table
from markerstore.commit import localdirs
from tests.support.commit_checks import assert_clean, assert_exactly_committed, commit_all, split

pytestmark = pytest.mark.s3

# Two task attempts staging one file each as a task writer does (MultipartStaging.target):
# attempt 7 in this process, attempt 8 in a forked child; each writes part of its file and
# says where, then waits to be killed.
STAGERS = """
import os, sys, time
from markerstore import config
from markerstore.commit.staging import MultipartStaging
from markerstore.storage import Storage
settings = config.resolve({config.STAGING_DIR: sys.argv[1]})
attempt = 8 if os.fork() == 0 else 7
staging = MultipartStaging(Storage("s3://bucket/t"), "20260101000000000", sys.argv[2],
                           settings)
target = staging.target(attempt, "day=1/part-0.parquet")
os.makedirs(os.path.dirname(target), exist_ok=True)
with open(target, "wb") as out:
    out.write(b"PAR1" + b"x" * 100_000)
    out.flush()
    # one write of the whole line: with PYTHONUNBUFFERED, print writes each piece on its
    # own, and the two processes' pieces interleave in the pipe
    sys.stdout.write(f"{os.getpid()} {target}\\n")
    sys.stdout.flush()
    time.sleep(600)
"""


def _stagers(root: Path) -> tuple[subprocess.Popen[str], dict[int, tuple[int, str]]]:
    """The processes staging attempts 7 and 8 of a write under `root`: by attempt, the
    pid and staged file of each."""
    proc = subprocess.Popen([sys.executable, "-c", STAGERS, str(root), uuid.uuid4().hex],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    staged = {}
    for _ in range(2):
        pid, path = proc.stdout.readline().split()
        staged[int(path.split("_")[-1].split(os.sep)[0])] = (int(pid), path)
    return proc, staged


@pytest.fixture(autouse=True)
def private_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A system temp dir of the test's own: every staging root is swept, that one too,
    and a test sweeping with no grace period must not touch another process's folders."""
    folder = tmp_path / "system-tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.delenv(localdirs.SPARK_LOCAL_DIRS, raising=False)


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
    commit_all(table, split(400, 2))
    assert_exactly_committed(table, 400)
    assert_clean(table)
    assert list(spark_dir.iterdir()) == []
    # Nor where the option says: no folder of the write (empty or not) stays.
    chosen = tmp_path / "chosen"
    table = _s3_table(moto_s3, **{"markerstore.write.staging.dir": str(chosen)})
    commit_all(table, split(200, 1))
    assert_exactly_committed(table, 200)
    assert not chosen.exists() or list(chosen.rglob("*")) == []


def test_a_killed_attempts_folder_is_swept_at_the_next_task_start_never_a_live_one(
        moto_s3: MotoS3, tmp_path: Path) -> None:
    root = tmp_path / "stage"
    proc, staged = _stagers(root)
    (dead_pid, dead_file), (_, live_file) = staged[7], staged[8]
    try:
        os.kill(dead_pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert os.path.getsize(dead_file) > 100_000  # the partial file stays behind
        folders = root / localdirs.FOLDER
        assert localdirs.sweep(str(folders), 3600) == 0  # within the grace period
        localdirs._swept.clear()  # a new worker process (sweeps are once a minute)
        table = _s3_table(moto_s3, **{"markerstore.write.staging.dir": str(root),
                                      "markerstore.write.staging.sweep_grace_ms": "0"})
        commit_all(table, split(600, 2))
        assert_exactly_committed(table, 600)
        assert not os.path.exists(os.path.dirname(os.path.dirname(dead_file)))
        assert os.path.exists(live_file)  # its process holds the folder's lock
        assert [p.name for p in folders.iterdir()] == [
            Path(os.path.dirname(os.path.dirname(live_file))).name]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: the live stager too
