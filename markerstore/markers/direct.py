"""Direct markers: one object per marker under the instant's marker folder.

The object is empty unless details are given (the S3 staging path records the pending
multipart upload in it). Creation is create-if-absent, so a retried task that asks for a
marker again gets False, not an error.

A marker goes into the instant's marker folder, which the driver creates (with
MARKERS.type) when the write starts and which a commit or rollback deletes. On local disk
and memory a marker is refused once that folder is gone (CommitConflictError): a task that
outlived its instant's rollback cannot leave a marker, nor then a file, behind. That costs
nothing (the folder is where the marker is written); on S3, which has no folders, it would
cost a request per marker, so there the cleanup of a terminal instant's markers deletes
what they name first (see :func:`markerstore.markers.reconcile.clean_markers_of`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from markerstore.errors import CommitConflictError, CorruptTableError, InvalidMarkerError
from markerstore.markers.base import (
    DIRECT,
    MARKER_TYPE_FILE,
    IOType,
    MarkerName,
    WriteMarkers,
    ensure_marker_type,
    marker_folder,
    marker_items,
    markers_to_arrow,
    read_marker_type,
)
from markerstore.storage import Storage

CREATE_PARALLELISM = 16  # PUTs in flight in one create_many call


class DirectWriteMarkers(WriteMarkers):
    """Markers of one instant, one object each."""

    mechanism = DIRECT

    def __init__(self, storage: Storage, instant: str, *, initialize: bool = True) -> None:
        """`initialize` writes (or checks) MARKERS.type; executors pass False, since the
        driver has done it before any task started."""
        super().__init__(instant)
        self.storage = storage
        self.folder = marker_folder(storage, instant)
        if initialize:
            ensure_marker_type(storage, instant, DIRECT)

    def _path(self, marker: MarkerName) -> str:
        return f"{self.folder}/{marker.name}"

    def create(self, partition: str, file_name: str, io_type: IOType | str = IOType.CREATE,
               **details: Any) -> bool:
        marker = MarkerName.build(partition, file_name, io_type)
        body = json.dumps(details, sort_keys=True, default=str).encode() if details else b""
        try:
            return self.storage.create_if_absent(self._path(marker), body, within=self.folder)
        except FileNotFoundError:
            raise self._gone() from None

    def _gone(self) -> CommitConflictError:
        """The instant's marker folder is gone: a rollback (or its commit) removed it, and
        a marker now would name a file no one cleans up."""
        return CommitConflictError(
            f"instant {self.instant} has no marker folder any more: it was rolled back or "
            "completed, so no marker (and no file) may be created for it")

    def create_many(self, markers: Iterable[Mapping[str, Any] | Sequence[Any]]
                    ) -> list[bool]:
        """Create several markers, up to :data:`CREATE_PARALLELISM` PUTs at a time (one
        object each, as :meth:`create`). Every marker is tried; if any failed, the first
        error is raised after all are done, and the ones created stay (reconcile and
        rollback treat a marker whose file never appeared as nothing to delete)."""
        items = marker_items(markers)
        if len(items) <= 1:
            return [self.create(*args, **details) for args, details in items]
        # A marker asked for twice in one call is created once: its first item creates
        # it, the later ones answer False, as they would one after another.
        first: dict[str, int] = {}
        for i, (args, _) in enumerate(items):
            first.setdefault(MarkerName.build(*args).name, i)
        todo = sorted(set(first.values()))
        results = [False] * len(items)
        error: BaseException | None = None
        with ThreadPoolExecutor(min(CREATE_PARALLELISM, len(todo)),
                                "markerstore-markers") as pool:
            futures = {i: pool.submit(self.create, *items[i][0], **items[i][1]) for i in todo}
            for i, future in futures.items():
                exc = future.exception()
                if exc is not None:
                    error = error or exc
                else:
                    results[i] = future.result()
        if error is not None:
            raise error
        return results

    def update(self, partition: str, file_name: str, io_type: IOType | str = IOType.CREATE,
               **details: Any) -> None:
        """Record details (size, checksum, pending upload) in an existing marker."""
        marker = MarkerName.build(partition, file_name, io_type)
        try:
            self.storage.put(self._path(marker), json.dumps(details, sort_keys=True,
                                                            default=str).encode(),
                             within=self.folder)
        except FileNotFoundError:
            raise self._gone() from None

    def _files(self) -> list[str]:
        return self.storage.find(self.folder)

    def _markers(self, files: list[str]) -> list[tuple[MarkerName, str]]:
        prefix = self.folder.rstrip("/") + "/"
        result = []
        for path in files:
            name = path[len(prefix):]
            if name == MARKER_TYPE_FILE or "/." in "/" + name:
                continue  # the type file, or a temporary file of a local atomic write
            try:
                marker = MarkerName.parse(name)
            except InvalidMarkerError as exc:
                raise CorruptTableError(self.storage.url(path),
                                        f"not a marker of this folder: {exc}") from None
            result.append((marker, path))
        return result

    def all(self) -> list[str]:
        files = self._files()
        read_marker_type(self.storage, self.instant, files)
        return sorted(marker.name for marker, _ in self._markers(files))

    def exists(self) -> bool:
        return bool(self.storage.ls(self.folder))

    def has(self, partition: str, file_name: str, io_type: IOType | str) -> bool:
        return self.storage.exists(self._path(MarkerName.build(partition, file_name, io_type)))

    def delete_all(self) -> bool:
        return self.storage.delete_dir(self.folder) > 0

    def to_arrow(self, with_details: bool = False, *, untyped: str | None = None
                 ) -> pa.Table:
        """All markers as rows; `with_details` also reads each non-empty marker's content
        (one GET each: used by rollback to find pending uploads). `untyped`: see
        :func:`~markerstore.markers.base.read_marker_type`."""
        files = self._files()
        read_marker_type(self.storage, self.instant, files, untyped=untyped)
        pairs = self._markers(files)
        details: list[dict[str, Any]] = [{} for _ in pairs]
        if with_details:
            for i, (_, path) in enumerate(pairs):
                raw = self.storage.get(path)
                if raw.strip():
                    details[i] = _details(raw, self.storage.url(path))
        return markers_to_arrow([marker for marker, _ in pairs], details)


def _details(raw: bytes, where: str) -> dict[str, Any]:
    """The details a direct marker holds: a JSON object."""
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise CorruptTableError(where, f"marker details are not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise CorruptTableError(where, f"marker details must be a JSON object, got "
                                       f"{type(payload).__name__}")
    size = payload.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                             or not 0 <= size < 2 ** 63):
        raise CorruptTableError(where, f"marker detail 'size' must be an integer from 0 to "
                                       f"2^63-1, got {size!r:.80}")
    for key in ("task_attempt", "checksum"):
        if payload.get(key) is not None and not isinstance(payload[key], str):
            raise CorruptTableError(where, f"marker detail {key!r} must be a string")
    if not isinstance(payload.get("pending_upload"), (dict, str, type(None))):
        raise CorruptTableError(where, "marker detail 'pending_upload' must be an object")
    return payload
