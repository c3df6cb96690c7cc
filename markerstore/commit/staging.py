"""How a task's files stay invisible until job commit, and how job commit publishes them.

``multipart`` (S3, the s3committer protocol)
    A task writes each file on local disk, then uploads it as a multipart upload it does
    not complete. Job commit completes the uploads in parallel.
``rename`` (local disk, memory)
    A task writes under ``<table>/.markerstore/staging/<instant>/``, on the table's own
    filesystem; job commit renames each file to its place (one atomic, O(1) rename).
``none``
    A task writes at the final path. Markers still let reconcile and rollback remove
    every file of a losing attempt, but raw directory readers see files early.

Publishing is idempotent, so a roll forward may run it again. If publishing fails, what
was published is deleted (before the write is rolled back), so nothing stays visible.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from typing import IO

from markerstore import config
from markerstore.commit import localdirs, s3
from markerstore.commit.names import belongs_to
from markerstore.commit.stats import FileStats
from markerstore.errors import ConfigError, StorageError
from markerstore.storage import Storage
from markerstore.timeline import META_DIR

log = logging.getLogger(__name__)

STAGING_DIR = f"{META_DIR}/staging"
MULTIPART, RENAME, NONE = "multipart", "rename", "none"
Progress = Callable[[int, int], None]


def resolve_mode(storage: Storage, requested: str) -> str:
    """The staging mode for this storage: auto picks multipart on S3, rename elsewhere."""
    if requested == "auto":
        return MULTIPART if storage.is_s3 else RENAME
    if requested == MULTIPART and not storage.is_s3:
        raise ConfigError(f"{config.STAGING_MODE}=multipart needs an S3 table, not "
                          f"{storage.url()}")
    if requested == RENAME and not (storage.is_local or storage.is_memory):
        raise ConfigError(f"{config.STAGING_MODE}=rename needs a filesystem with an atomic "
                          f"rename (local disk, memory); {storage.protocol} has none")
    return requested


def file_crc32(opener: Callable[[], IO[bytes]]) -> str:
    """The checksum of a file, read back in 1 MiB blocks."""
    crc = 0
    with opener() as handle:
        while True:
            block = handle.read(1 << 20)
            if not block:
                break
            crc = zlib.crc32(block, crc)
    return s3.crc32_hex(crc)


class _Fsync(threading.Thread):
    """os.fsync(fd) in a thread of its own; `wait` re-raises its failure."""

    def __init__(self, fd: int) -> None:
        super().__init__(name="markerstore-fsync", daemon=True)
        self.fd = fd
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            os.fsync(self.fd)
        except BaseException as exc:  # noqa: BLE001 - re-raised by wait()
            self.error = exc

    def wait(self) -> None:
        self.join()
        if self.error is not None:
            raise self.error


class Staging(ABC):
    """One write's staging: where tasks put files, how job commit publishes them."""

    mode = ""

    def __init__(self, storage: Storage, instant: str, write_uuid: str,
                 settings: config.Settings) -> None:
        self.storage = storage
        self.instant = instant
        self.write_uuid = write_uuid
        self.settings = settings

    # --- task side ------------------------------------------------------------------------
    @property
    def writes_os_paths(self) -> bool:
        """Whether task targets are paths on the local disk (else fsspec paths)."""
        return self.storage.is_local

    @abstractmethod
    def target(self, task_attempt_id: int, relative: str) -> str:
        """Where a task attempt writes the data file `relative` (to the table)."""

    def finish_file(self, stats: FileStats, target: str) -> FileStats:
        """After a file is closed: make it durable, add its checksum (on local disk the
        fsync runs in a thread while the checksum is read back from the page cache: both
        release the GIL, so the file costs the longer of the two, not their sum)."""
        if self.writes_os_paths:
            with open(target, "rb") as handle:
                synced = _Fsync(handle.fileno())
                try:
                    checksum = file_crc32(lambda: open(target, "rb"))  # noqa: SIM115
                finally:
                    synced.wait()  # before the file (and its descriptor) is closed
        else:
            checksum = file_crc32(lambda: self.storage.fs.open(target, "rb"))
        return replace(stats, checksum=checksum)

    def finish_task(self, files: list[tuple[FileStats, str]],
                    record: Callable[[FileStats], None]) -> list[FileStats]:
        """At task end (task commit): `record` puts a file's details in its marker."""
        return [stats for stats, _ in files]

    def delete_targets(self, targets: Iterable[str]) -> None:
        """Task abort: delete what the attempt wrote (idempotent)."""
        for target in targets:
            try:
                if self.writes_os_paths:
                    os.unlink(target)
                else:
                    self.storage.delete(target)
            except FileNotFoundError:
                pass

    def abort_task(self, task_attempt_id: int) -> None:  # noqa: B027 (optional step)
        """Task abort: anything the mode keeps per task attempt."""

    # --- job side -------------------------------------------------------------------------
    @abstractmethod
    def publish(self, files: list[FileStats], progress: Progress | None = None) -> None:
        """Make the winning files visible at their paths; idempotent. On failure, deletes
        what it published and raises."""

    def unpublish(self, files: list[FileStats]) -> None:
        """Delete published files (a failed job commit)."""
        self.storage.delete_many([self.storage.path(f.path) for f in files],
                                 int(self.settings[config.MARKERS_DELETE_PARALLELISM]))

    @abstractmethod
    def problems(self, files: list[FileStats]) -> list[str]:
        """Why some files cannot be published (any more); empty if all can."""

    def discard_losers(self, winners: list[FileStats]) -> int:
        """Remove staged output of this write that is not among the winners."""
        return 0

    def cleanup(self) -> None:
        """After the instant is terminal: remove its staging area."""
        remove_staging_area(self.storage, self.instant)


def remove_staging_area(storage: Storage, instant: str) -> int:
    folder = storage.path(STAGING_DIR, instant)
    if storage.is_local and not os.path.isdir(folder):
        return 0
    return storage.delete_dir(folder)


class InPlace(Staging):
    mode = NONE

    def target(self, task_attempt_id: int, relative: str) -> str:
        return self.storage.path(relative)

    def publish(self, files: list[FileStats], progress: Progress | None = None) -> None:
        return None

    def unpublish(self, files: list[FileStats]) -> None:
        return None  # files written in place go with the rollback, from their markers

    def problems(self, files: list[FileStats]) -> list[str]:
        return [f"{f.path} is missing" for f in files
                if not self.storage.exists(self.storage.path(f.path))]


class RenameStaging(Staging):
    mode = RENAME

    def _staged(self, relative: str) -> str:
        return self.storage.path(STAGING_DIR, self.instant, relative)

    def target(self, task_attempt_id: int, relative: str) -> str:
        return self._staged(relative)

    def _move(self, stats: FileStats) -> None:
        staged, final = self._staged(stats.path), self.storage.path(stats.path)
        if self.storage.is_local:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            try:
                os.rename(staged, final)
            except FileNotFoundError:
                if not os.path.exists(final):
                    raise
        else:
            try:
                self.storage.fs.mv(staged, final)
            except FileNotFoundError:
                if not self.storage.fs.exists(final):
                    raise

    def publish(self, files: list[FileStats], progress: Progress | None = None) -> None:
        done: list[FileStats] = []
        try:
            for stats in files:
                self._move(stats)
                done.append(stats)
                if progress is not None:
                    progress(len(done), len(files))
        except BaseException:
            self.unpublish(done)
            raise
        if self.storage.is_local:
            from markerstore.storage import fsync_dir

            for folder in sorted({os.path.dirname(self.storage.path(f.path)) for f in files}):
                fsync_dir(folder)

    def problems(self, files: list[FileStats]) -> list[str]:
        fs = self.storage.fs
        return [f"{f.path} is neither staged nor published" for f in files
                if not fs.exists(self._staged(f.path)) and not fs.exists(
                    self.storage.path(f.path))]


class MultipartStaging(Staging):
    mode = MULTIPART

    def __init__(self, storage: Storage, instant: str, write_uuid: str,
                 settings: config.Settings) -> None:
        super().__init__(storage, instant, write_uuid, settings)
        self.started: list[tuple[str, str, str]] = []  # this task's uploads, to abort
        self._dirs: dict[int, localdirs.AttemptDir] = {}

    @property
    def writes_os_paths(self) -> bool:
        return True

    def _task_dir(self, task_attempt_id: int) -> localdirs.AttemptDir:
        """The attempt's own staging folder on this worker (:mod:`localdirs`); the first
        one a process opens sweeps what killed attempts left."""
        folder = self._dirs.get(task_attempt_id)
        if folder is None:
            roots = localdirs.staging_roots(self.settings[config.STAGING_DIR])
            localdirs.sweep_once(roots, self.settings[config.STAGING_SWEEP_GRACE_MS] / 1000)
            folder = self._dirs[task_attempt_id] = localdirs.AttemptDir(os.path.join(
                roots[0], f"{self.write_uuid}_{self.instant}_{task_attempt_id}"))
        return folder

    def target(self, task_attempt_id: int, relative: str) -> str:
        return os.path.join(self._task_dir(task_attempt_id).open(), *relative.split("/"))

    def finish_file(self, stats: FileStats, target: str) -> FileStats:
        return stats  # the checksum is computed while uploading

    def finish_task(self, files: list[tuple[FileStats, str]],
                    record: Callable[[FileStats], None]) -> list[FileStats]:
        part_size = int(self.settings[config.UPLOAD_PART_SIZE])
        result = []
        for stats, target in files:
            def started(upload_id: str, stats: FileStats = stats) -> None:
                bucket, key = s3.bucket_key(self.storage, stats.path)
                self.started.append((bucket, key, upload_id))

            pending, checksum = s3.upload_file(self.storage, target, stats.path, part_size,
                                               started)
            done = replace(stats, checksum=checksum, pending_upload=pending,
                           bytes=pending.size)
            record(done)
            os.unlink(target)
            result.append(done)
        for folder in self._dirs.values():
            folder.remove()
        return result

    def abort_task(self, task_attempt_id: int) -> None:
        try:
            s3.abort_many(self.storage, self.started, 4)
        finally:
            folder = self._dirs.pop(task_attempt_id, None)
            if folder is not None:
                folder.remove()

    def publish(self, files: list[FileStats], progress: Progress | None = None) -> None:
        threads = int(self.settings[config.COMMIT_THREADS])
        done: list[FileStats] = []
        lock = threading.Lock()
        failure: BaseException | None = None
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(files) or 1))) as pool:
            futures = {}
            for stats in files:
                if stats.pending_upload is None:
                    raise StorageError(f"{stats.path} has no pending upload to complete")
                futures[pool.submit(s3.complete, self.storage, stats.pending_upload)] = stats
            for future in as_completed(futures):
                exc = future.exception()
                if exc is not None:
                    failure = failure or exc
                    continue
                with lock:
                    done.append(futures[future])
                    count = len(done)
                if progress is not None and failure is None:
                    progress(count, len(files))
        if failure is not None:
            log.warning("instant %s: completing uploads failed (%s); deleting the %d "
                        "completed object(s)", self.instant, failure, len(done))
            self.unpublish(done)
            raise failure

    def problems(self, files: list[FileStats]) -> list[str]:
        open_ids = {(u.key, u.upload_id) for u in s3.list_uploads(self.storage)}
        issues = []
        for stats in files:
            pending = stats.pending_upload
            if pending is None:
                issues.append(f"{stats.path} has no pending upload")
            elif (pending.key, pending.upload_id) not in open_ids and not s3.is_completed(
                    self.storage, pending):
                issues.append(f"the upload of {stats.path} is neither pending nor completed")
        return issues

    def discard_losers(self, winners: list[FileStats]) -> int:
        """Abort every upload of this write that is not a winner's (losing attempts, and
        uploads a task started but never recorded)."""
        keep = {(f.pending_upload.key, f.pending_upload.upload_id)
                for f in winners if f.pending_upload is not None}
        todo = [(u.bucket, u.key, u.upload_id) for u in s3.list_uploads(self.storage)
                if belongs_to(u.key, self.write_uuid, self.instant)
                and (u.key, u.upload_id) not in keep]
        return s3.abort_many(self.storage, todo, int(self.settings[config.COMMIT_THREADS]))

    def cleanup(self) -> None:
        return None  # nothing of a multipart write is staged on the table's storage


def staging_for(storage: Storage, instant: str, write_uuid: str, settings: config.Settings,
                mode: str | None = None) -> Staging:
    mode = mode or resolve_mode(storage, settings[config.STAGING_MODE])
    classes: dict[str, type[Staging]] = {MULTIPART: MultipartStaging, RENAME: RenameStaging,
                                         NONE: InPlace}
    return classes[mode](storage, instant, write_uuid, settings)
