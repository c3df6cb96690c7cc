"""CSV as RFC 4180 reads it: the fields of a record, and where records end.

A field is either plain (no quote, no delimiter) or quoted: it starts with a quote, holds
anything (delimiters, line breaks, ``""`` for a quote) and ends with a quote followed by
the delimiter or the end of the record. A record ends at a line end outside a quoted
field (LF, CRLF or a lone CR by default, as Spark's ``lineSep``; another with
:class:`Dialect`), so one record may span several physical lines; its text keeps the line
breaks inside quoted fields as written. A comment line (Spark's ``comment``) and an empty
line are no record.

Where a record ends is decided as the usual quote state machine decides it (Python's csv,
Spark's univocity): a quote at the start of a field opens a quoted field; inside it ``""``
is a quote and a quote followed by anything else closes it; a quote anywhere else is an
ordinary character, and the record is then an error (:func:`split_record` refuses it).
:class:`QuoteScanner` is that machine over text or bytes fed piece by piece (a file's
blocks, or one record too large to hold); ``markerstore.ingest.csvsplit`` computes the
same ends vectorized.

With an `escape` other than the quote (Spark's ``escape``, whose default there is a
backslash, as Spark's CSV writer writes), a quoted field holds ``\\"`` for a quote and
``\\\\`` for a backslash; an escape before any other character is that escape, kept;
``""`` is then no quote (the first quote closes the field), and outside quoted fields the
escape is an ordinary character.

How a field reads follows Spark's options: an empty plain field is null; a quoted empty
field (``""``) reads as `empty_value`; any field equal to `null_value` is null. With
Spark's defaults (both ``""``) both ``,,`` and ``,"",`` read as null; set `null_value` to a
token that never occurs (``\\N``, say) and ``""`` reads as an empty string.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, AnyStr, Generic

from markerstore.errors import MarkerStoreError

QUOTE = '"'

# Scanner states: at a field's start, in a plain field, in a quoted field, just after a
# quote inside a quoted field (the next character tells an escaped quote from the end),
# just after an escape inside a quoted field (the next character is taken as it is); at a
# record's start (a comment character there starts a comment line), in a comment line,
# and just after a CR that ends a piece (the next piece tells a CRLF from a lone CR).
START, PLAIN, QUOTED, AFTER_QUOTE, ESCAPED, RECORD, COMMENT, AFTER_CR = range(8)


class CsvError(MarkerStoreError, ValueError):
    """A record that is not RFC 4180 CSV (the message never quotes the record's values)."""


@dataclass(frozen=True)
class Dialect:
    """How the CSV text is written (Spark's reader options of the same names): the field
    `delimiter` (sep), the `quote`, the `escape` of a quote inside a quoted field (the
    quote itself: ``""`` is a quote), the `comment` character that starts a line that is no
    record (empty: none), what ends a record (`line_sep`; None: any of LF, CRLF and a lone
    CR), and whether white space before and after a value is part of it (no, when
    `ignore_leading` / `ignore_trailing`; white space is a character up to the space other
    than a line break and the delimiter, as Spark's CSV parser has it). `encoding` is the
    Python codec of the bytes the byte scanners read (a file's single-byte encoding, else
    UTF-8): a delimiter beyond ASCII is those bytes there (``þ`` is one byte in Latin-1,
    two in UTF-8)."""

    delimiter: str = ","
    quote: str = QUOTE
    escape: str = QUOTE
    comment: str = ""
    line_sep: str | None = None
    ignore_leading: bool = False
    ignore_trailing: bool = False
    encoding: str = "utf-8"

    @property
    def delimiter_bytes(self) -> bytes:
        """The delimiter as the file's bytes hold it."""
        return self.delimiter.encode(self.encoding)

    @property
    def doubled(self) -> bool:
        """Whether a doubled quote is a quote inside a quoted field (the escape is the
        quote)."""
        return self.escape == self.quote

    @property
    def white(self) -> str:
        """The characters that are white space around a value."""
        return "".join(chr(c) for c in range(33) if chr(c) not in ("\r", "\n",
                                                                   self.delimiter))

    @staticmethod
    def of(dialect: Dialect | None, delimiter: str = ",", escape: str = QUOTE) -> Dialect:
        """`dialect`, or the default one with this delimiter and escape."""
        return dialect if dialect is not None else Dialect(delimiter, escape=escape)


def line_end_pattern(line_sep: str | None) -> str:
    """What ends a line, as a regular expression (Python's ``re`` and RE2 alike)."""
    if line_sep is None:
        return r"\r\n|\r|\n"
    return "".join(f"\\x{ord(c):02x}" for c in line_sep)


def quoted_run(escape: str = QUOTE, quote: str = QUOTE) -> str:
    """The text inside a quoted field, as an unrolled loop (linear time on any input)."""
    q = re.escape(quote)
    if escape == quote:
        return f"[^{q}]*(?:{q}{q}[^{q}]*)*"
    e = re.escape(escape)
    return rf"[^{q}{e}]*(?:{e}[\s\S][^{q}{e}]*)*"


@functools.lru_cache(maxsize=16)
def _field(dialect: Dialect) -> re.Pattern[str]:
    d, q = re.escape(dialect.delimiter), re.escape(dialect.quote)
    white = f"[{re.escape(dialect.white)}]*"
    lead = white if dialect.ignore_leading else ""
    trail = white if dialect.ignore_trailing else ""
    return re.compile(rf"{lead}(?:{q}({quoted_run(dialect.escape, dialect.quote)}){q}{trail}"
                      rf"|([^{q}{d}]*))")


@functools.lru_cache(maxsize=16)
def _unescape(escape: str, quote: str = QUOTE) -> re.Pattern[str]:
    e = re.escape(escape)
    return re.compile(rf"{e}([{e}{re.escape(quote)}])")


def split_record(text: str, delimiter: str = ",", escape: str = QUOTE, *,
                 dialect: Dialect | None = None) -> list[tuple[str, bool]]:
    """The fields of one record (its text without the line end) as (value, quoted)."""
    dialect = Dialect.of(dialect, delimiter, escape)
    pattern, quote, delimiter = _field(dialect), dialect.quote, dialect.delimiter
    fields: list[tuple[str, bool]] = []
    pos, n = 0, len(text)
    while True:
        m = pattern.match(text, pos)
        assert m is not None  # the plain alternative matches the empty string
        quoted = m.group(1) is not None
        if not quoted:
            value = m.group(2)
            if dialect.ignore_trailing:
                value = value.rstrip(dialect.white)
        elif dialect.doubled:
            value = m.group(1).replace(quote + quote, quote)
        else:
            value = _unescape(dialect.escape, quote).sub(r"\1", m.group(1))
        fields.append((value, quoted))
        end = m.end()
        if end == n:
            return fields
        if text[end] == delimiter:
            pos = end + 1
            continue
        number = len(fields)
        if quoted:
            why = "a character other than the delimiter after its closing quote"
        elif value:
            why = "a quote inside an unquoted field"
        else:
            why = "a quoted field that is never closed"
        raise CsvError(f"field {number}: {why}")


def field_values(fields: Sequence[tuple[str, bool]], null_value: str = "",
                 empty_value: str = "") -> list[str | None]:
    """Values as Spark's CSV reader gives them: an empty plain field is null, ``""`` is
    `empty_value`, and a value equal to `null_value` is null."""
    out: list[str | None] = []
    for value, quoted in fields:
        if value == "":
            value = empty_value if quoted else null_value
        out.append(None if value == null_value else value)
    return out


def strip_line_end(text: AnyStr, line_sep: str | None = None) -> AnyStr:
    """A record's text (str or bytes) without its line end: LF, CRLF or a lone CR by
    default; LF or CRLF with `line_sep` LF; else `line_sep` itself."""
    binary = isinstance(text, bytes)
    lf: Any = b"\n" if binary else "\n"
    cr: Any = b"\r" if binary else "\r"
    if line_sep is None or line_sep == "\n":
        if text.endswith(lf):
            text = text[:-1]
            if text.endswith(cr):
                return text[:-1]
        elif line_sep is None and text.endswith(cr):
            return text[:-1]
        return text
    sep: Any = line_sep.encode() if binary else line_sep
    return text[:-len(sep)] if text.endswith(sep) else text


class QuoteScanner(Generic[AnyStr]):
    """The quote state machine over text (str) or bytes fed piece by piece: :meth:`feed`
    gives where records end in each piece (just after each record's line end). Each step
    jumps with a regular expression (to the next quote in a quoted field, to the next
    line end or delimiter-and-quote elsewhere), so a piece costs one step per quoted field
    and per record, not per character. A line end is the dialect's (LF, CRLF or a lone CR
    by default); a comment line (the comment character at a record's start) is skipped to
    its line end, its quotes unread."""

    def __init__(self, kind: type[AnyStr], delimiter: str = ",", escape: str = QUOTE, *,
                 dialect: Dialect | None = None) -> None:
        self.state: int = RECORD
        self._before_cr: int = START  # the state a CR that ends a piece was read in
        self._p = _Patterns.of(kind is bytes, Dialect.of(dialect, delimiter, escape))
        self._held: Any = None  # a piece's last bytes that may begin a delimiter

    def feed(self, data: AnyStr) -> list[int]:
        """Positions in `data` just after each line end that ends a record (a CR that ends
        one piece and is no CRLF ends its record at position 0 of the next). A delimiter of
        several bytes (one beyond ASCII, in UTF-8) may be cut between two pieces: the
        bytes that may begin it wait for the next piece."""
        held = self._held
        if held:
            self._held = None
            return [end - len(held) for end in self.feed(held + data)]
        cut = self._partial_delimiter(data)
        if cut:
            self._held = data[len(data) - cut:]
            return self._scan(data[:len(data) - cut])
        return self._scan(data)

    def _partial_delimiter(self, data: Any) -> int:
        """How many last bytes of `data` are the start of a delimiter of several bytes."""
        delimiter = self._p.delimiter
        for k in range(min(len(delimiter) - 1, len(data)), 0, -1):
            if data.endswith(delimiter[:k]):
                return k
        return 0

    def _scan(self, data: AnyStr) -> list[int]:
        p = self._p
        ends: list[int] = []
        pos, n, state = 0, len(data), self.state
        while pos < n:
            if state == AFTER_CR:  # was the CR that ended the last piece a line end?
                if data[:1] == p.lf:
                    pos, state = 1, RECORD
                    ends.append(1)
                elif p.lone_cr:
                    state = RECORD
                    ends.append(0)
                else:  # a CR alone is no line end (\r\n is): an ordinary character
                    state = COMMENT if self._before_cr == COMMENT else PLAIN
                continue
            if state == ESCAPED:  # the character after an escape, taken as it is
                pos, state = pos + 1, QUOTED
                continue
            if state == QUOTED:  # to the quote that closes the field or starts a ""
                pos = p.run.match(data, pos).end()  # type: ignore[union-attr]
                if pos < n:  # at a quote, or at an escape that ends `data`
                    state = ESCAPED if data[pos:pos + 1] == p.escape else AFTER_QUOTE
                    pos += 1
                continue
            char = data[pos:pos + 1]
            if state == AFTER_QUOTE:
                if char == p.quote and p.doubled:
                    pos, state = pos + 1, QUOTED
                elif data.startswith(p.delimiter, pos):
                    pos, state = pos + len(p.delimiter), START
                else:  # a line end, or (an error) anything else: read as in a plain field
                    state = PLAIN
                continue
            if state == RECORD:
                state = COMMENT if p.comment is not None and char == p.comment else START
            if state in (START, RECORD) and char in p.white:
                pos += 1  # white space before a value (ignoreLeadingWhiteSpace)
                continue
            if state == START and char == p.quote:
                pos, state = pos + 1, QUOTED
                continue
            # to the next line end (or, outside a comment, a delimiter and a quote)
            found = (p.line_end if state == COMMENT else p.jump).search(data, pos)
            if found is None:
                if state != COMMENT:
                    state = self._piece_end(data, pos, state)
                break
            pos = found.end()
            if found.group() == p.cr and p.pending_cr and pos == n:
                self._before_cr, state = state, AFTER_CR
            elif found.group() in p.line_ends:
                ends.append(pos)
                state = RECORD
            else:
                state = QUOTED
        self.state = state
        return ends

    def _piece_end(self, data: Any, pos: int, state: int) -> int:
        """The state at the end of a piece with no line end after `pos`: at a field's start
        when it ends with the delimiter (and white space, when that is ignored)."""
        k = len(data)
        while k > pos and data[k - 1:k] in self._p.white:
            k -= 1
        if k == pos:
            return state if state in (START, PLAIN) else PLAIN
        return START if data[pos:k].endswith(self._p.delimiter) else PLAIN

    @property
    def pending(self) -> bool:
        """Whether the last piece ended with a CR whose meaning the next one tells."""
        return self.state == AFTER_CR


class _Patterns:
    """The scanner's expressions and characters, for str or for bytes."""

    def __init__(self, binary: bool, dialect: Dialect) -> None:
        d, q = re.escape(dialect.delimiter), re.escape(dialect.quote)
        white = f"[{re.escape(dialect.white)}]*" if dialect.ignore_leading else ""
        ends = line_end_pattern(dialect.line_sep)
        # a CR that ends a piece may begin a CRLF: matched alone, the next piece decides
        if dialect.line_sep == "\r\n":
            ends += r"|\r\Z"
        run, jump = quoted_run(dialect.escape, dialect.quote), f"{ends}|{d}{white}{q}"
        enc = (lambda t: t.encode(dialect.encoding)) if binary else (lambda t: t)
        self.run: re.Pattern[Any] = re.compile(enc(run))
        self.jump: re.Pattern[Any] = re.compile(enc(jump))
        self.line_end: re.Pattern[Any] = re.compile(enc(ends))
        self.quote, self.delimiter = enc(dialect.quote), enc(dialect.delimiter)
        self.lf, self.cr = enc("\n"), enc("\r")
        self.line_ends = {enc(e) for e in (["\r\n", "\r", "\n"] if dialect.line_sep is None
                                           else [dialect.line_sep])}
        self.lone_cr = dialect.line_sep is None  # a CR not before an LF ends a line
        self.pending_cr = dialect.line_sep in (None, "\r\n")
        self.comment = enc(dialect.comment) if dialect.comment else None
        self.doubled = dialect.doubled  # "" is a quote inside a quoted field
        self.escape = None if self.doubled else enc(dialect.escape)
        whites = dialect.white if dialect.ignore_leading else ""
        self.white: Any = {enc(c) for c in whites}

    @staticmethod
    @functools.lru_cache(maxsize=16)
    def of(binary: bool, dialect: Dialect) -> _Patterns:
        return _Patterns(binary, dialect)


def join_records(lines: Iterable[AnyStr], delimiter: str = ",", escape: str = QUOTE, *,
                 dialect: Dialect | None = None) -> Iterator[tuple[int, AnyStr]]:
    """Physical lines (with or without their line ends) as records: (index of the record's
    first line, record text without its line end). A line that ends inside a quoted field
    continues on the next; a quote never closed makes the rest one record."""
    dialect = Dialect.of(dialect, delimiter, escape)
    scanner: QuoteScanner[Any] | None = None
    parts: list[Any] = []
    first, added = 0, False
    newline: Any = None
    sep = dialect.line_sep or "\n"
    for index, line in enumerate(lines):
        binary = isinstance(line, bytes)
        newline = sep.encode() if binary else sep
        if scanner is None:
            scanner = QuoteScanner(bytes if binary else str, dialect=dialect)
        # a line end added where the line has none: it is no part of the text
        cr: Any = b"\r" if binary else "\r"  # by default a lone CR ends a line too
        added = not line.endswith(newline) and not (dialect.line_sep is None
                                                    and line.endswith(cr))
        piece = line + newline if added else line
        start = 0
        for end in scanner.feed(piece):  # a line may hold several (a lone CR ends one)
            if not parts:
                first = index
            parts.append(piece[start:end])
            start = end
            text = piece[:0].join(parts)
            yield first, (text[:-len(newline)] if added and end == len(piece) else
                          strip_line_end(text, dialect.line_sep))
            parts = []
        if start < len(piece):
            if not parts:
                first = index
            parts.append(piece[start:])
    if parts:  # a quote never closed: the rest is one record
        text = parts[0][:0].join(parts)
        yield first, text[:-len(newline)] if added else strip_line_end(text, dialect.line_sep)
