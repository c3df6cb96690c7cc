"""Where S3 task attempts stage their files on the worker's disk, and how those folders
never outlive their use.

Each task attempt stages under its own folder,
``<root>/markerstore-staging/<write uuid>_<instant>_<task attempt id>/``, and holds an
exclusive ``flock`` on the ``.lock`` file inside it for as long as it lives; it removes the
whole folder when it finishes or aborts. The root is, in order: the option
``markerstore.write.staging.dir``; Spark's own local dir of this executor (Spark gives its
Python workers ``$SPARK_LOCAL_DIRS``: the executor's block manager folders, which Spark
deletes when the executor or application ends); the system temporary folder.

A process killed mid-task (an executor or Python worker SIGKILLed, a host losing power)
cannot remove its folder, but the kernel drops its lock. So the first task attempt that
stages in a process sweeps the roots it could use (and the system temporary folder,
where earlier versions staged): a folder is removed when no live process holds its lock
and nothing in it changed for the grace period (``markerstore.write.staging.sweep_grace_ms``);
a folder without a lock file (an earlier version's layout) on the grace period alone. A
live attempt's folder is never touched: it holds its lock. A dead attempt's staged files
are never read again by anyone (a retry writes its own), whatever state its write is in.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import threading
import time

log = logging.getLogger(__name__)

FOLDER = "markerstore-staging"
LOCK = ".lock"
SPARK_LOCAL_DIRS = "SPARK_LOCAL_DIRS"
SWEEP_EVERY_SECONDS = 60.0  # a process sweeps a root at most this often

_swept: dict[str, float] = {}
_swept_lock = threading.Lock()


def staging_roots(configured: str | None) -> list[str]:
    """The folders that hold ``markerstore-staging``: the first is where this process
    stages; the others are swept too (where this or an earlier version staged)."""
    roots = []
    if configured:
        roots.append(configured)
    spark_dirs = [d for d in os.environ.get(SPARK_LOCAL_DIRS, "").split(",") if d.strip()]
    if spark_dirs:
        roots.append(spark_dirs[0].strip())
    roots.append(tempfile.gettempdir())
    return list(dict.fromkeys(os.path.join(r, FOLDER) for r in roots))


class AttemptDir:
    """One task attempt's staging folder, locked while the attempt lives."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock_fd: int | None = None

    def open(self) -> str:
        """Create the folder and take its lock (idempotent); its path."""
        if self._lock_fd is None:
            for _ in range(3):  # another attempt may remove the empty root meanwhile
                try:
                    os.makedirs(self.path, exist_ok=True)
                    break
                except FileNotFoundError:
                    continue
            fd = os.open(os.path.join(self.path, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        return self.path

    def remove(self) -> None:
        """Remove the folder (and the root, if that left it empty), then drop the lock
        (idempotent)."""
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)


def sweep_once(roots: list[str], grace_seconds: float) -> int:
    """Sweep each of `roots` unless this process did so less than SWEEP_EVERY_SECONDS
    ago; the number of folders removed."""
    now = time.monotonic()
    todo = []
    with _swept_lock:
        for root in roots:
            if now - _swept.get(root, -SWEEP_EVERY_SECONDS) >= SWEEP_EVERY_SECONDS:
                _swept[root] = now
                todo.append(root)
    return sum(sweep(root, grace_seconds) for root in todo)


def sweep(root: str, grace_seconds: float) -> int:
    """Remove the stale attempt folders under `root` (see the module's docstring)."""
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    removed = 0
    for name in names:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            if _stale(path, grace_seconds):
                removed += 1
        except OSError as exc:  # another sweeper, a permission: leave it
            log.debug("staging sweep: skipped %s: %s", path, exc)
    if removed:
        log.info("staging sweep: removed %d stale folder(s) under %s", removed, root)
    with contextlib.suppress(OSError):
        os.rmdir(root)  # only if empty
    return removed


def _stale(path: str, grace_seconds: float) -> bool:
    """Remove `path` if it is stale; whether it was."""
    if time.time() - _newest_change(path) < grace_seconds:
        return False
    lock_path = os.path.join(path, LOCK)
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        fd = None  # an earlier version's layout, or an attempt not yet locked
    if fd is None:
        shutil.rmtree(path, ignore_errors=True)
        return True
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live attempt holds it
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)


def _newest_change(path: str) -> float:
    """The latest modification time of `path` and anything under it (links not followed)."""
    newest = os.lstat(path).st_mtime
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):
                newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
    return newest
