"""Flushes and compactions of the marker server (a part of :class:`MarkerService`).

A flush writes the new markers of one batch as one segment and only then answers every
create waiting on them. Up to :data:`PIPELINE` flushes of one folder may be in flight, so
one slow storage write delays its own batch and not the next ones; a marker being written
by one flush is never written again by another: a create for it waits for that flush.
"""

from __future__ import annotations

import asyncio
import io
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from markerstore.errors import StorageError
from markerstore.markers.base import BATCHED, MARKER_COLUMNS, ensure_marker_type, marker_folder
from markerstore.markers.segments import (
    SegmentFile,
    dedupe,
    delete_segments,
    encode,
    rows_to_table,
    segment_name,
)
from markerstore.metrics import Histogram, Registry
from markerstore.server.memory import trim
from markerstore.server.state import (
    DirState,
    Pending,
    Segment,
    plan_compaction,
    request_value,
)
from markerstore.storage import Storage

log = logging.getLogger(__name__)
T = TypeVar("T")

PIPELINE = 4  # flushes of one marker folder in flight at once
FULL_BATCH = 512  # pending creates that start a flush beside one in flight
ROW_GROUP = 131_072  # rows per row group of a merged segment
Members = dict[str, list[Pending]]  # marker name -> the creates waiting on its write


class ServiceError(Exception):
    """A request the service refuses or cannot serve; `status` is the HTTP status."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = int(status)
        self.code = code
        self.message = message


def unencodable(rows: list[dict[str, Any]], fmt: str) -> dict[int, str]:
    """The rows that cannot be encoded as a segment on their own, by index, with why."""
    bad = {}
    for index, row in enumerate(rows):
        try:
            encode(rows_to_table([row]), fmt)
        except Exception as exc:
            lines = str(exc).splitlines() or [""]
            bad[index] = f"{type(exc).__name__}: {lines[0][:200]}"
    return bad


def concat_parquet(segments: list[Segment]) -> tuple[bytes, int]:
    """One Parquet file of the rows of `segments`, in order, written piece by piece: at
    most about :data:`ROW_GROUP` rows are decoded at a time, whatever the segments hold,
    and each row group holds about that many (segments of small flushes would otherwise
    make a file of thousands of tiny row groups, slow to read back)."""
    buffer = io.BytesIO()
    count = 0
    pending: list[pa.Table] = []
    held = 0
    with pq.ParquetWriter(buffer, MARKER_COLUMNS, compression="zstd") as writer:
        for segment in segments:
            for rows in segment.batches():
                pending.append(rows)
                held += rows.num_rows
                if held >= ROW_GROUP:
                    writer.write_table(pa.concat_tables(pending), row_group_size=held)
                    count, pending, held = count + held, [], 0
        if pending:
            writer.write_table(pa.concat_tables(pending), row_group_size=held)
            count += held
    return buffer.getvalue(), count


class SegmentWriter:
    """The flush and compaction half of the service; see MarkerService for the fields."""

    storage: Storage
    registry: Registry
    fmt: str
    conflict_detection: bool
    interval: float
    max_segments: int
    compact_target: int
    _waiting: int
    _flush_pool: ThreadPoolExecutor
    _io_pool: ThreadPoolExecutor
    _flush_seconds: Histogram
    _batch_size: Histogram

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    def _count(self, name: str, help_text: str, amount: float = 1, **labels: str) -> None:
        if amount:
            self.registry.counter(name, labels, help_text).inc(amount)

    def _creates(self, result: str, amount: int = 1) -> None:
        self._count("markerstore_marker_creates_total", "Marker creates answered, by result.",
                    amount, result=result)

    def _spawn(self, state: DirState, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        state.tasks.add(task)
        task.add_done_callback(state.tasks.discard)

    # --- answering -----------------------------------------------------------------------------
    def _settle(self, state: DirState, pending: Pending, result: bool = False,
                error: BaseException | None = None) -> None:
        """Answer one create (exactly once)."""
        self._waiting -= 1
        if self.conflict_detection:
            key = pending.key
            state.pending_ids[key] -= 1
            if state.pending_ids[key] <= 0:
                del state.pending_ids[key]
        if error is not None:
            pending.waiter.fail(error)
        else:
            pending.waiter.answer(pending.index, result)

    def _fail(self, state: DirState, batch: list[Pending], error: ServiceError) -> None:
        for pending in batch:
            self._settle(state, pending, error=error)
        self._creates("failed", len(batch))

    def _held(self, state: DirState, pending: Pending) -> bool:
        """The answer to a create of a marker that is durable: created only if this very
        request (an earlier try of it) created it."""
        return pending.request_id is not None and \
            state.names.value(pending.name_key) == request_value(pending.request_id)

    # --- flushing ------------------------------------------------------------------------------
    def _blocked(self, state: DirState) -> bool:
        """Whether one more segment would pass the bound. A compaction brings the count
        down; while a failed one waits to be retried, flushes go on past the bound rather
        than leave creates unanswered."""
        if state.segment_count < self.max_segments:
            return False
        return state.compacting or time.monotonic() >= state.compact_retry_at

    def _should_flush(self, state: DirState) -> bool:
        """When a folder's pending creates go to storage.

        With no flush in flight: once the oldest has waited a whole interval (the bound on
        waiting), or as soon as every create answered by the last flushes has been
        followed by a new one: those clients are all back, and waiting longer could only
        make them later. So 64 clients that each wait for their answer before the next
        create fill one segment per round trip instead of splitting across ticks, while
        creates that come in at random (tasks that then write a file for minutes) still
        gather for an interval. :data:`FULL_BATCH` pending creates start a flush at once.
        With a flush in flight, another starts beside it (up to :data:`PIPELINE`) for
        creates that are overdue or when :data:`FULL_BATCH` are pending: one slow write
        then delays only its own batch, and clients that send many markers per request
        are not held to one storage write per round trip.
        """
        if not state.pending or self._blocked(state):
            return False
        now = time.perf_counter()
        waited = now - state.pending[0].enqueued
        if state.flushes == 0:
            return (waited >= self.interval or state.outstanding == 0
                    or len(state.pending) >= FULL_BATCH)
        if state.flushes >= PIPELINE or not state.initialized:
            return False
        return waited >= self.interval or len(state.pending) >= FULL_BATCH

    def _maybe_flush(self, state: DirState) -> None:
        if self._should_flush(state):
            self._start_flush(state)

    def _start_flush(self, state: DirState) -> None:
        batch, state.pending = state.pending, []
        state.outstanding = 0  # who is not back by now is not waited for
        if state.gone:
            self._fail(state, batch,
                       ServiceError(HTTPStatus.CONFLICT, "instant_not_inflight", state.gone))
            return
        members: Members = {}
        durable = []
        updates: list[Pending] = []  # rows with new details, written whatever is held
        for pending in batch:
            name = pending.marker.name
            if pending.update and (pending.name_key in state.names or name in state.writing
                                   or name in members):
                updates.append(pending)
            elif pending.name_key in state.names:
                durable.append(pending)
            elif name in state.writing:  # another flush in flight writes it: wait for it
                state.writing[name].append(pending)
            elif name in members:
                members[name].append(pending)
            else:
                members[name] = [pending]
        for pending in durable:
            created = self._held(state, pending)
            self._creates("created" if created else "existed")
            self._settle(state, pending, created)
        if not members and not updates:
            return
        state.writing.update(members)
        state.flushes += 1
        started = time.perf_counter()
        self._spawn(state, self._flush(state, members, started, updates))

    async def _flush(self, state: DirState, members: Members, started: float,
                     updates: list[Pending]) -> None:
        entries = [*members.values(), *([p] for p in updates)]  # one row each
        rows = [waiting[0].row for waiting in entries]
        try:
            segment, rejected = await self._run(self._flush_pool, self._flush_sync,
                                                state.instant, state.initialized, rows,
                                                state.next_seq)
        except Exception as exc:
            state.flushes -= 1
            for name in members:
                state.writing.pop(name, None)
            self._count("markerstore_marker_batches_total", "Batches flushed, by result.",
                        result="failed")
            log.warning("marker server: flush of %d marker(s) of instant %s failed: %s",
                        len(members), state.instant, exc)
            error = ServiceError(
                HTTPStatus.SERVICE_UNAVAILABLE, "flush_failed",
                f"writing the segment of {len(members)} marker(s) of instant {state.instant} "
                f"failed, so none of them is acknowledged: {type(exc).__name__}: {exc}")
            self._fail(state, [p for waiting in members.values() for p in waiting] + updates,
                       error)
            return
        state.flushes -= 1
        if rejected:
            self._reject(state, members, updates, entries, rejected)
        if segment is not None:
            self._written(state, segment, members, updates, started)
        self._maybe_flush(state)

    def _reject(self, state: DirState, members: Members, updates: list[Pending],
                entries: list[list[Pending]], rejected: dict[int, str]) -> None:
        """The second net behind the checks at the door: rows that could not be encoded
        fail their own requests (400), and nobody else's. Another request waiting for the
        same marker is queued again, for the next flush to write its own row."""
        creates = len(members)  # entries: the members' first, then the updates
        for index, reason in rejected.items():
            first, *others = entries[index]
            name = first.marker.name
            if index < creates:
                members.pop(name, None)
                state.writing.pop(name, None)
            else:
                updates.remove(first)
            log.warning("marker server: refused marker %r of instant %s at the flush: %s",
                        name, state.instant, reason)
            self._fail(state, [first], ServiceError(
                HTTPStatus.BAD_REQUEST, "invalid_marker",
                f"marker {name!r} cannot be written: {reason}"))
            state.pending[:0] = others

    def _written(self, state: DirState, segment: Segment, members: Members,
                 updates: list[Pending], started: float) -> None:
        """Hold and answer what a flush wrote."""
        state.initialized = state.written_here = True
        firsts = [waiting[0] for waiting in members.values()]
        state.add_segment(segment, [p.name_key for p in updates],
                          [p.id_key for p in firsts] if state.track_ids else ())
        values = {r: request_value(r) for r in {p.request_id for p in firsts}}
        state.names.add_many([p.name_key for p in firsts],  # with the request of each
                             [values[p.request_id] for p in firsts])
        if segment.num_rows > len(members):
            state.overlapping = True  # a marker now has more than one row
        for name in members:
            state.writing.pop(name, None)
        self._flush_seconds.observe(time.perf_counter() - started)
        self._batch_size.observe(len(members))
        self._count("markerstore_marker_batches_total", "Batches flushed, by result.",
                    result="ok")
        created = existed = 0
        for waiting in members.values():
            for i, pending in enumerate(waiting):
                answer = i == 0 or self._held(state, pending)
                created += answer
                existed += not answer
                self._settle(state, pending, answer)
        for pending in updates:
            answer = self._held(state, pending)
            existed += not answer
            created += answer
            self._settle(state, pending, answer)
        self._creates("created", created)
        self._creates("existed", existed)
        state.outstanding += created + existed

    def _flush_sync(self, instant: str, initialized: bool, rows: list[dict[str, Any]],
                    next_seq: Callable[[], int]) -> tuple[Segment | None, dict[int, str]]:
        """Write `rows` as one segment. Should a row fail to encode despite the checks at
        the door, the rows that do not encode on their own are left out (returned by
        index with the reason) and the others are written."""
        if not initialized:
            ensure_marker_type(self.storage, instant, BATCHED)
        try:
            return self._write(instant, rows_to_table(rows), next_seq), {}
        except OSError:
            raise  # storage (StorageError is an OSError): the whole batch failed
        except Exception:
            rejected = unencodable(rows, self.fmt)
            if not rejected:
                raise
        kept = [row for i, row in enumerate(rows) if i not in rejected]
        if not kept:
            return None, rejected
        return self._write(instant, rows_to_table(kept), next_seq), rejected

    def _write(self, instant: str, table: pa.Table, next_seq: Callable[[], int]) -> Segment:
        """Write `table` as a new segment (as segments.write_segment does) and keep its
        bytes, not its rows."""
        return self._create(instant, encode(table, self.fmt), table.num_rows, next_seq)

    def _create(self, instant: str, data: bytes, num_rows: int,
                next_seq: Callable[[], int], attempts: int = 100) -> Segment:
        """Create a segment file of these bytes under a free sequence number (a name
        taken by another server that wrote this folder takes the next number, so no
        segment is ever replaced); returns it once it is durable."""
        folder = marker_folder(self.storage, instant)
        for _ in range(attempts):
            seq = next_seq()
            path = f"{folder}/{segment_name(seq, self.fmt)}"
            if self.storage.create_if_absent(path, data):
                return Segment(SegmentFile(seq, self.fmt, path), data, num_rows)
        raise StorageError(f"could not find a free segment name under "
                           f"{self.storage.url(folder)} after {attempts} tries")

    # --- compaction ----------------------------------------------------------------------------
    def _maybe_compact(self, state: DirState) -> None:
        if state.compacting or not state.initialized \
                or time.monotonic() < state.compact_retry_at:
            return
        if len(state.segments) <= self.compact_target and not state.garbage:
            return
        chosen_idx = plan_compaction([s.num_rows for s in state.segments], self.compact_target)
        if not chosen_idx and not state.garbage:
            return
        chosen = [state.segments[i] for i in chosen_idx]
        state.compacting = True
        self._spawn(state, self._compact(state, chosen, list(state.garbage)))

    async def _compact(self, state: DirState, chosen: list[Segment], garbage: list[Any]
                       ) -> None:
        try:
            merged, undeleted = await self._run(self._io_pool, self._compact_sync,
                                                state.instant, chosen, garbage, state.next_seq,
                                                state.overlapping)
        except Exception as exc:
            state.compacting = False
            state.compact_retry_at = time.monotonic() + 1.0
            self._count("markerstore_marker_compactions_total", "Compactions, by result.",
                        result="failed")
            log.warning("marker server: compaction of instant %s failed (nothing lost): %s",
                        state.instant, exc)
            return
        ids = {id(s) for s in chosen}
        state.segments = [s for s in state.segments if id(s) not in ids]
        if merged is not None:
            state.segments.append(merged)
        state.garbage = [g for g in state.garbage if g not in garbage] + undeleted
        state.compacting = False
        self._count("markerstore_marker_compactions_total", "Compactions, by result.",
                    result="ok")
        self._maybe_flush(state)  # creates may have waited for the bound

    def _compact_sync(self, instant: str, chosen: list[Segment], garbage: list[Any],
                      next_seq: Callable[[], int], overlapping: bool
                      ) -> tuple[Segment | None, list[Any]]:
        merged = None
        if len(chosen) >= 2:
            if overlapping or self.fmt != "parquet":
                rows = pa.concat_tables([s.rows for s in chosen])
                if overlapping:
                    rows = dedupe(rows)
                merged = self._write(instant, rows, next_seq)
            else:
                data, count = concat_parquet(chosen)
                merged = self._create(instant, data, count, next_seq)
        trim()  # the pieces decoded for the merge
        # The merged segment is durable: only now may the ones it replaces go.
        obsolete = [s.file for s in chosen] if merged is not None else []
        obsolete += garbage
        try:
            delete_segments(self.storage, obsolete)
        except Exception as exc:
            log.warning("marker server: could not delete %d merged segment(s) of %s (will "
                        "retry): %s", len(obsolete), instant, exc)
            return merged, obsolete
        return merged, []
