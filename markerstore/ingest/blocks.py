"""A source task read as blocks of records, as Arrow string arrays.

A JSON-lines record is one line. A CSV record ends at a newline outside a quoted field,
so it may span lines (:mod:`~markerstore.ingest.csvsplit` finds the ends vectorized). A
block holds only whole records: what follows the last record end waits for the next read,
so a record is never cut, whatever the block size. Each record keeps its text without the
line end (a CSV record keeps the line breaks inside its quoted fields as written), the
number of its first line and its byte offset in the file; a UTF-8 byte order mark at the
start of the file is not part of the first record.

Records that are not text the parsers can take are set apart as :class:`RawRecord`: bytes
that are not UTF-8 (their exact bytes kept, unless ``encoding.errors=replace`` asks for
U+FFFD instead), and a record larger than ``markerstore.ingest.record.max_bytes``, of
which only the first :data:`PREFIX_BYTES` (at most the limit) are kept. A record whose
end is not in a block's worth of bytes is read on by itself (``_Reader._long``): the quote
scanner finds its end a block at a time, its lines are counted as they pass (no position
is held for them), and its bytes are kept while within the limit, dropped past it; so
memory stays bounded by the limit plus a block, whatever the record holds.

Byte ranges of a JSON-lines or CSV file: a range starts after the first newline at or
after its start (unless it is 0) and ends with the record that crosses its end, so every
record is read by exactly one range; in CSV, when that newline lies inside a quoted field
(:mod:`~markerstore.ingest.csvranges` tells, exactly), at the end of the record that holds
it. A range reads up to its end and a little past it, then the rest of its last record in
reads that double: a range smaller than a block reads what it needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.ingest.charsets import SINGLE_BYTE, UTF16, Utf16Stream, codec, transcode_spans
from markerstore.ingest.csvranges import (
    FIRST_READ,
    first_end,
    first_line_start,
    range_start,
    reads,
)
from markerstore.ingest.csvsplit import (
    comment_records,
    count_line_ends,
    line_ends_of,
    newlines_of,
    record_ends,
    without_line_ends,
)
from markerstore.ingest.jsondoc import record_spans
from markerstore.ingest.skip import Skipped
from markerstore.ingest.sources import SourceTask
from markerstore.values.csv import Dialect, QuoteScanner

BLOCK_BYTES = 16 * 1024 * 1024
# At most this many records in a block, whatever their size: what a task holds per record
# (offsets, line numbers, the parsed values, an error record) is bounded by it, so a block
# of one-byte records costs no more than one of ordinary records (docs/RELIABILITY.md).
BLOCK_RECORDS = 65_536
PREFIX_BYTES = 64 * 1024  # what an error record keeps of a record too large (at most)
MAX_RECORD_BYTES = 64 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
ENCODING, SIZE = "encoding", "size"  # why a record is raw (the error record's reason)


@dataclass(frozen=True)
class ReadOptions:
    """How records are read: the size limit of one record, what bytes that are not UTF-8
    become ("strict": an error record; "replace": text with U+FFFD), the separator of CSV
    fields (a quote opens a quoted field only at a field's start) and what escapes a quote
    in a quoted field (:mod:`markerstore.values.csv`); with
    `json_document`, a JSON file is one document whose records are the elements of its
    top-level array (:mod:`~markerstore.ingest.jsondoc`)."""

    max_record_bytes: int = MAX_RECORD_BYTES
    encoding_errors: str = "strict"
    delimiter: str = ","
    escape: str = '"'  # what escapes a quote in a quoted CSV field ("" by default)
    json_document: bool = False  # Spark's multiLine: a JSON file is one document
    encoding: str = "utf-8"  # the files' character encoding (markerstore.ingest.charsets)
    # the rest of the CSV dialect (markerstore.values.csv.Dialect: Spark's options of its names)
    quote: str = '"'
    comment: str = ""
    line_sep: str | None = None
    ignore_leading: bool = False
    ignore_trailing: bool = False

    @property
    def dialect(self) -> Dialect:
        """How CSV text is written, for the scanners and parsers."""
        return Dialect(self.delimiter, self.quote, self.escape, self.comment, self.line_sep,
                       self.ignore_leading, self.ignore_trailing,
                       codec(self.encoding) if self.encoding in SINGLE_BYTE else "utf-8")

    @property
    def prefix_bytes(self) -> int:
        """What the error record of a record too large keeps of it."""
        return min(PREFIX_BYTES, self.max_record_bytes)


@dataclass(frozen=True)
class RawRecord:
    """A record set apart: its first line, byte offset, true size in bytes, its bytes (the
    first PREFIX_BYTES of a record too large) and why (ENCODING or SIZE)."""

    line: int
    offset: int
    size: int
    data: bytes
    reason: str


@dataclass(frozen=True)
class Block:
    """Records of a task: `records[i]` is the text of a record whose first line is line
    `lines[i]` of the task (1-based, counted from the task's start) and which starts at
    byte `offsets[i]` of the file; `raw` holds the records set apart; `line_count` is how
    many physical lines the block's bytes hold (a last one without its newline too)."""

    records: pa.Array
    lines: np.ndarray
    offsets: np.ndarray
    raw: tuple[RawRecord, ...] = field(default=())
    line_count: int = 0

    def __len__(self) -> int:
        return len(self.records)

    @classmethod
    def without_records(cls, raw: tuple[RawRecord, ...] = (), line_count: int = 0) -> Block:
        """A block of no text record: only `raw` ones (or none), over `line_count` lines."""
        return cls(pa.array([], pa.large_string()), np.zeros(0, np.int64),
                   np.zeros(0, np.int64), raw, line_count)

    def take(self, indices: np.ndarray) -> Block:
        """The block with only the records at `indices` (the raw ones kept)."""
        return Block(self.records.take(pa.array(indices)), self.lines[indices],
                     self.offsets[indices], self.raw, self.line_count)


def split_records(data: bytes, fmt: str = "json", first_line: int = 1, offset: int = 0,
                  options: ReadOptions = ReadOptions(), final: bool = True) -> Block:
    """The records of `data` (whole records; with `final`, the last may lack its newline)
    as a block: `data` starts at byte `offset` of the file, on line `first_line`."""
    newlines = _line_ends(data, fmt, final, options)
    ends = _ends(data, fmt, final, newlines, options)
    return _cut(data, ends, newlines, fmt, first_line, offset, options)


def _line_ends(data: bytes, fmt: str, final: bool, options: ReadOptions) -> np.ndarray:
    """The positions of the line ends of `data` (a CSV dialect's, or the newlines)."""
    return line_ends_of(data, options.line_sep, final) if fmt == "csv" else newlines_of(data)


def _ends(data: bytes, fmt: str, final: bool, newlines: np.ndarray, options: ReadOptions
          ) -> np.ndarray:
    """Where the records of `data` end (just after their newline; and the end of `data`
    for a last record without one, when `final`)."""
    if fmt == "csv":
        return record_ends(data, final, newlines=newlines, dialect=options.dialect)
    ends = newlines + 1
    if final and len(data) and not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    return ends.astype(np.int64, copy=False)


def _cuts(data: bytes, ends: np.ndarray, newlines: np.ndarray, fmt: str, first_line: int,
          offset: int, options: ReadOptions) -> Iterator[Block]:
    """The blocks of the records ending at `ends` in `data`, :data:`BLOCK_RECORDS` at a
    time (each built only when the one before was used)."""
    start = 0
    for i in range(0, len(ends), BLOCK_RECORDS):
        part = ends[i:i + BLOCK_RECORDS]
        stop = int(part[-1])
        lo, hi = np.searchsorted(newlines, [start, stop])
        yield _cut(data[start:stop] if i or stop < len(data) else data, part - start,
                   newlines[lo:hi] - start, fmt, first_line + int(lo), offset + start,
                   options)
        start = stop


def _cut(data: bytes, ends: np.ndarray, newlines: np.ndarray, fmt: str, first_line: int,
         offset: int, options: ReadOptions) -> Block:
    """The block of the records ending at `ends` in `data` (`newlines`: its newlines)."""
    k = len(ends)
    if k == 0:
        return Block.without_records()
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    if offset == 0 and data.startswith(BOM):
        starts[0] = min(len(BOM), int(ends[0]))
    raw = np.frombuffer(data, dtype=np.uint8)
    csv = fmt == "csv"
    stops = without_line_ends(raw, starts, ends, options.line_sep if csv else "\n")
    within = int(np.searchsorted(newlines, ends[-1]))  # the newlines of these records
    if within == int((stops < ends).sum()):  # each record is one line
        lines = first_line + np.arange(k, dtype=np.int64)
    else:  # a record spans as many lines as the newlines before its end
        before = np.searchsorted(newlines[:within], ends)
        lines = first_line + np.concatenate([[0], before[:-1]]).astype(np.int64)
    ended = within > 0 and int(newlines[within - 1]) == len(data) - 1
    line_count = within + (0 if ended else 1)  # physical lines
    if csv and options.comment:  # a comment line is no record
        keep = np.flatnonzero(~comment_records(raw, starts, stops, options.comment))
        if len(keep) == 0:
            return Block.without_records(line_count=line_count)
        starts, stops, lines = starts[keep], stops[keep], lines[keep]
    return _spans_block(data, starts, stops, lines, offset + starts, options, line_count)


def _spans_block(data: bytes, starts: np.ndarray, stops: np.ndarray, lines: np.ndarray,
                 offsets: np.ndarray, options: ReadOptions, line_count: int) -> Block:
    """The block of the records at ``data[starts[i]:stops[i]]`` (at least one)."""
    k = len(starts)
    source = None  # a single-byte encoding's records: their bytes, kept for error records
    if options.encoding in SINGLE_BYTE:
        source = (data, starts, stops)
        data, starts, stops = transcode_spans(data, starts, stops, options.encoding)
    pairs = np.empty(2 * k, dtype=np.int64)
    pairs[0::2], pairs[1::2] = starts, stops
    spans = pa.Array.from_buffers(pa.large_binary(), 2 * k - 1,
                                  [None, pa.py_buffer(pairs), pa.py_buffer(data)])
    texts = spans.take(pa.array(np.arange(0, 2 * k - 1, 2, dtype=np.int64)))
    if source is not None:
        data, starts, stops = source
    return _set_apart(data, texts, starts, stops, lines, offsets, options, line_count,
                      source is not None)


def _set_apart(data: bytes, texts: pa.Array, starts: np.ndarray, stops: np.ndarray,
               lines: np.ndarray, offsets: np.ndarray, options: ReadOptions,
               line_count: int, transcoded: bool = False) -> Block:
    """The block of these records, those too large or not UTF-8 set apart (`transcoded`:
    `texts` are the UTF-8 of the records at `data[starts[i]:stops[i]]`)."""
    set_apart: list[RawRecord] = []
    big = np.flatnonzero(stops - starts > options.max_record_bytes)
    prefix = options.prefix_bytes
    for i in big:
        set_apart.append(RawRecord(int(lines[i]), int(offsets[i]), int(stops[i] - starts[i]),
                                   data[starts[i]:starts[i] + prefix], SIZE))
    records, bad = _decode(texts, options.encoding_errors)
    bad = np.setdiff1d(bad, big)
    for i in bad:
        set_apart.append(RawRecord(int(lines[i]), int(offsets[i]), int(stops[i] - starts[i]),
                                   data[starts[i]:stops[i]] if transcoded else
                                   texts[i].as_py(), ENCODING))
    if set_apart:
        keep = np.setdiff1d(np.arange(len(texts)), np.union1d(big, bad))
        records, lines, offsets = records.take(pa.array(keep)), lines[keep], offsets[keep]
    set_apart.sort(key=lambda r: r.offset)
    return Block(records, lines, offsets, tuple(set_apart), line_count)


def _decode(texts: pa.Array, errors: str) -> tuple[pa.Array, np.ndarray]:
    """The records as strings, and the indices of those that are not UTF-8 (found by
    halving the slices that fail to cast: O(k log n) casts for k of them). With
    errors="replace" those are decoded with U+FFFD and none is set apart."""
    try:
        return texts.cast(pa.large_string()), np.zeros(0, np.int64)
    except pa.ArrowInvalid:
        pass
    bad: list[int] = []
    stack = [(0, len(texts))]
    while stack:
        start, length = stack.pop()
        try:
            texts.slice(start, length).cast(pa.large_string())
        except pa.ArrowInvalid:
            if length == 1:
                bad.append(start)
                continue
            half = length // 2
            stack += [(start + half, length - half), (start, half)]
    found = np.array(sorted(bad), dtype=np.int64)
    if errors == "replace":
        values = texts.to_pylist()
        for i in found:
            values[i] = values[i].decode("utf-8", "replace")
        decoded = [v if isinstance(v, str) else v.decode("utf-8") for v in values]
        return pa.array(decoded, pa.large_string()), np.zeros(0, np.int64)
    blank = pa.array([b""] * len(found), pa.large_binary())
    mask = np.zeros(len(texts), dtype=bool)
    mask[found] = True
    cleared = pc.replace_with_mask(texts, pa.array(mask), blank)
    return cleared.cast(pa.large_string()), found


def open_task(task: SourceTask, storage_options: dict[str, Any] | None) -> Any:
    compression = "infer" if task.whole_file else None
    return fsspec.open(task.url, "rb", compression=compression, **(storage_options or {}))


def _skip_partial_line(handle: Any, start: int, block_bytes: int) -> int:
    """Seek to the first line that starts at or after `start`; its offset. The line that
    began in the previous range is read through (64 KiB first, a block at a time at most),
    never held whole."""
    handle.seek(start - 1)
    if handle.read(1) == b"\n":
        return start
    offset = start
    for chunk in reads(handle, block_bytes):
        at = chunk.find(b"\n")
        if at >= 0:
            offset += at + 1
            break
        offset += len(chunk)
    handle.seek(offset)
    return offset


def read_blocks(task: SourceTask, storage_options: dict[str, Any] | None = None,
                block_bytes: int = BLOCK_BYTES, options: ReadOptions = ReadOptions()
                ) -> Iterator[Block]:
    """The task's records, block by block (each block about `block_bytes` of input); a
    file read with ``skip`` from its `base` on, as if it began there."""
    with open_task(task, storage_options) as raw:
        handle = Utf16Stream(raw, options.encoding) if options.encoding in UTF16 else raw
        if task.base:
            handle = Skipped(handle, task.base)
        if options.encoding in UTF16:  # records are found in its UTF-8 transcoding
            yield from _utf16_blocks(handle, task, block_bytes, options)
        elif options.json_document and task.format == "json":
            yield from _document(handle, block_bytes, options)
        else:
            yield from _Reader(handle, task, block_bytes, options).blocks()


def _utf16_blocks(stream: Any, task: SourceTask, block_bytes: int,
                  options: ReadOptions) -> Iterator[Block]:
    """The blocks of a UTF-16 file (read whole), its records found in its UTF-8; a record
    that is no UTF-16 (a lone surrogate) keeps its bytes in the file's encoding."""
    if task.start:
        raise ValueError(f"{task.url}: a UTF-16 file is read whole, not from byte {task.start}")
    blocks = (_document(stream, block_bytes, options)
              if options.json_document and task.format == "json" else
              _Reader(stream, task, block_bytes, options).blocks())
    for block in blocks:
        if any(r.reason == ENCODING for r in block.raw):
            block = replace(block, raw=tuple(
                replace(r, data=stream.original(r.data)) if r.reason == ENCODING else r
                for r in block.raw))
        yield block


def _document(handle: Any, block_bytes: int, options: ReadOptions) -> Iterator[Block]:
    """A JSON file as one document: the blocks of its records (the elements of its
    top-level array, or the whole document), :data:`BLOCK_RECORDS` at a time; a document
    over the size limit is one raw record of its true size, read through a block at a
    time."""
    data = handle.read(options.max_record_bytes + 1)
    if len(data) > options.max_record_bytes:
        size, lines, tail = len(data), data.count(b"\n"), data[-1:]
        while chunk := handle.read(block_bytes):
            size, lines, tail = size + len(chunk), lines + chunk.count(b"\n"), chunk[-1:]
        record = RawRecord(1, 0, size, data[:options.prefix_bytes], SIZE)
        yield Block.without_records((record,), lines + (tail != b"\n"))
        return
    starts, stops = record_spans(data, len(BOM) if data.startswith(BOM) else 0)
    line_count = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if len(starts) == 0:
        yield Block.without_records(line_count=line_count)
        return
    line, counted = 1, 0  # the line of byte `counted`
    for i in range(0, len(starts), BLOCK_RECORDS):
        part = slice(i, i + BLOCK_RECORDS)
        newlines = newlines_of(data[counted:int(stops[part][-1])]) + counted
        lines = line + np.searchsorted(newlines, starts[part])
        yield _spans_block(data, starts[part], stops[part], lines, starts[part], options,
                           line_count if i == 0 else 0)
        line, counted = line + len(newlines), int(stops[part][-1])


def _one_record(data: bytes, line: int, offset: int, fmt: str, options: ReadOptions,
                line_count: int) -> Block:
    """The block of one record, `data` (with its line end, if it has one), which starts on
    `line` at byte `offset` and spans `line_count` physical lines."""
    raw = np.frombuffer(data, dtype=np.uint8)
    starts = np.array([len(BOM) if offset == 0 and data.startswith(BOM) else 0], np.int64)
    csv = fmt == "csv"
    stops = without_line_ends(raw, starts, np.array([len(data)], np.int64),
                              options.line_sep if csv else "\n")
    if csv and options.comment and comment_records(raw, starts, stops, options.comment)[0]:
        return Block.without_records(line_count=line_count)
    return _spans_block(data, starts, stops, np.array([line], np.int64), offset + starts,
                        options, line_count)


class _Reader:
    """The state of one task's read: the next record's byte offset and line, and the bytes
    read past the last record end."""

    def __init__(self, handle: Any, task: SourceTask, block_bytes: int,
                 options: ReadOptions) -> None:
        self.handle, self.task, self.options = handle, task, options
        self.block_bytes = block_bytes
        self.offset, self.line = 0, 1
        if task.start and task.format == "csv":  # a CSV record may span this line start
            o = options
            self.offset = first_line_start(handle, task.start, block_bytes, options.dialect)
            self.offset, skipped = range_start(handle, self.offset, task.end, block_bytes,
                                               o.dialect, task.quoted)
            self.line += skipped
            handle.seek(self.offset)
        elif task.start:
            self.offset = _skip_partial_line(handle, task.start, block_bytes)
        self.carry = b""
        self.tail = FIRST_READ  # past a range's end: what the last read took

    def blocks(self) -> Iterator[Block]:
        end = self.task.end
        while end is None or self.offset < end:
            chunk = self.handle.read(self._next_read())
            data = self.carry + chunk if self.carry else chunk
            self.carry = b""  # (in `data` now)
            newlines = _line_ends(data, self.task.format, not chunk, self.options)
            ends = _ends(data, self.task.format, not chunk, newlines, self.options)
            ended = False
            if end is not None and len(ends):  # the records that start before the end
                # (record i starts where record i-1 ends; the first at 0, before the end)
                within = min(len(ends), int(np.searchsorted(ends, end - self.offset)) + 1)
                ended = within < len(ends)
                ends = ends[:within]
            if len(ends) == 0 and not ended:
                del newlines, ends  # (positions: not held while the next are found)
                if not chunk:
                    return
                # A record longer than a block or the limit (a CR last may be the start
                # of its line end) is read on by itself, its bytes scanned once.
                if len(data) - data.endswith(b"\r") > min(self.block_bytes,
                                                          self.options.max_record_bytes):
                    yield self._long(data)
                else:
                    self.carry = data
                continue
            cut = int(ends[-1]) if len(ends) else 0
            for block in _cuts(data, ends, newlines, self.task.format, self.line,
                               self.offset, self.options):
                if len(block) or block.raw or block.line_count:  # comment lines count
                    yield block
            self.line += int(np.searchsorted(newlines, cut))
            self.offset += cut
            self.carry = data[cut:]
            del newlines, ends
            if ended or not chunk:
                return

    def _next_read(self) -> int:
        """What the next read takes: what fills a block with the carried bytes; in a byte
        range, up to its end and a little past it, then the rest of the record that
        crosses it in reads that double."""
        size = max(self.block_bytes - len(self.carry), min(FIRST_READ, self.block_bytes))
        if self.task.end is None:
            return size
        left = self.task.end - self.offset - len(self.carry)
        if left > 0:
            return min(size, left + FIRST_READ)
        self.tail = min(2 * self.tail, size)
        return self.tail

    def _long(self, data: bytes) -> Block:
        """The record that starts `data`, which holds no end of it and is longer than a
        block or the limit, read on a block at a time: its end found by the quote scanner
        (a JSON line's by its newline), its lines counted as they pass, its bytes kept
        while within the limit; the bytes after it carried on. One record, or past the
        limit one raw record of its true size holding its first PREFIX_BYTES: read
        through, never held whole. A CSV range whose first line start lies inside it (a
        later range) starts after it (:mod:`~markerstore.ingest.csvranges`), so no byte of
        it is read twice."""
        options = self.options
        prefix = b""  # what the error record keeps, once the record is too large
        bom = len(BOM) if self.offset == 0 and data.startswith(BOM) else 0  # not the record's
        csv = self.task.format == "csv"
        scanner = QuoteScanner(bytes, dialect=options.dialect) if csv else None
        line_sep = options.line_sep if csv else "\n"
        kept: list[bytes] | None = []  # the record's bytes, while it may be within the limit
        size = lines = 0
        tail = b""  # the last two bytes read of the record: its line end
        self.carry = b""
        while data:
            at = first_end(scanner, data) if scanner is not None else (
                data.find(b"\n") + 1 or -1)
            piece = data if at < 0 else data[:at]
            size += len(piece)
            lines += count_line_ends(tail[-1:], piece, line_sep, at >= 0)
            tail = (tail + piece[-2:])[-2:]
            if kept is not None:
                kept.append(piece)
                if size > options.max_record_bytes + 2 + bom:  # too large, whatever its end
                    prefix, kept = b"".join(kept)[bom:bom + options.prefix_bytes], None
            if at >= 0:
                self.carry = data[at:]
                break
            data = self.handle.read(self.block_bytes)
            if not data:  # the file's end: a CR last is a line end now
                lines += count_line_ends(tail[-1:], b"", line_sep, True)
        line_end = len(tail) - int(without_line_ends(  # the bytes of its line end
            np.frombuffer(tail, dtype=np.uint8), np.zeros(1, np.int64),
            np.array([len(tail)], np.int64), line_sep)[0])
        line_count = lines + (0 if line_end else 1)
        record = b"".join(kept) if kept is not None else b""
        if kept is not None and size - line_end - bom <= options.max_record_bytes:
            block = _one_record(record, self.line, self.offset, self.task.format, options,
                                line_count)
        else:
            prefix = prefix or record[bom:bom + options.prefix_bytes]
            found = RawRecord(self.line, self.offset + bom, size - line_end - bom, prefix, SIZE)
            block = Block.without_records((found,), line_count)
        self.offset += size
        self.line += lines
        return block
