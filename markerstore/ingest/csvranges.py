"""Where a byte range of a CSV file starts its first record, exactly: a large CSV file is
read by as many tasks as a JSON-lines file of its size, and every record by exactly one.

A record belongs to the range its first byte lies in. Records start at line starts, so a
range's records start at or after its first line start (the first newline at or after
its start, as for JSON lines) and its last record is read through past its end. What a
line start cannot tell by itself is whether it lies inside a quoted field (a newline in
a value) or starts a record: that is the quote state there, a function of the bytes
before it. After a newline the state is one of two, outside or inside a quoted field
(the scanner's other states cannot hold across a newline), and the lines between two line
starts map the state at the first to the state at the second as a constant, the identity
or a flip (:func:`lines_map`; :mod:`~markerstore.ingest.csvsplit` reads them). A line that
closes a quoted field it opens, or holds a quote anywhere but at a field's start, is
constant: from there on the state is known whatever came before. Then:

- inside a quoted field, the range's first record starts where that field's record ends
  (errortable's quote scanner, started inside a quoted field, reads to it);
- outside, the range's first record starts at its first line start.

**Looking back** (:func:`inside_at`): the lines of a window before the line start are read
twice, once starting outside and once inside a quoted field; where the two readings agree
the state is known. The window starts at 64 KiB and grows fourfold up to
:data:`LOOK_BACK_MAX` (or the file's start, where the state is outside). Ordinary CSV
holds a constant line every few lines, so one 64 KiB window decides.

**A first pass** decides the rest (:func:`segment_map`, and :mod:`~markerstore.ingest.
quotestates` on the driver): where no window decides (a file without quotes, a quoted
field longer than the window, lines that each flip the state, as ``1,"text\n",7`` does),
the state at a range's first line start is the map of the lines since the previous
range's first line start applied to the state there, and so on back to the file's start
(outside): the maps are composed as a prefix over the ranges, each range's lines read
once, a block at a time. The driver does this before the tasks run and gives each range
its state (``SourceTask.quoted``); a range not given one finds it alone
(:func:`state_at`: the look-back, else the lines from the file's start, read a block at a
time). Either way the answer is exact: the records are those of the file read whole,
and a record too large is one error record of its true size, which the ranges it spans
read nothing of.

Why not speculation (each range guesses its state and the guesses are checked against
the previous range's end state): a wrong guess needs a second round that redoes a range
after its rows are written; the pass reads only the ranges no window decides, and only
once, at the speed of the quote scan (csvsplit's parity pass; a block without a quote
costs one scan for quotes).

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
from collections.abc import Iterator
from typing import Any

import numpy as np

from markerstore.ingest.csvsplit import line_ends_of, parity_break, parity_holds, record_ends
from markerstore.values.csv import ESCAPED, QUOTED, Dialect, QuoteScanner

LOOK_BACK_BYTES = 64 * 1024  # the first window read before a range's first line start
LOOK_BACK_MAX = 1024 * 1024  # the widest: past it, the first pass decides
FIRST_READ = 64 * 1024  # a scan forward reads this much first, then twice as much each time
SCAN_PIECE = 8 * 1024  # the quote scanner looking for one record's end is fed this at a time
_GROWTH = 4
_DEFAULT = Dialect()
# A line end of a CSV range's default dialect: LF, CRLF or a lone CR.
_LINE_END = re.compile(rb"\r\n?|\n")

Map = tuple[bool, bool]  # the state (inside a quoted field?) after lines read from outside, inside
IDENTITY: Map = (False, True)


def _line_end(dialect: Dialect) -> re.Pattern[bytes]:
    """What ends a line of `dialect`: its own separator, else LF, CRLF or a lone CR."""
    sep = dialect.line_sep
    return _LINE_END if sep is None else re.compile(re.escape(sep.encode()))


def _line_ends(data: bytes, dialect: Dialect = _DEFAULT) -> int:
    return len(_line_end(dialect).findall(data))


def reads(handle: Any, block_bytes: int, first: int = FIRST_READ) -> Iterator[bytes]:
    """The handle's bytes from where it is: `first` bytes, then twice as many each time up
    to `block_bytes` (a scan that stops early reads little; a long one reads in blocks)."""
    size = min(first, block_bytes)
    while chunk := handle.read(size):
        yield chunk
        size = min(2 * size, block_bytes)


def first_line_start(handle: Any, start: int, block_bytes: int,
                     dialect: Dialect = _DEFAULT) -> int:
    """Seek to the first line start at or after `start` (> 0), after a LF, a CRLF or a lone
    CR (or the dialect's own separator); its offset. The line that began before `start` is
    read through, a block at a time at most."""
    if dialect.line_sep is not None:
        return _after_separator(handle, start, block_bytes, dialect.line_sep.encode())
    handle.seek(start - 1)
    before = handle.read(2)
    if before[:1] == b"\n" or (before[:1] == b"\r" and before[1:2] != b"\n"):
        handle.seek(start)
        return start
    offset = start
    handle.seek(start)
    for chunk in reads(handle, block_bytes):
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
    for chunk in reads(handle, block_bytes):
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


def lines_map(lines: bytes, dialect: Dialect = _DEFAULT) -> Map:
    """The map of whole `lines` (from a line start to a line start): the state after them
    read from outside a quoted field, and read from inside one. Each reading is the
    parity of the quotes where that is the state (csvsplit's parity rule), else the
    lines' record ends."""
    if dialect.quote.encode() not in lines:
        return IDENTITY
    raw = np.frombuffer(lines, dtype=np.uint8)
    quotes = np.flatnonzero(raw == ord(dialect.quote))
    out = bool(len(quotes) & 1) if parity_holds(raw, quotes, None, dialect) else None
    found = parity_break(raw, quotes, None, dialect, True)
    if found is None:
        inside = bool((len(quotes) + 1) & 1)
    elif (out is not None and found >= 0 and not dialect.ignore_leading
          and lines[found + 1:found + 2] != dialect.quote.encode()):
        # Read from outside that quote closes a field, read from inside it is text (in a
        # plain field): both readings are outside after it, in the same state unless a
        # quote follows (doubled in the first): the lines are constant. (With white space
        # ignored before a value, a quote after it may open a field: not so sure.)
        inside = out
    else:
        inside = ends_inside(lines, True, dialect)
    return ends_inside(lines, False, dialect) if out is None else out, inside


def then(first: Map, second: Map) -> Map:
    """The map of `first`'s lines followed by `second`'s."""
    return second[first[0]], second[first[1]]


def inside_at(handle: Any, at: int, dialect: Dialect = _DEFAULT, floor: int = 0
              ) -> bool | None:
    """Whether line start `at` of the file open as `handle` lies inside a quoted field, as
    the lines of at most :data:`LOOK_BACK_MAX` bytes before it (and none before byte
    `floor`) tell (see the module's docstring); None when they do not."""
    begin, read = look_back(handle, at, dialect, floor)
    return read[0] if begin == 0 or read[0] == read[1] else None


def look_back(handle: Any, at: int, dialect: Dialect = _DEFAULT, floor: int = 0
              ) -> tuple[int, Map]:
    """(the line start `w` where the widest window read before line start `at` begins,
    the map of the lines from `w` to `at`): a window of 64 KiB, widened fourfold up to
    :data:`LOOK_BACK_MAX` (none before byte `floor`) until its map is constant or it
    reaches the file's start (`w` 0: the map's first value is the state at `at`)."""
    span, begin, data = LOOK_BACK_BYTES, at, b""
    while True:
        wider = max(floor, at - span)
        handle.seek(wider)
        data, begin = handle.read(begin - wider) + data, wider
        if begin == 0:  # the file's start: outside a quoted field
            inside = ends_inside(data, False, dialect)
            return 0, (inside, inside)
        found = _line_end(dialect).search(data)  # the window's first line start (0: none)
        first = found.end() if found and found.end() < len(data) else 0
        read = lines_map(data[first:], dialect) if first else IDENTITY
        if read[0] == read[1] or span >= LOOK_BACK_MAX or wider == floor:
            return (wider + first if first else at), read
        span = min(span * _GROWTH, LOOK_BACK_MAX)


def segment_map(handle: Any, lo: int, hi: int, block_bytes: int,
                dialect: Dialect = _DEFAULT) -> Map:
    """The map of the lines from line start `lo` to line start `hi`, read forward a block
    at a time: the memory of about two blocks (a line longer than a block is read by the
    quote scanner, a block at a time)."""
    handle.seek(lo)
    found, at, carry = IDENTITY, lo, b""
    sep = dialect.line_sep
    while at < hi:
        chunk = handle.read(min(block_bytes, hi - at))
        if not chunk:
            break
        at += len(chunk)
        data = carry + chunk if carry else chunk
        cut = _last_line_end(data, sep, at >= hi) + 1
        if cut == 0 and at < hi:
            if len(data) > block_bytes:  # one long line: by the scanner, to its end
                line, data, at = _long_line(handle, data, at, hi, block_bytes, dialect)
                found = then(found, line)
                cut = _last_line_end(data, sep, at >= hi) + 1
            else:
                carry = data
                continue
        found = then(found, lines_map(data[:cut], dialect))
        carry = data[cut:]
    return found


def _last_line_end(data: bytes, sep: str | None, final: bool) -> int:
    """The position of the last byte of the last line end in `data` (-1: none); a CR last
    ends a line only when `final` (else a LF may follow)."""
    if sep is None:  # a CR after the last LF is alone (a CRLF's CR stands before its LF)
        return max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - (not final)))
    found = data.rfind(sep.encode())
    return found + len(sep) - 1 if found >= 0 else -1


def _long_line(handle: Any, data: bytes, at: int, hi: int, block_bytes: int,
               dialect: Dialect) -> tuple[Map, bytes, int]:
    """(the map of the line that `data` starts and holds no end of, the bytes read after
    that line, where the handle is): the line fed to two quote scanners, started outside
    and inside a quoted field, a block at a time."""
    scanners = [QuoteScanner(bytes, dialect=dialect) for _ in range(2)]
    scanners[1].state = QUOTED
    sep, tail = dialect.line_sep, b""
    while True:
        context = tail + data  # a CRLF cut by a read ends with this read's first byte
        ends = line_ends_of(context, sep, at >= hi)
        ends = ends[ends >= len(tail)] - len(tail)
        if len(tail) and data[:1] != b"\n" and tail == b"\r" and sep is None:
            cut = 0  # the CR that ended the last read was a line end alone
        elif len(ends):
            cut = int(ends[0]) + 1
        else:
            cut = -1
        for scanner in scanners:
            scanner.feed(data if cut < 0 else data[:cut])
        if cut >= 0 or at >= hi:
            return _states(scanners), data[cut:] if cut >= 0 else b"", at
        tail = data[-1:]
        data = handle.read(min(block_bytes, hi - at))
        if not data:
            return _states(scanners), b"", at
        at += len(data)


def _states(scanners: list[QuoteScanner[bytes]]) -> Map:
    """The map two quote scanners (started outside, inside a quoted field) have read, at
    a line start."""
    out, inside = (s.state in (QUOTED, ESCAPED) for s in scanners)
    return out, inside


def state_at(handle: Any, at: int, block_bytes: int, dialect: Dialect = _DEFAULT) -> bool:
    """Whether line start `at` lies inside a quoted field, exactly: the look-back, else
    the lines from the file's start (read once, a block at a time)."""
    found = inside_at(handle, at, dialect)
    if found is None:
        found = segment_map(handle, 0, at, block_bytes, dialect)[0]
    return found


def first_end(scanner: QuoteScanner[bytes], data: bytes) -> int:
    """Where the first record that `scanner` reads in `data` ends (just after its line
    end; -1: none), fed a piece at a time: what follows that end is not scanned."""
    for start in range(0, len(data), SCAN_PIECE):
        found = scanner.feed(data[start:start + SCAN_PIECE])
        if found:
            return start + found[0]
    return -1


def first_record(handle: Any, at: int, end: int | None, block_bytes: int,
                 dialect: Dialect = _DEFAULT) -> tuple[int, int]:
    """(offset, line ends before it from `at`) of the first record that starts after line
    start `at`, which lies inside a quoted field: the end of that field's record. The
    scan stops at `end` (no record of the range starts before it) and at the file's end;
    the offset is then where it stopped."""
    scanner: QuoteScanner[bytes] = QuoteScanner(bytes, dialect=dialect)
    scanner.state = QUOTED
    offset, lines, cr = at, 0, False  # cr: the last chunk ended with a CR
    if end is not None and at >= end:
        return offset, lines
    handle.seek(at)
    for chunk in reads(handle, block_bytes):
        found = first_end(scanner, chunk)
        lf = cr and chunk[:1] == b"\n"  # the LF of a CRLF cut by the read:
        skip = int(lf) if dialect.line_sep is None else 0  # counted with its CR, or
        joined = int(lf) if dialect.line_sep == "\r\n" else 0  # counted here
        if found >= 0:
            return offset + found, lines + joined + _line_ends(chunk[skip:found], dialect)
        offset += len(chunk)
        lines += joined + _line_ends(chunk[skip:], dialect)
        cr = chunk.endswith(b"\r")
        if end is not None and offset >= end:
            break
    return offset, lines


def range_start(handle: Any, at: int, end: int | None, block_bytes: int,
                dialect: Dialect = _DEFAULT, inside: bool | None = None) -> tuple[int, int]:
    """(offset, line ends before it from `at`) of the first record of a CSV byte range
    whose first line start is `at` (> 0) and which ends at `end` (None: the file's end).
    `inside`: the quote state at `at`, when known (else found, :func:`state_at`)."""
    if inside is None:
        inside = state_at(handle, at, block_bytes, dialect)
    if not inside:
        return at, 0
    return first_record(handle, at, end, block_bytes, dialect)
