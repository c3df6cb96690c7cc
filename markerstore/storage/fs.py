"""Storage access through fsspec: atomic create-if-absent, retries with backoff, request counts.

One :class:`Storage` per table base URL. Every request markerstore makes goes through it,
so it can be retried on throttling and timeouts, and counted by kind (PUT, GET, LIST,
DELETE, HEAD). On S3 the count is of real HTTP requests, read from botocore's event
hooks; on other filesystems it is one per operation. And every path it reads, writes or
deletes is checked first to be in the table (:mod:`markerstore.storage.contain`): nothing
goes through a symbolic link out of the table, whichever caller asks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any, TypeVar

import fsspec
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from markerstore.backoff import backoff
from markerstore.errors import CorruptTableError, MarkerStoreError, StorageError
from markerstore.storage.contain import (
    PATH_ERRNOS,
    Containment,
    path_error,
    path_errors,
    shown,
)
from markerstore.storage.local import (
    TooDeepError,
    local_atomic_replace,
    local_create_exclusive,
    local_find,
    make_folders,
)

T = TypeVar("T")

# fsspec's memory filesystem is one process-wide dict and not thread-safe: every request
# to it is serialised (it exists for fast unit tests).
_MEMORY_LOCK = threading.RLock()

KINDS = ("PUT", "GET", "LIST", "DELETE", "HEAD")

# S3 API operations by request kind (POST counts as PUT, as S3's price list does).
_S3_KIND = {
    "PutObject": "PUT", "CreateMultipartUpload": "PUT", "UploadPart": "PUT",
    "CompleteMultipartUpload": "PUT", "CopyObject": "PUT", "UploadPartCopy": "PUT",
    "CreateBucket": "PUT",
    "GetObject": "GET",
    "ListObjectsV2": "LIST", "ListObjects": "LIST", "ListMultipartUploads": "LIST",
    "ListParts": "LIST", "ListObjectVersions": "LIST", "ListBuckets": "LIST",
    "DeleteObject": "DELETE", "DeleteObjects": "DELETE", "AbortMultipartUpload": "DELETE",
    "HeadObject": "HEAD", "HeadBucket": "HEAD",
}

_TRANSIENT_NAMES = frozenset({
    "ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError",
    "ConnectionClosedError", "ServerDisconnectedError", "ClientConnectorError",
    "ClientOSError", "ServerTimeoutError", "ResponseStreamingError", "ClientPayloadError",
})
# Folders below a listed folder: markerstore writes a handful (partition columns); a tree
# deeper than this is not the table's (a listing stops there with CorruptTableError,
# naming the folder, instead of recursing until the interpreter gives up).
MAX_LIST_DEPTH = 256
_TRANSIENT_ERRNOS = frozenset({errno.EBUSY, errno.EAGAIN, getattr(errno, "EREMOTEIO", 121)})


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: throttling (503 SlowDown), 500s and timeouts."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    text = str(exc)
    return "SlowDown" in text or "503" in text and "Service Unavailable" in text


class Storage:
    """Requests to one table's storage, retried and counted.

    Paths taken and returned by the methods are fsspec paths (no protocol); use
    :meth:`path` to build one under the base and :meth:`url` to show one to a user.
    """

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        retries: int = 5,
        retry_base_delay: float = 0.1,
    ) -> None:
        if not isinstance(url, str) or not url.strip():
            raise ValueError(f"table path must be a non-empty string, got {url!r}")
        options = dict(storage_options or {})
        protocol = fsspec.core.split_protocol(url)[0] or "file"
        if protocol in ("s3", "s3a"):
            # Listings must never come from a cache: another process may have written.
            options.setdefault("use_listings_cache", False)
            options.setdefault("skip_instance_cache", True)
        self._url = url
        self.fs, root = fsspec.core.url_to_fs(url, **options)
        self.storage_options = dict(storage_options or {})
        self.protocol = protocol
        self.root = root.rstrip("/") if root not in ("/", "") else root
        self.is_local = isinstance(self.fs, LocalFileSystem)
        self.is_memory = isinstance(self.fs, MemoryFileSystem)
        self.is_s3 = type(self.fs).__name__ == "S3FileSystem"
        self.retries = retries
        self.retry_base_delay = retry_base_delay
        self._counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self._containment = Containment(self.root, local=self.is_local, source=self.url())
        if self.is_s3:
            self._hook_s3_counter()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as what it was built from (a filesystem client, counters and locks
        belong to one process): a Table can travel from the Spark driver to a worker."""
        return (_storage, (self._url, self.storage_options, self.retries,
                           self.retry_base_delay))

    # --- paths -----------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        """An fsspec path under the base (parts joined with '/')."""
        cleaned = [p.strip("/") for p in parts if p and p.strip("/")]
        return "/".join([self.root.rstrip("/")] + cleaned) if cleaned else self.root

    def url(self, path: str | None = None) -> str:
        """A path as a URL a user can paste (with its protocol, except for local paths)."""
        path = self.root if path is None else path
        if self.is_local:
            return path
        return self.fs.unstrip_protocol(path)

    def relative(self, path: str) -> str:
        """`path` relative to the base; raises if it is outside the base."""
        path = self._strip(path)
        base = self.root.rstrip("/") + "/"
        if not path.startswith(base):
            raise ValueError(f"{path!r} is not under the table path {self.root!r}")
        return path[len(base):]

    def _strip(self, path: str) -> str:
        stripped: str = self.fs._strip_protocol(path)
        return stripped

    def check_in_table(self, path: str) -> None:
        """CorruptTableError unless `path` is in the table (see :mod:`.contain`): every
        read and write checks it before its request."""
        self._containment.check(self._strip(path) if "://" in path else path)

    def check_contained(self, paths: Iterable[str], *, follow: bool = False) -> None:
        """CorruptTableError if deleting any of `paths` would reach outside the table: on
        local disk, through a folder on the way that is a symbolic link leading out (each
        folder checked once; a path may be a link itself, which a delete removes without
        following); elsewhere, a path not under the table's prefix. With `follow` (the
        paths are to be read by someone else: pyarrow, Spark) no path may be a link
        leading out either."""
        self._containment.check_all((self._strip(p) if "://" in p else p for p in paths),
                                    follow=follow)

    def is_link(self, path: str) -> bool:
        """Whether `path` is a symbolic link (only local disk has them)."""
        return self.is_local and os.path.islink(path.rstrip("/"))

    def writable_folder(self, path: str) -> str:
        """For a caller that writes the file at `path` itself (pyarrow writes data files
        on local disk): check that `path` is in the table, create its folder, return it."""
        self.check_in_table(path)
        if self.is_local:
            with path_errors(path):
                make_folders(os.path.dirname(path))  # none left behind if refused
        return path

    # --- counting ----------------------------------------------------------------------
    def count_request(self, kind: str, n: int = 1) -> None:
        """Count `n` requests of `kind` made outside this class (DuckDB reading files
        itself, say); S3 requests are counted as they are sent."""
        if self.is_s3 or n <= 0:
            return  # S3 requests are counted by the botocore hook
        with self._count_lock:
            self._counts[kind] += n

    def _hook_s3_counter(self) -> None:
        self.fs.connect()
        events = self.fs.s3.meta.events

        def on_send(event_name: str = "", **_: Any) -> None:
            kind = _S3_KIND.get(event_name.rsplit(".", 1)[-1], "OTHER")
            with self._count_lock:
                self._counts[kind] += 1

        events.register("before-send.s3", on_send)

    def requests(self) -> dict[str, int]:
        """Storage requests made so far, by kind, including retried attempts."""
        with self._count_lock:
            counts = {kind: self._counts.get(kind, 0) for kind in KINDS}
            for kind, n in self._counts.items():
                counts.setdefault(kind, n)
        counts["total"] = sum(v for k, v in counts.items() if k != "total")
        return counts

    def reset_requests(self) -> None:
        with self._count_lock:
            self._counts.clear()

    # --- retry -------------------------------------------------------------------------
    def retry(self, what: str, kind: str, fn: Callable[[], T]) -> T:
        """Run one storage request `fn` (counted as `kind`), retrying transient errors
        with backoff; `what` names it in the error after the last retry."""
        attempt = 0
        while True:
            self.count_request(kind)
            try:
                if self.is_memory:
                    with _MEMORY_LOCK:
                        return fn()
                return fn()
            except (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
                    MarkerStoreError):
                raise
            except Exception as exc:
                if isinstance(exc, OSError) and exc.errno in PATH_ERRNOS:
                    raise path_error(exc.filename if isinstance(exc.filename, str)
                                     else what, exc) from None
                if not is_transient(exc) or attempt >= self.retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise StorageError(f"{what} failed{tries}: {type(exc).__name__}: {exc}") \
                        from exc
                time.sleep(backoff(attempt, self.retry_base_delay, cap=10.0))
                attempt += 1

    # --- reads -------------------------------------------------------------------------
    def get(self, path: str) -> bytes:
        """The content of a file; FileNotFoundError if it does not exist."""
        # One GetObject on S3 (s3fs would HEAD first to split large reads).
        kwargs = {"max_concurrency": 1} if self.is_s3 else {}
        self.check_in_table(path)
        data: bytes = self.retry(f"GET {self.url(path)}", "GET",
                                  lambda: self.fs.cat_file(path, **kwargs))
        return data

    def exists(self, path: str) -> bool:
        self.check_in_table(path)
        return bool(self.retry(f"HEAD {self.url(path)}", "HEAD", lambda: self.fs.exists(path)))

    def info(self, path: str) -> dict[str, Any]:
        self.check_in_table(path)
        info: dict[str, Any] = self.retry(f"HEAD {self.url(path)}", "HEAD",
                                           lambda: self.fs.info(path))
        return info

    def ls(self, path: str) -> list[str]:
        """Names (not paths) directly under `path`; empty if it does not exist."""
        self.check_in_table(path)

        def run() -> list[str]:
            if self.is_local:  # os.listdir: fsspec makes a path object per entry
                try:
                    return sorted(os.listdir(path))
                except (FileNotFoundError, NotADirectoryError):
                    return []
            try:
                entries = self.fs.ls(path, detail=False)
            except FileNotFoundError:
                return []
            prefix = path.rstrip("/") + "/"
            return sorted({e.rstrip("/")[len(prefix):] for e in entries
                           if e.rstrip("/").startswith(prefix)})

        return self.retry(f"LIST {self.url(path)}", "LIST", run)

    def find(self, path: str) -> list[str]:
        """Paths of every file under `path`, recursively; empty if it does not exist (a
        symbolic link is listed as a file: it is never followed)."""
        self.check_in_table(path)

        def run() -> list[str]:
            if self.is_local:  # iterative: fsspec's walk recurses once per folder level
                try:
                    return sorted(local_find(path, MAX_LIST_DEPTH))
                except TooDeepError as exc:
                    raise self._too_deep(path, exc.folder) from None
            try:
                found = sorted(self.fs.find(path))
            except FileNotFoundError:
                return []
            base = path.rstrip("/").count("/")
            for file in found:
                if file.count("/") - base > MAX_LIST_DEPTH + 1:
                    folder = "/".join(file.split("/")[:base + MAX_LIST_DEPTH + 2])
                    raise self._too_deep(path, folder)
            return found

        return self.retry(f"LIST {self.url(path)}", "LIST", run)

    def _too_deep(self, path: str, folder: str) -> CorruptTableError:
        return CorruptTableError(self.url(folder), f"folders nested more than "
                                 f"{MAX_LIST_DEPTH} deep below {shown(self.url(path))}: "
                                 "markerstore never writes such a tree (move it out of the "
                                 "table, then retry)")

    def open_read(self, path: str) -> IO[bytes]:
        self.check_in_table(path)
        self.count_request("GET")
        with path_errors(path):
            handle: IO[bytes] = self.fs.open(path, "rb")
        return handle

    # --- writes ------------------------------------------------------------------------
    def put(self, path: str, data: bytes, *, within: str | None = None) -> None:
        """Write a whole file, replacing any old one; readers never see a partial file.
        `within`: see :meth:`create_if_absent`."""
        self.check_in_table(path)
        if self.is_local:
            self.retry(f"PUT {path}", "PUT",
                       lambda: local_atomic_replace(path, data, within))
        else:
            def run() -> None:
                self._check_within(within)
                self.fs.pipe_file(path, data)

            self.retry(f"PUT {self.url(path)}", "PUT", run)

    def create_if_absent(self, path: str, data: bytes = b"", *,
                         within: str | None = None) -> bool:
        """Create a file only if none exists; True if this call created it.

        S3: PutObject with If-None-Match: *. Local: link(2) of a complete temporary file,
        so the file appears whole or not at all. When the file exists and `data` is not
        empty, its content is compared with `data`: a request whose answer was lost and
        that a retry then found applied is ours (callers put unique content in files whose
        creator matters, such as completed instants).

        `within`: a folder above `path` that must exist already (the folders between it and
        the file are created): FileNotFoundError if it does not. On local disk and memory
        this costs nothing more (the folder is where the file goes); object stores have
        no folders, so there it is not checked.
        """

        def attempt() -> bool:
            try:
                if self.is_local:
                    local_create_exclusive(path, data, within)
                elif self.is_memory:
                    self._check_within(within)
                    if self.fs.exists(path):  # under _MEMORY_LOCK (see retry)
                        raise FileExistsError(path)
                    self.fs.pipe_file(path, data)
                else:
                    self.fs.pipe_file(path, data, mode="create")
                return True
            except FileExistsError:
                if data:
                    try:
                        return self.get(path) == data
                    except FileNotFoundError:
                        return False
                return False

        self.check_in_table(path)
        return self.retry(f"create {self.url(path)}", "PUT", attempt)

    def _check_within(self, within: str | None) -> None:
        if within is not None and self.is_memory and not self.fs.isdir(within):
            raise FileNotFoundError(within)

    def open_write(self, path: str) -> IO[bytes]:
        """A file handle for a large write (data files); the caller closes it."""
        self.writable_folder(path)
        self.count_request("PUT")
        with path_errors(path):
            handle: IO[bytes] = self.fs.open(path, "wb")
        return handle

    # --- deletes -----------------------------------------------------------------------
    def delete(self, path: str) -> None:
        """Delete one file; a missing file is not an error. On local disk, refuses (before
        deleting) a file reached through a symbolic link out of the table."""
        self.check_contained([path])
        self._delete_checked(path)

    def delete_many(self, paths: Iterable[str], parallelism: int = 100) -> int:
        """Delete files in parallel; missing files are fine, any other failure raises.

        On S3 this is DeleteObjects, 1000 keys a request. Returns how many were asked for.
        """
        todo = sorted(set(paths))
        if not todo:
            return 0
        self.check_contained(todo)  # all of them before the first delete
        if self.is_s3:
            batches = [todo[i:i + 1000] for i in range(0, len(todo), 1000)]

            def run_batch(batch: list[str]) -> None:
                self.retry(f"DELETE {len(batch)} objects under {self.url()}", "DELETE",
                            lambda: self.fs.rm(batch))

            self._parallel(run_batch, batches, min(parallelism, 10))
            return len(todo)
        # Local disk and memory: a thread per chunk of files, not a future per file (a
        # million futures cost more than the deletes).
        size = -(-len(todo) // max(1, parallelism))
        chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
        failures: list[str] = []
        self._parallel(lambda chunk: failures.extend(self._delete_chunk(chunk)), chunks,
                       parallelism)
        if failures:
            raise StorageError(_failed(failures))
        return len(todo)

    def _delete_chunk(self, paths: list[str]) -> list[str]:
        """Delete `paths` one after the other; the failures, each as `path: error`."""
        failures = []
        for path in paths:
            try:
                self._delete_checked(path)
            except Exception as exc:  # noqa: BLE001 - every failure is reported
                failures.append(f"{path}: {exc}")
        return failures

    def _delete_checked(self, path: str) -> None:
        def run() -> None:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm_file(path)

        self.retry(f"DELETE {self.url(path)}", "DELETE", run)

    def delete_dir(self, path: str, parallelism: int = 100) -> int:
        """Delete a folder and everything under it; returns the number of files deleted.
        A folder that is a symbolic link is unlinked, never followed; a folder reached
        through one that leads out of the table is refused before anything is deleted."""
        path = path.rstrip("/") or path
        self.check_contained([path])
        if self.is_link(path):
            os.unlink(path)  # the link itself, never what it leads to
            return 1
        files = self.find(path)
        count = self.delete_many(files, parallelism)
        if self.is_local and os.path.isdir(path):
            import shutil

            shutil.rmtree(path, ignore_errors=True)  # never follows a link inside
        elif self.is_memory:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(path, recursive=True)
        return count

    def _parallel(self, fn: Callable[[Any], None], items: list[Any], parallelism: int) -> None:
        if len(items) == 1 or parallelism <= 1:
            for item in items:
                fn(item)
            return
        failures: list[str] = []
        with ThreadPoolExecutor(max_workers=min(parallelism, len(items))) as pool:
            for item, future in [(i, pool.submit(fn, i)) for i in items]:
                exc = future.exception()
                if exc is not None:
                    failures.append(f"{item}: {exc}")
        if failures:
            raise StorageError(_failed(failures))


def _failed(failures: list[str]) -> str:
    more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
    return f"{len(failures)} deletes failed: " + "; ".join(failures[:5]) + more


def _storage(url: str, storage_options: Mapping[str, Any], retries: int,
             retry_base_delay: float) -> Storage:
    return Storage(url, storage_options, retries=retries, retry_base_delay=retry_base_delay)
