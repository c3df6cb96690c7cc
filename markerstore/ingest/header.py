"""The header of a CSV file: its first record that is not empty (nor a comment line).

An empty line (nothing between two line ends: LF, CRLF or a lone CR) is no record, before
the header as anywhere else (Spark's own sample files start with one): the header is the
first non-empty record, on the driver (:func:`read_header`, which names the columns) as in
every task (:func:`drop_header`, which takes it and the empty lines before it out of the
file's first records). A record set apart before it (bytes that are not UTF-8, a record
too large) takes the header's place: the file then has no header that names anything.
Read in byte ranges, the range the header starts in drops it (:func:`starts_in`), be it a
later range after ranges of empty and comment lines only: the driver reads where the
header starts along with its text (:func:`read_header_at`) and tells each range; a range
not told looks it up (:func:`header_start`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.config import INGEST_ENCODING_ERRORS as ENCODING_ERRORS
from markerstore.errors import SourceError
from markerstore.ingest.blocks import BOM, Block, ReadOptions, open_task
from markerstore.ingest.charsets import SINGLE_BYTE, UTF16, Utf16Stream, codec
from markerstore.ingest.skip import Skipped, SkippedTooLong, skipped
from markerstore.ingest.sources import SourceTask, recut

HEADER_BYTES = 64 * 1024  # read a block at a time: a header may be longer


class Header(NamedTuple):
    """A CSV file's header: its text (empty when the file has none that names anything)
    and the byte offset where its record starts (None: the file holds no record); `data`,
    the record's bytes when they are no text in the files' encoding (else None)."""

    text: str
    start: int | None
    data: bytes | None = None


def safe_names(names: Sequence[str | None], case_sensitive: bool = False,
               null_value: str = "") -> list[str]:
    """A header's column names as Spark names them (``CSVUtils.makeSafeHeader``): an empty
    name, or one equal to `null_value`, is ``_c<index>``; a name given more than once
    (without case, unless `case_sensitive`: Spark's ``spark.sql.caseSensitive``) is
    ``<name><index>`` each time; any other name is itself."""
    def key(name: str) -> str:
        return name if case_sensitive else name.lower()

    counts = Counter(key(n) for n in names if n)
    return [f"_c{i}" if not name or name == null_value
            else f"{name}{i}" if counts[key(name)] > 1 else name
            for i, name in enumerate(names)]


def empty_records(records: pa.Array) -> np.ndarray:
    """Whether each CSV record is empty (no text between its line ends)."""
    if len(records) == 0:
        return np.zeros(0, dtype=bool)
    return pc.equal(pc.binary_length(records), 0).to_numpy(zero_copy_only=False)


def drop_header(block: Block) -> tuple[Block, bool]:
    """`block` (of a file's first records) without its empty records up to the header and
    without the header (the first record that is not empty, or a record set apart before
    it); and whether the header was in it (else every record of `block` was empty)."""
    full = np.flatnonzero(~empty_records(block.records))
    first = int(full[0]) if len(full) else len(block)
    at = int(block.offsets[first]) if first < len(block) else None
    if block.raw and (at is None or block.raw[0].offset < at):
        before = int(np.searchsorted(block.offsets, block.raw[0].offset))
        rest = block.take(np.arange(before, len(block), dtype=np.int64))
        return replace(rest, raw=block.raw[1:]), True
    rest = block.take(np.arange(min(first + 1, len(block)), len(block), dtype=np.int64))
    return rest, at is not None


def read_header(task: SourceTask, storage_options: Mapping[str, Any] | None,
                options: ReadOptions | None = None) -> str:
    """The header of a CSV file: its first record that is not empty (a byte order mark
    dropped); empty when the file has none, or when that record is not text or is larger
    than the record size limit. Read a block at a time with the quote scanner, whose state
    carries from block to block: linear in the bytes read, whatever the line ends."""
    return read_header_at(task, storage_options, options).text


def read_header_at(task: SourceTask, storage_options: Mapping[str, Any] | None,
                   options: ReadOptions | None = None) -> Header:
    """:func:`read_header`'s text, with the offset where the header record starts (what
    :func:`header_start` gives), from one read of the file's start."""
    options = options or ReadOptions()
    found = _header_record(task, storage_options, options)
    if found is None:
        return Header("", None)
    record, at = found
    text = "" if record is None else _text(record, options)
    return Header(text, at, record if record and not text else None)


def header_start(task: SourceTask, storage_options: Mapping[str, Any] | None,
                 options: ReadOptions | None = None) -> int | None:
    """The byte offset in its file where a CSV file's header record starts (None: the
    file holds no record): the byte range it starts in drops it, whatever the ranges
    before it hold (empty lines, comment lines)."""
    found = _header_record(task, storage_options, options or ReadOptions())
    return None if found is None else found[1]


def starts_in(task: SourceTask, at: int | None) -> bool:
    """Whether `task` is the byte range that drops its file's header, which starts at byte
    `at` (None: the file holds no record): the first range (or the whole file) looks for it
    whatever `at`, a later range only where `at` lies in it."""
    if task.start == 0:
        return True
    return at is not None and task.start <= at and (task.end is None or at < task.end)


def _header_record(task: SourceTask, storage_options: Mapping[str, Any] | None,
                   options: ReadOptions) -> tuple[bytes | None, int] | None:
    """(the header record's bytes without its line end, or None when it is larger than
    the limit; its offset in the file), or None when the file holds no record."""
    from markerstore.values.csv import QuoteScanner, strip_line_end

    scanner = QuoteScanner(bytes, dialect=options.dialect)
    comment = options.comment.encode()
    record = bytearray()
    whole = SourceTask(task.url, task.format, base=task.base, base_line=task.base_line)
    with open_task(whole, dict(storage_options or {})) as raw:
        # UTF-16 is read as its UTF-8 transcoding, as the tasks read it
        handle = Utf16Stream(raw, options.encoding) if options.encoding in UTF16 else raw
        if task.base:  # after the lines `skip` names
            handle = Skipped(handle, task.base)
        base = at = 0  # the offset of the chunk read, and of the record being read
        while True:
            chunk = handle.read(HEADER_BYTES)
            if base == 0 and chunk.startswith(BOM):
                chunk, base, at = chunk[len(BOM):], len(BOM), len(BOM)
            start = 0
            for end in scanner.feed(chunk) if chunk else [len(chunk)]:
                record += chunk[start:end]
                start = end
                text = strip_line_end(bytes(record), options.line_sep)
                record.clear()
                if text and not (comment and text.startswith(comment)):
                    return text, at
                at = base + end
            if not chunk:
                return None
            record += chunk[start:]
            base += len(chunk)
            if len(record) > options.max_record_bytes:
                return None, at


def _text(record: bytes, options: ReadOptions) -> str:
    if len(record) > options.max_record_bytes:
        return ""
    if options.encoding in SINGLE_BYTE:  # every byte is a character
        return record.decode(codec(options.encoding))
    try:
        return record.decode("utf-8")
    except UnicodeDecodeError:
        return record.decode("utf-8", "replace") if options.encoding_errors == "replace" \
            else ""


def encoding_hint(url: str, data: bytes, options: ReadOptions) -> str:
    """Why a header record of bytes `data` is no text in the files' encoding, in one line
    naming the option that reads it: ``encoding`` (Windows-1252 where its bytes say so,
    else ISO-8859-1), or ``markerstore.ingest.encoding.errors=replace``."""
    try:
        data.decode(codec(options.encoding))
        at = None
    except UnicodeDecodeError as exc:
        at = exc.start
    where = "" if at is None else f" (byte 0x{data[at]:02X} at offset {at} of the record)"
    windows = options.encoding == "utf-8" and any(0x80 <= b <= 0x9F for b in data)
    return (f"{url}: its header record is not {options.encoding} text{where}: "
            + encoding_advice("windows-1252" if windows else "iso-8859-1"))


def encoding_advice(guess: str = "iso-8859-1, or windows-1252") -> str:
    """What reads records that are not text in the encoding read, in words."""
    return (f"give the files' encoding (--option encoding={guess}), or read such bytes as "
            f"U+FFFD (--option {ENCODING_ERRORS}=replace)")


def with_skip(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
              options: ReadOptions, lines: int, split_bytes: int) -> list[SourceTask]:
    """`tasks` with each CSV file read from after its first `lines` lines (DuckDB's
    ``skip``): its `base` and `base_line` set, its size and byte ranges (of
    `split_bytes`) counted from there; other files and tasks already so as they are."""
    if lines <= 0:
        return list(tasks)
    bases: dict[str, tuple[int, int]] = {}
    for task in tasks:
        if task.format == "csv" and task.url not in bases and not (task.base or
                                                                   task.base_line):
            bases[task.url] = _skip_of(task, storage_options, options, lines)
    out: list[SourceTask] = []
    for task in tasks:
        if task.url not in bases:
            out.append(task)
        elif task.start == 0:  # the file once, from its base, in ranges as before
            base, skipped_lines = bases[task.url]
            size = max(0, sum(t.size for t in tasks if t.url == task.url) - base)
            whole = replace(task, end=None, size=size, base=base, base_line=skipped_lines)
            ranged = task.splittable and size > split_bytes
            out += recut([whole], split_bytes) if ranged else [whole]
    return out


def _skip_of(task: SourceTask, storage_options: Mapping[str, Any] | None,
             options: ReadOptions, lines: int) -> tuple[int, int]:
    """(the byte where a file's CSV text starts after its first `lines` lines, as the
    tasks read its bytes; the lines before it)."""
    with open_task(SourceTask(task.url, task.format), dict(storage_options or {})) as raw:
        handle = Utf16Stream(raw, options.encoding) if options.encoding in UTF16 else raw
        try:
            return skipped(handle, lines, options.line_sep, options.max_record_bytes)
        except SkippedTooLong as exc:
            raise SourceError(f"{task.url}: option skip={lines}: {exc} "
                              "(markerstore.ingest.record.max_bytes)") from None
