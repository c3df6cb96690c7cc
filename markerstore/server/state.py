"""What the marker server holds for one marker folder, and how it picks segments to compact.

All fields are read and changed on the server's event loop thread only; worker threads
get copies of what they need and hand results back to the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore.markers.base import MarkerName
from markerstore.markers.segments import SegmentFile, marker_names


def file_id(file_name: str) -> str:
    """The file id of a data file name: the part before the first ``_`` (Hudi's rule)."""
    return file_name.split("_", 1)[0]


@dataclass(eq=False)
class Segment:
    """A segment on storage and its rows (kept for compaction, which then reads nothing)."""

    file: SegmentFile
    rows: pa.Table

    @property
    def num_rows(self) -> int:
        return int(self.rows.num_rows)


@dataclass(eq=False)
class Waiter:
    """The answers of one request: a marker each; its future is done once every marker
    that waited for a flush has its answer, or at the first failure."""

    future: asyncio.Future[list[bool]]
    results: list[bool]
    remaining: int = 0

    def answer(self, index: int, result: bool) -> None:
        self.results[index] = result
        self.remaining -= 1
        if self.remaining == 0 and not self.future.done():
            self.future.set_result(self.results)

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


@dataclass(eq=False)
class Pending:
    """A create waiting for the next flush of its marker folder."""

    marker: MarkerName
    row: dict[str, Any]
    request_id: str | None
    waiter: Waiter
    index: int  # of the marker in its request
    enqueued: float
    update: bool = False  # its row is written even if the marker is held (new details)

    @property
    def key(self) -> tuple[str, str]:
        """(partition, file id), what early conflict detection compares."""
        return (self.marker.partition, file_id(self.marker.file_name))


@dataclass
class DirState:
    """One instant's marker folder as the server knows it."""

    instant: str
    names: set[str] = field(default_factory=set)
    creators: dict[str, str] = field(default_factory=dict)
    file_ids: Counter[tuple[str, str]] = field(default_factory=Counter)
    pending_ids: Counter[tuple[str, str]] = field(default_factory=Counter)
    segments: list[Segment] = field(default_factory=list)
    garbage: list[SegmentFile] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    initialized: bool = False  # MARKERS.type is on storage
    inflight_checked: bool = False  # the timeline said the instant is inflight
    checked_at: float = 0.0  # when that was asked (time.monotonic)
    gone: str | None = None  # why creates are refused (instant no longer inflight)
    sealed: bool = False  # its writer sealed it: creates are refused until it is forgotten
    written_here: bool = False
    flushes: int = 0  # flushes in flight
    writing: dict[str, list[Pending]] = field(default_factory=dict)  # names being flushed
    # Creates answered by flushes whose clients have not sent a create since (see
    # writer.SegmentWriter._should_flush).
    outstanding: int = 0
    compacting: bool = False
    overlapping: bool = False  # some marker is in more than one held segment
    compact_retry_at: float = 0.0  # after a failed compaction, when to try again
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _seq: int = 0
    _seq_lock: threading.Lock = field(default_factory=threading.Lock)

    def next_seq(self) -> int:
        """A fresh segment sequence number (called from worker threads)."""
        with self._seq_lock:
            self._seq += 1
            return self._seq

    def add_segment(self, segment: Segment, names: Iterable[str] | None = None) -> None:
        self.segments.append(segment)
        self.add_names(segment.rows, names)

    def add_names(self, rows: pa.Table, names: Iterable[str] | None = None) -> None:
        names = list(names) if names is not None else marker_names(rows)
        files = rows.column("file").to_pylist()
        parts = rows.column("partition").to_pylist()
        for name, partition, file_name in zip(names, parts, files, strict=True):
            if name not in self.names:
                self.names.add(name)
                self.file_ids[(partition, file_id(file_name))] += 1

    @classmethod
    def from_segments(cls, instant: str, segments: list[Segment], max_seq: int,
                      initialized: bool) -> DirState:
        state = cls(instant, initialized=initialized)
        state._seq = max_seq
        for segment in segments:
            state.add_segment(segment)
        # Left by a crash mid-compaction or a flush whose answer was lost; the segments
        # this server writes itself never overlap, so only then does compaction dedupe.
        state.overlapping = sum(s.num_rows for s in segments) != len(state.names)
        return state

    @property
    def segment_count(self) -> int:
        """Segment files on storage now, or soon: held, undeleted, and those that flushes
        and a compaction in flight are writing."""
        return (len(self.segments) + len(self.garbage) + self.flushes
                + (1 if self.compacting else 0))

    @property
    def busy(self) -> bool:
        return self.flushes > 0 or self.compacting


def compaction_target(bound: int) -> int:
    """How many segments a folder is compacted down to, for a bound of `bound`: about half
    of it (at least 3), so a folder that gains a segment every few tens of milliseconds
    (clients that fill flushes back to back) does not reach the bound, and hold its
    creates, while a compaction writes."""
    return min(bound - 1, max(3, bound // 2 + 1))


def plan_compaction(sizes: list[int], target: int) -> list[int]:
    """Indexes of the segments to merge into one so that at most `target` remain.

    Size-tiered: take the smallest segments, and keep taking while the next one is not
    much larger than what is taken so far, so merged segments grow geometrically and each
    marker is rewritten only a few times (about the log of the number of flushes) while
    the count stays bounded. A small target allows fewer tiers, so it takes larger steps
    (`reach`): at 100,000 markers in flushes of 1-64 this rewrites a marker about 3 times
    for a target of 15 and about 20 times for a target of 3. Returns [] when nothing
    needs merging.
    """
    if len(sizes) <= target or len(sizes) < 2:
        return []
    reach = max(1.0, 16 / max(target, 1))
    order = sorted(range(len(sizes)), key=lambda i: (sizes[i], i))
    taken = max(2, len(sizes) - target + 1)
    total = sum(sizes[i] for i in order[:taken])
    while taken < len(order) and sizes[order[taken]] <= total * reach:
        total += sizes[order[taken]]
        taken += 1
    return sorted(order[:taken])
