"""The marker server's engine: queue, dispatcher, dedupe, lazy load, the timeline.

It runs on one asyncio event loop; storage work runs in thread pools. The pending
creates of a marker folder are deduplicated against the markers it holds and written as
ONE new segment once the oldest has waited ``batch.interval_ms`` (a dispatcher checks
four times an interval), or earlier when the clients answered last are all back (see
writer.py; up to ``batch.num_threads`` flushes run in parallel). A create is answered
only after its segment is durable; a failed storage write fails every create of the
batch (503), and none of them is held, so a retry writes them again (a bad request never
gets into a batch: see validate.py). A folder's state is loaded from its segments on its
first request, so a restarted server knows every marker it acknowledged before; an
instant with no folder is not held, unless it is written or sealed.

Its parts: flushes and compactions (writer.py), which instants are inflight (inflight.py),
reads of the markers held (queries.py); here, the queue and dispatcher, loading a folder,
creates, and opening, sealing and deleting a folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from markerstore import config
from markerstore.errors import MarkerStoreError, MarkerTypeError, StorageError
from markerstore.markers.base import (
    BATCHED,
    DIRECT,
    MarkerName,
    ensure_marker_type,
    marker_folder,
    read_marker_type,
)
from markerstore.markers.segments import (
    SegmentFile,
    encode,
    marker_row,
    read_listed,
    rows_to_table,
)
from markerstore.metrics import Registry
from markerstore.server.inflight import InflightWatch, TimelineView
from markerstore.server.keys import key_of
from markerstore.server.memory import limit_heap, trim
from markerstore.server.queries import MarkerQueries
from markerstore.server.state import (
    DirState,
    Pending,
    Segment,
    Waiter,
    compaction_target,
    file_id,
    file_id_key,
    request_value,
)
from markerstore.server.writer import ServiceError
from markerstore.storage import Storage
from markerstore.timeline import is_instant

log = logging.getLogger(__name__)


def load_segment_files(storage: Storage, instant: str) -> tuple[list[Segment], int]:
    """Every segment of an instant with its bytes (one GET each; rows counted when the
    state reads them), and the highest sequence number (-1 if none); lists again when
    compaction deleted a listed segment meanwhile."""
    def read(files: list[SegmentFile]) -> tuple[list[Segment], int]:
        segments = [Segment(f, storage.get(f.path), 0) for f in files]
        return segments, max((f.seq for f in files), default=-1)

    return read_listed(storage, instant, read)


def _consume(future: asyncio.Future[Any]) -> None:
    # A client that went away leaves its future unawaited; mark the outcome as seen.
    if not future.cancelled():
        future.exception()


class MarkerService(MarkerQueries, InflightWatch):
    """Batched markers of one table, served from memory and flushed as segments."""

    def __init__(self, storage: Storage, settings: config.Settings,
                 registry: Registry) -> None:
        self.storage = storage
        self.interval = settings[config.BATCH_INTERVAL_MS] / 1000
        self.num_threads = int(settings[config.BATCH_NUM_THREADS])
        self.fmt = str(settings[config.BATCH_FORMAT])
        self.max_segments = int(settings[config.BATCH_MAX_SEGMENTS])
        self.compact_target = compaction_target(self.max_segments)
        limit_heap()  # large blocks (key arrays, decoded pieces) go back when freed
        self.conflict_detection = bool(settings[config.EARLY_CONFLICT_DETECTION])
        self.instant_check = settings[config.SERVER_INSTANT_CHECK_MS] / 1000
        self.states: dict[str, DirState] = {}
        self._loading: dict[str, asyncio.Task[DirState]] = {}
        self._view: TimelineView | None = None
        self._refresh: tuple[float, asyncio.Task[TimelineView]] | None = None
        self._waiting = 0
        self._last_create = 0.0  # time.monotonic() of the last create request
        self._dispatcher: asyncio.Task[None] | None = None
        self._flush_pool = ThreadPoolExecutor(self.num_threads, "markerstore-flush")
        self._io_pool = ThreadPoolExecutor(4, "markerstore-io")
        self._setup_metrics(registry)

    # --- metrics ---------------------------------------------------------------------------
    def _setup_metrics(self, registry: Registry) -> None:
        self.registry = registry
        self._flush_seconds = registry.histogram(
            "markerstore_marker_flush_seconds", help="Time to write one segment (one batch).")
        self._ack_seconds = registry.histogram(
            "markerstore_marker_ack_seconds",
            help="Time from receiving a create to answering it.")
        self._batch_size = registry.histogram(
            "markerstore_marker_batch_markers", help="New markers written per batch.",
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000))
        gauges: dict[str, tuple[str, Callable[[], float]]] = {
            "markerstore_marker_queue_depth": (
                "Creates waiting for their batch to be flushed.", lambda: self._waiting),
            "markerstore_markers_held": (
                "Markers held in memory (all folders).",
                lambda: sum(len(s.names) for s in self.states.values())),
            "markerstore_marker_segments": (
                "Segment files of the folders held.",
                lambda: sum(s.segment_count for s in self.states.values())),
            "markerstore_marker_dirs": ("Marker folders held.", lambda: len(self.states)),
        }
        for name, (help_text, fn) in gauges.items():
            registry.gauge(name, help=help_text).set_function(fn)
        for kind in ("PUT", "GET", "LIST", "DELETE", "HEAD", "total"):
            registry.gauge("markerstore_storage_requests", {"kind": kind},
                           "Storage requests this server made so far, by kind (retries "
                           "included).").set_function(self._requests_of(kind))

    def _requests_of(self, kind: str) -> Callable[[], float]:
        return lambda: self.storage.requests().get(kind, 0)

    # --- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())
        # Encode an empty segment and list the timeline once now, so that the first
        # creates wait for neither the codec's start-up (~0.2 s) nor the storage client's
        # first request (botocore: ~1 s), and need no listing.
        sample = MarkerName.build("p", "warm-up.parquet", "CREATE")
        await self._run(self._flush_pool, encode,
                        rows_to_table([marker_row(sample, {}, 0)]), self.fmt)
        try:
            await self._fresh_view(time.monotonic())
        except ServiceError as exc:
            log.warning("marker server: cannot read the timeline at start (%s); creates will "
                        "fail until storage answers", exc.message)

    async def stop(self) -> None:
        """Flush what is queued (and answer it), then stop."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
            self._dispatcher = None
        for _ in range(3):
            self._tick(final=True)
            tasks = [t for s in self.states.values() for t in s.tasks]
            if not tasks:
                break
            await asyncio.wait(tasks)
        if self._refresh is not None:
            refresh = self._refresh[1]
            refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError, ServiceError):
                await refresh
        self._flush_pool.shutdown(wait=True)
        self._io_pool.shutdown(wait=True)

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while True:
            next_tick += self.interval / 4  # so no create waits much past the interval
            delay = next_tick - loop.time()
            if delay < 0:  # behind: tick now, and do not try to catch up
                next_tick, delay = loop.time(), 0
            await asyncio.sleep(delay)
            try:
                self._tick()
            except Exception:  # never let the dispatcher die: requests would hang
                log.exception("marker server: dispatcher tick failed")

    def _tick(self, final: bool = False) -> None:
        active = False
        now = time.monotonic()
        for state in list(self.states.values()):
            if not final:
                self._maybe_compact(state)
            if state.pending:
                active = True
                if final or self._should_flush(state):
                    self._start_flush(state)
        # Re-list the timeline when it is stale and creates came since the last listing.
        view = self._view
        if (not final and self.instant_check > 0 and self._refresh is None
                and (active or (view is not None and self._last_create > view.started))
                and (view is None or now - view.started > self.instant_check)):
            self._start_refresh()

    # --- loading -----------------------------------------------------------------------------
    async def state(self, instant: str, *, write: bool = False, hold: bool = False
                    ) -> DirState:
        """The state of an instant's marker folder, loaded from storage on first use.
        `write`: the instant must be inflight (creates of a finished instant are refused),
        which is checked before anything is read from its folder. The state is held
        (kept in memory) when the folder exists, or for `write` or `hold`; a read of an
        instant that has no marker folder gets an empty state that nothing keeps, so
        requests for unknown instants allocate nothing that stays."""
        if not is_instant(instant):
            raise ServiceError(HTTPStatus.BAD_REQUEST, "bad_instant",
                               f"{instant[:40]!r} is not an instant id (17 digits)")
        state = self.states.get(instant)
        checked_at = None
        if write:
            if state is not None and state.gone:
                raise ServiceError(HTTPStatus.CONFLICT, "instant_not_inflight", state.gone)
            if state is None or not state.inflight_checked:
                checked_at = await self._require_inflight(instant)
        if state is None:
            task = self._loading.get(instant)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._load(instant))
                self._loading[instant] = task
            state = await asyncio.shield(task)
            if write or hold:
                state = self.states.setdefault(instant, state)
        if write:
            if state.gone:
                raise ServiceError(HTTPStatus.CONFLICT, "instant_not_inflight", state.gone)
            if checked_at is not None and not state.inflight_checked:
                state.inflight_checked = True
                state.checked_at = checked_at
        return state

    async def _load(self, instant: str) -> DirState:
        try:
            state = await self._run(self._io_pool, self._load_sync, instant)
        finally:
            self._loading.pop(instant, None)
        if not state.initialized:
            return self.states.get(instant, state)  # no folder: held only if asked to
        return self.states.setdefault(instant, state)

    def _load_sync(self, instant: str) -> DirState:
        try:
            mechanism = read_marker_type(self.storage, instant)
        except StorageError as exc:
            raise ServiceError(
                HTTPStatus.SERVICE_UNAVAILABLE, "storage_error", f"loading the markers of instant "
                f"{instant} failed: {exc}") from exc
        except MarkerStoreError as exc:  # MARKERS.type missing, corrupt or unexpected
            raise ServiceError(
                HTTPStatus.INTERNAL_SERVER_ERROR, "marker_folder_unreadable", str(exc)) from exc
        if mechanism == DIRECT:
            raise ServiceError(
                HTTPStatus.CONFLICT, "marker_type", f"the markers of instant {instant} are "
                "DIRECT; one instant uses one marker mechanism")
        if mechanism is None:
            return DirState(instant, track_ids=self.conflict_detection)
        try:
            segments, max_seq = load_segment_files(self.storage, instant)
            state = DirState.from_segments(instant, segments, max_seq, initialized=True,
                                           track_ids=self.conflict_detection)
        except StorageError as exc:
            raise ServiceError(
                HTTPStatus.SERVICE_UNAVAILABLE, "storage_error", f"loading the markers of instant "
                f"{instant} failed: {exc}") from exc
        except MarkerStoreError as exc:  # a segment whose rows are not valid markers
            raise ServiceError(
                HTTPStatus.INTERNAL_SERVER_ERROR, "marker_folder_unreadable", str(exc)) from exc
        log.info("marker server: loaded %d segment(s) of instant %s", len(segments), instant)
        trim()  # the pieces decoded to hash the names
        return state

    # --- creates -----------------------------------------------------------------------------
    async def create(self, instant: str, items: list[tuple[MarkerName, dict[str, Any]]],
                     request_id: str | None = None, update: bool = False) -> list[bool]:
        """Queue markers and wait until they are durable; True for each one this request
        created (or an earlier try of it, same `request_id`), False if it already existed.
        `update`: the rows carry new details (size, checksum, pending upload) of markers
        that may exist already; each row is written even then, and readers merge a
        marker's rows (the latest value of each detail)."""
        started = time.perf_counter()
        self._last_create = time.monotonic()
        state = await self.state(instant, write=True)
        self._check_conflicts(state, [m for m, _ in items])
        results = [False] * len(items)
        waiter: Waiter | None = None
        keys = [key_of(marker.name) for marker, _ in items]
        held = state.names.contains_many(keys) if not update else [False] * len(keys)
        creator = request_value(request_id)
        for index, (marker, row) in enumerate(items):
            if held[index]:
                created = request_id is not None and \
                    state.names.value(keys[index]) == creator
                self._creates("created" if created else "existed")
                results[index] = created
                continue
            if waiter is None:
                waiter = Waiter(asyncio.get_running_loop().create_future(), results)
                waiter.future.add_done_callback(_consume)
            waiter.remaining += 1
            pending = Pending(marker, row, request_id, waiter, index, started, update,
                              keys[index])
            state.pending.append(pending)
            state.outstanding = max(0, state.outstanding - 1)
            if self.conflict_detection:
                state.pending_ids[pending.key] += 1
            self._waiting += 1
        if waiter is not None:
            self._maybe_flush(state)  # e.g. the clients of the last batches are all back
            results = await waiter.future
        self._ack_seconds.observe(time.perf_counter() - started)
        return results

    def _check_conflicts(self, state: DirState, markers: Iterable[MarkerName]) -> None:
        if not self.conflict_detection:
            return
        view = self._view
        for marker in markers:
            key = (marker.partition, file_id(marker.file_name))
            id_key = file_id_key(*key)
            holders = {o.instant for o in self.states.values()
                       if o is not state and not o.gone
                       and (id_key in o.file_ids or o.pending_ids.get(key))}
            if view is not None:
                holders |= set(view.foreign.get(key, ())) - {state.instant}
            if holders:
                self._creates("conflict")
                raise ServiceError(
                    HTTPStatus.CONFLICT, "conflict",
                    f"early conflict detection: inflight instant(s) {', '.join(sorted(holders))}"
                    f" also write file id {key[1]!r} in partition {key[0]!r}; refusing the "
                    f"marker of {marker.file_name!r} for instant {state.instant}")

    # --- the folder: open, seal, delete -------------------------------------------------
    async def open(self, instant: str) -> int:
        """Make the instant's folder ready for creates: the instant must be inflight; its
        segments are loaded; MARKERS.type is written now (as the driver does for direct
        markers), so a write that dies before its first marker still leaves a typed
        folder. Returns the number of markers held."""
        state = await self.state(instant, write=True)
        if not state.initialized:
            try:
                await self._run(self._io_pool, ensure_marker_type, self.storage, instant,
                                BATCHED)
            except MarkerTypeError as exc:
                raise ServiceError(HTTPStatus.CONFLICT, "marker_type", str(exc)) from exc
            except OSError as exc:  # StorageError included
                raise ServiceError(
                    HTTPStatus.SERVICE_UNAVAILABLE, "storage_error",
                    f"writing MARKERS.type of instant {instant} failed: {exc}") from exc
            state.initialized = True
        return len(state.names)

    async def seal(self, instant: str) -> int:
        """Refuse every later create of the instant (409), and return once no flush of it
        is running. Its writer seals it before it commits or rolls back, so that no
        straggling task can add a segment to a folder that is about to be deleted.
        Returns the number of markers held. An instant with no marker folder that is not
        inflight either is not held: creates for it are refused anyway."""
        state = await self.state(instant)
        if instant not in self.states:
            if not await self._inflight_now(instant):
                return len(state.names)
            state = self.states.setdefault(instant, state)
        if not state.sealed:
            state.sealed = True
            state.gone = (f"the markers of instant {instant} are sealed (its writer is "
                          "committing or rolling back); no marker can be added")
            self._fail(state, state.pending, ServiceError(
                HTTPStatus.CONFLICT, "instant_not_inflight",
                state.gone))
            state.pending = []
        while state.tasks:
            await asyncio.wait(list(state.tasks))
        return len(state.names)

    async def _check_deletable(self, instant: str, state: DirState | None) -> None:
        """DELETE removes only BATCHED markers, and only of an instant that is sealed or
        no longer inflight: the markers of an instant still being written are what its
        rollback needs, and a DIRECT folder belongs to a writer that is not this server's
        client."""
        try:
            mechanism = await self._run(self._io_pool, read_marker_type, self.storage, instant)
        except StorageError as exc:
            raise ServiceError(
                HTTPStatus.SERVICE_UNAVAILABLE, "storage_error", f"reading MARKERS.type of instant "
                f"{instant} failed: {exc}") from exc
        except MarkerStoreError as exc:  # MARKERS.type missing, corrupt or unexpected
            raise ServiceError(
                HTTPStatus.CONFLICT, "marker_type", f"the markers of instant {instant} are "
                f"not known to be BATCHED, so they are not deleted: {exc}") from exc
        if mechanism == DIRECT:
            raise ServiceError(
                HTTPStatus.CONFLICT, "marker_type", f"the markers of instant {instant} are "
                "DIRECT; the marker server deletes only BATCHED markers")
        if (state is None or not state.sealed) and await self._inflight_now(instant):
            raise ServiceError(
                HTTPStatus.CONFLICT, "instant_inflight", f"instant {instant} is inflight and "
                "its markers are not sealed; seal them (POST .../seal) before "
                "deleting them, right before its commit or rollback")

    async def delete_all(self, instant: str) -> bool:
        """Delete the instant's marker folder; creates still queued are refused (409), and
        a flush already writing finishes (and is answered) first. Refused (409) for DIRECT
        markers and for an instant that is inflight and not sealed."""
        if not is_instant(instant):
            raise ServiceError(HTTPStatus.BAD_REQUEST, "bad_instant",
                               f"{instant[:40]!r} is not an instant id (17 digits)")
        loading = self._loading.get(instant)
        if loading is not None:
            await asyncio.wait([loading])
        await self._check_deletable(instant, self.states.get(instant))
        state = self.states.get(instant)
        if state is not None:
            if not state.sealed:
                state.gone = f"the markers of instant {instant} were deleted"
            self._fail(state, state.pending, ServiceError(
                HTTPStatus.CONFLICT, "instant_not_inflight",
                state.gone or "deleted"))
            state.pending = []
            while state.tasks:
                await asyncio.wait(list(state.tasks))
        folder = marker_folder(self.storage, instant)
        try:
            count = await self._run(self._io_pool, self.storage.delete_dir, folder)
        except StorageError as exc:
            raise ServiceError(
                HTTPStatus.SERVICE_UNAVAILABLE, "storage_error", f"deleting the markers of instant "
                f"{instant} failed: {exc}") from exc
        if state is not None and state.sealed:
            # stays sealed (and empty): a straggler must not recreate the folder
            state.names.clear()
            state.file_ids.clear()
            state.segments.clear()
            state.garbage.clear()
            state.initialized = False
        elif self.states.get(instant) is state:
            self.states.pop(instant, None)
        return bool(count)
