"""Where a byte range of a CSV file starts its first record, exactly: a large CSV file is
read by as many tasks as a JSON-lines file of its size, and every record by exactly one.

A record belongs to the range its first byte lies in. Records start at line starts, so a
range's records start at or after its first line start (the first newline at or after
its start, as for JSON lines) and its last record is read through past its end. What a
line start cannot tell by itself is whether it lies inside a quoted field (a newline in
a value) or starts a record: that is the quote state there, a function of the bytes
before it. After a newline the state is one of two, outside or inside a quoted field
(the scanner's other states cannot hold across a newline), and each line maps the state
at its start to the state at its end as a constant, the identity or a flip
(:mod:`~markerstore.ingest.csvsplit`). A line that closes a quoted field it opens, or
holds a quote anywhere but at a field's start, is constant: from there on the state is
known whatever came before. So the state at a range's first line start is found by
**looking back**: the lines of a window before it are read twice, once starting outside
and once inside a quoted field (csvsplit's vectorized record ends, the second time after
a prefix of a quote and a newline); where the two readings agree the state is known. The
window starts at 64 KiB and grows fourfold until the readings agree, it reaches the file's
start (the state is then exact) or the limit below. Then:

- inside a quoted field, the range's first record starts where that field's record ends
  (errortable's quote scanner, started inside a quoted field, reads to it);
- outside, the range's first record starts at its first line start.

Why look back, and not a first pass over every range with a prefix on the driver, or
speculation verified against the previous range's end state: a line with a closed quoted
field is constant, and ordinary CSV holds one every few lines, so the look-back reads one
window of 64 KiB per range and classifies it at the speed of the block reader; no range
waits for another, nothing is reread when a guess was wrong, and nothing is decided on
the driver (a first pass would read the whole file twice, or on the driver; speculation
needs a second round to redo the ranges it guessed wrong, in the commit). Its cost is a
file without quotes: no line is constant, so the look-back reads ``record.max_bytes``
before each range (at memory bandwidth: a window without a quote is not classified).
Measured (docs/BENCHMARKS.md): 1.1 ms of CPU per range on ordinary CSV, 87 ms per range of
64 MiB on a file without quotes.

The bound is the record size limit. When the window reaches ``record.max_bytes`` without
an agreement and holds no quote, every line in it is the identity: were its start inside
a quoted field, that field would run on to the range's start, and its record would
already be larger than the limit. The range then reads from outside at its first line
start, and the task that reads that record too large (one ``size`` error record) cuts it
there (it asks the same question of the same bytes, :func:`inside_at`). A window that
holds quotes but no line that decides (only lines that flip the state, as a line holding
one quote at a field's start and nothing closed: broken or hostile input) widens on to
the file's start, so its answer stays exact, at the cost of reading what lies before. So the
records are those of the whole file, except that a quoted field running longer than the
limit without a quote across a range's start ends its record there: a quote that never
closes is one bounded error record, and no range reads past its neighbour's end by more
than the limit.

The dialect (separator, quote character, escape, comment character) is passed in, so
that the ranges read every dialect the block reader reads: a comment line (the comment
character at a record's start) read from outside a quoted field ends outside one, its
quotes unread, and read from inside one is text like any other (csvsplit's maps, the
quote scanner). A line ends at a LF, a CRLF or a lone CR, as the block reader's default,
or with a line separator of the dialect's own (Spark's ``lineSep``: one ASCII character or
CRLF) at that separator alone: a line start is then the byte after one.
"""

from __future__ import annotations

import re
from typing import Any

from errortable.csvtext import QUOTED, Dialect, QuoteScanner
from markerstore.ingest.csvsplit import record_ends

LOOK_BACK_BYTES = 64 * 1024  # the first window read before a range's first line start
_GROWTH = 4
_DEFAULT = Dialect()
# A line end of a CSV range's default dialect: LF, CRLF or a lone CR.
_LINE_END = re.compile(rb"\r\n?|\n")


def _line_end(dialect: Dialect) -> re.Pattern[bytes]:
    """What ends a line of `dialect`: its own separator, else LF, CRLF or a lone CR."""
    sep = dialect.line_sep
    return _LINE_END if sep is None else re.compile(re.escape(sep.encode()))


def _line_ends(data: bytes, dialect: Dialect = _DEFAULT) -> int:
    return len(_line_end(dialect).findall(data))


def first_line_start(handle: Any, start: int, block_bytes: int,
                     dialect: Dialect = _DEFAULT) -> int:
    """Seek to the first line start at or after `start` (> 0), after a LF, a CRLF or a lone
    CR (or the dialect's own separator); its offset. The line that began before `start` is
    read a block at a time."""
    if dialect.line_sep is not None:
        return _after_separator(handle, start, block_bytes, dialect.line_sep.encode())
    handle.seek(start - 1)
    before = handle.read(2)
    if before[:1] == b"\n" or (before[:1] == b"\r" and before[1:2] != b"\n"):
        handle.seek(start)
        return start
    offset = start
    handle.seek(start)
    while chunk := handle.read(block_bytes):
        found = _LINE_END.search(chunk)
        if found:
            end = found.end()
            if found.group() == b"\r" and end == len(chunk) and handle.read(1) == b"\n":
                end += 1  # a CRLF cut by the read
            offset += end
            break
        offset += len(chunk)
    handle.seek(offset)
    return offset


def _after_separator(handle: Any, start: int, block_bytes: int, sep: bytes) -> int:
    """:func:`first_line_start` where one separator (a byte, or CRLF) ends a line: right
    after the first that ends at or after `start`."""
    before = max(0, start - len(sep))
    handle.seek(before)
    if handle.read(start - before) == sep:
        return start  # seeked there
    at = start - (len(sep) - 1)  # a CRLF whose CR lies before `start` ends after it
    handle.seek(at)
    carry = b""
    while chunk := handle.read(block_bytes):
        data = carry + chunk
        found = data.find(sep)
        if found >= 0:
            offset = at - len(carry) + found + len(sep)
            handle.seek(offset)
            return offset
        carry = data[len(data) - len(sep) + 1:]
        at += len(chunk)
    return at  # the file's end (seeked there)


def ends_inside(lines: bytes, inside: bool, dialect: Dialect = _DEFAULT) -> bool:
    """Whether whole `lines` (ending at a line start), read from inside a quoted field or
    not, end inside one."""
    data = (dialect.quote + (dialect.line_sep or "\n")).encode() + lines if inside else lines
    if not data:
        return False
    if dialect.line_sep is None and data.endswith(b"\r"):  # a line end (`lines` end at a
        data += b"\n"  # line start), whatever follows: a CRLF reads as that CR does
    ends = record_ends(data, False, dialect=dialect)
    return not (len(ends) and int(ends[-1]) == len(data))


def inside_at(handle: Any, at: int, limit: int, dialect: Dialect = _DEFAULT) -> bool:
    """Whether line start `at` of the file open as `handle` lies inside a quoted field,
    from the lines of at most `limit` bytes before it (see the module's docstring)."""
    span, begin, data = min(LOOK_BACK_BYTES, limit), at, b""
    quote_byte = dialect.quote.encode()
    while True:
        wider = max(0, at - span)
        handle.seek(wider)
        data, begin = handle.read(begin - wider) + data, wider
        if begin == 0:  # the file's start: outside a quoted field
            return ends_inside(data, False, dialect)
        found = _line_end(dialect).search(data)  # the window's first line start (0: none)
        first = found.end() if found and found.end() < len(data) else 0
        quoted = first > 0 and data.find(quote_byte, first) >= 0  # else: the identity
        if quoted:
            lines = data[first:]
            outside = ends_inside(lines, False, dialect)
            if outside == ends_inside(lines, True, dialect):
                return outside
        elif at - begin >= limit:  # a field open so long would be too large anyway:
            return False  # read from outside (see the module's docstring)
        span = span * _GROWTH if span >= limit else min(span * _GROWTH, limit)


def first_record(handle: Any, at: int, end: int | None, block_bytes: int,
                 dialect: Dialect = _DEFAULT) -> tuple[int, int]:
    """(offset, line ends before it from `at`) of the first record that starts after line
    start `at`, which lies inside a quoted field: the end of that field's record. The
    scan stops at `end` (no record of the range starts before it) and at the file's end;
    the offset is then where it stopped."""
    scanner: QuoteScanner[bytes] = QuoteScanner(bytes, dialect=dialect)
    scanner.state = QUOTED
    handle.seek(at)
    offset, lines, cr = at, 0, False  # cr: the last chunk ended with a CR
    while end is None or offset < end:
        chunk = handle.read(block_bytes)
        if not chunk:
            break
        found = scanner.feed(chunk)
        lf = cr and chunk[:1] == b"\n"  # the LF of a CRLF cut by the read:
        skip = int(lf) if dialect.line_sep is None else 0  # counted with its CR, or
        joined = int(lf) if dialect.line_sep == "\r\n" else 0  # counted here
        if found:
            return offset + found[0], lines + joined + _line_ends(chunk[skip:found[0]],
                                                                  dialect)
        offset += len(chunk)
        lines += joined + _line_ends(chunk[skip:], dialect)
        cr = chunk.endswith(b"\r")
    return offset, lines


def range_start(handle: Any, at: int, end: int | None, block_bytes: int, limit: int,
                dialect: Dialect = _DEFAULT) -> tuple[int, int]:
    """(offset, line ends before it from `at`) of the first record of a CSV byte range
    whose first line start is `at` (> 0) and which ends at `end` (None: the file's end)."""
    if not inside_at(handle, at, limit, dialect):
        return at, 0
    return first_record(handle, at, end, block_bytes, dialect)
