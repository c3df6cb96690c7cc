"""What the marker server holds for one marker folder, and how it picks segments to compact.

All fields are read and changed on the server's event loop thread only; worker threads
get copies of what they need and hand results back to the loop.

A folder is held in compact, columnar form: its markers as 16-byte keys in sorted numpy
arrays (keys.py), the request that created each as a 64-bit value beside its key, and
each segment as the bytes of its file (compressed Parquet: about 10-20 bytes a marker),
decoded when compaction or a GET needs its rows. Nothing is kept per marker as a Python
object beyond the keys added since the last merge of a key set.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from markerstore.errors import StorageError
from markerstore.markers.base import MARKER_COLUMNS, MarkerName
from markerstore.markers.segments import SegmentFile, decode
from markerstore.server.keys import KeySet, key_of, keys_of, row_keys

BATCH_ROWS = 16_384  # rows decoded at a time when a segment is read in pieces
LOAD_ROWS = 131_072  # ... when it is loaded (fewer, larger hashing passes)


def file_id(file_name: str) -> str:
    """The file id of a data file name: the part before the first ``_`` (Hudi's rule)."""
    return file_name.split("_", 1)[0]


def file_id_key(partition: str, file_id_: str) -> bytes:
    """The key of a (partition, file id) pair (early conflict detection); a partition
    never holds a NUL (validate_partition), so the pair is unambiguous."""
    return key_of(f"{partition}\x00{file_id_}")


def file_ids_of(rows: pa.Table) -> pa.Array:
    """The (partition, file id) string of every row, as file_id_key hashes it."""
    ids = pc.binary_join_element_wise(
        rows.column("partition"), pc.replace_substring_regex(rows.column("file"), "_.*$", ""),
        "\x00")
    return ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids


def request_value(request_id: str | None) -> int:
    """The 64-bit value a request id is held as beside the keys it created (0: none)."""
    if request_id is None:
        return 0
    digest = hashlib.md5(request_id.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big") or 1


@dataclass(eq=False)
class Segment:
    """A segment on storage and the bytes of its file (kept for compaction and GET, which
    then read nothing from storage; compressed, they are a fraction of the rows)."""

    file: SegmentFile
    data: bytes
    num_rows: int

    @classmethod
    def of(cls, file: SegmentFile, data: bytes, rows: int) -> Segment:
        return cls(file, data, rows)

    @property
    def rows(self) -> pa.Table:
        """All its rows (MARKER_COLUMNS), decoded now."""
        return decode(self.data, self.file.fmt)

    def batches(self, columns: list[str] | None = None, size: int | None = None
                ) -> Iterator[pa.Table]:
        """Its rows in pieces of at most `size` (:data:`BATCH_ROWS`) rows (Parquet:
        decoded a piece at a time, so a large segment never needs all its rows at once)."""
        size = size or BATCH_ROWS
        if self.file.fmt != "parquet":
            table = self.rows
            if columns is not None:
                table = table.select(columns)
            for batch in table.to_batches(size):
                yield pa.Table.from_batches([batch])
            return
        schema = MARKER_COLUMNS if columns is None else pa.schema(
            [MARKER_COLUMNS.field(c) for c in columns])
        reader = pq.ParquetFile(pa.BufferReader(self.data))
        for batch in reader.iter_batches(size, columns=columns):
            yield pa.Table.from_batches([batch]).cast(schema)


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
    name_key: bytes = b""  # key_of(marker.name), set by the service

    @property
    def key(self) -> tuple[str, str]:
        """(partition, file id), what early conflict detection compares."""
        return (self.marker.partition, file_id(self.marker.file_name))

    @property
    def id_key(self) -> bytes:
        return file_id_key(*self.key)


@dataclass
class DirState:
    """One instant's marker folder as the server knows it."""

    instant: str
    names: KeySet = field(default_factory=KeySet)  # value: request_value of the creator
    track_ids: bool = False  # keep file_ids (early conflict detection is on)
    file_ids: KeySet = field(default_factory=KeySet)  # file_id_key of every marker
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

    def add_segment(self, segment: Segment, keys: Iterable[bytes],
                    file_ids: Iterable[bytes] = ()) -> None:
        """Hold a segment a flush wrote, with the keys of its markers."""
        self.segments.append(segment)
        keys = list(keys)
        self.names.add_many(keys, [0] * len(keys))
        if self.track_ids:
            ids = list(file_ids)
            self.file_ids.add_many(ids, [0] * len(ids))

    @staticmethod
    def read_keys(segment: Segment, track_ids: bool) -> tuple[list[np.ndarray],
                                                             list[np.ndarray]]:
        """The keys (and file id keys) of a segment read from storage, a piece of rows at
        a time; sets its row count. Every column is decoded: a segment that does not
        decode fails its load, as segments.read_segment fails, naming the file."""
        count = 0
        keys, ids = [], []

        def hash_rows(pieces: list[pa.Table]) -> None:
            rows = pa.concat_tables(pieces)
            keys.append(row_keys(rows))
            if track_ids:
                ids.append(keys_of(file_ids_of(rows)))

        try:
            pieces: list[pa.Table] = []
            held = 0
            for rows in segment.batches(size=LOAD_ROWS):
                count += rows.num_rows
                pieces.append(rows)  # small row groups come as small pieces: gather them
                held += rows.num_rows
                if held >= LOAD_ROWS:
                    hash_rows(pieces)
                    pieces, held = [], 0
            if pieces:
                hash_rows(pieces)
        except Exception as exc:
            raise StorageError(f"segment {segment.file.path} is unreadable: "
                               f"{type(exc).__name__}: {exc}") from exc
        segment.num_rows = count
        return keys, ids

    @classmethod
    def from_segments(cls, instant: str, segments: list[Segment], max_seq: int,
                      initialized: bool, track_ids: bool = False) -> DirState:
        """The state of a folder read from storage: its keys hashed vectorized and added
        in one sorted merge."""
        state = cls(instant, initialized=initialized, track_ids=track_ids)
        state._seq = max_seq
        keys: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        for segment in segments:
            state.segments.append(segment)
            more, more_ids = cls.read_keys(segment, track_ids)
            keys += more
            ids += more_ids
        if keys:
            state.names.add_arrays(np.concatenate(keys))
        if ids:
            state.file_ids.add_arrays(np.concatenate(ids))
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
