"""CSV as RFC 4180 reads it: the fields of a record, and where records end.

A field is either plain (no quote, no line break, no delimiter) or quoted: it starts with
a quote, holds anything (delimiters, line breaks, ``""`` for a quote) and ends with a
quote followed by the delimiter or the end of the record. A record ends at a newline
outside a quoted field, so one record may span several physical lines; its text keeps
the line breaks inside quoted fields as written (LF or CRLF).

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
from typing import Any, AnyStr, Generic

QUOTE = '"'

# Scanner states: at a field's start, in a plain field, in a quoted field, just after a
# quote inside a quoted field (the next character tells an escaped quote from the end),
# just after an escape inside a quoted field (the next character is taken as it is).
START, PLAIN, QUOTED, AFTER_QUOTE, ESCAPED = range(5)


class CsvError(ValueError):
    """A record that is not RFC 4180 CSV (the message never quotes the record's values)."""


def quoted_run(escape: str = QUOTE) -> str:
    """The text inside a quoted field, as an unrolled loop (linear time on any input)."""
    if escape == QUOTE:
        return '[^"]*(?:""[^"]*)*'
    e = re.escape(escape)
    return rf'[^"{e}]*(?:{e}[\s\S][^"{e}]*)*'


@functools.lru_cache(maxsize=16)
def _field(delimiter: str, escape: str) -> re.Pattern[str]:
    d = re.escape(delimiter)
    return re.compile(rf'"({quoted_run(escape)})"|([^"{d}\r\n]*)')


@functools.lru_cache(maxsize=16)
def _unescape(escape: str) -> re.Pattern[str]:
    e = re.escape(escape)
    return re.compile(rf'{e}([{e}"])')


def split_record(text: str, delimiter: str = ",", escape: str = QUOTE
                 ) -> list[tuple[str, bool]]:
    """The fields of one record (its text without the line end) as (value, quoted)."""
    pattern = _field(delimiter, escape)
    fields: list[tuple[str, bool]] = []
    pos, n = 0, len(text)
    while True:
        m = pattern.match(text, pos)
        assert m is not None  # the plain alternative matches the empty string
        quoted = m.group(1) is not None
        if not quoted:
            value = m.group(2)
        elif escape == QUOTE:
            value = m.group(1).replace('""', '"')
        else:
            value = _unescape(escape).sub(r"\1", m.group(1))
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
        elif text[end] != QUOTE:
            why = "a line break in an unquoted field"
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


def strip_line_end(text: AnyStr) -> AnyStr:
    """A record's text (str or bytes) without its line end (LF, or CRLF)."""
    lf, cr = (b"\n", b"\r") if isinstance(text, bytes) else ("\n", "\r")
    if text.endswith(lf):
        text = text[:-1]
        if text.endswith(cr):
            text = text[:-1]
    return text


class QuoteScanner(Generic[AnyStr]):
    """The quote state machine over text (str) or bytes fed piece by piece: :meth:`feed`
    gives where records end in each piece (just after each record's newline). Each step
    jumps with a regular expression (to the next quote in a quoted field, to the next
    newline or delimiter-and-quote elsewhere), so a piece costs one step per quoted field
    and per record, not per character."""

    def __init__(self, kind: type[AnyStr], delimiter: str = ",", escape: str = QUOTE
                 ) -> None:
        self.state: int = START
        self._p = _Patterns.of(kind is bytes, delimiter, escape)

    def feed(self, data: AnyStr) -> list[int]:
        """Positions in `data` just after each newline that ends a record."""
        p = self._p
        ends: list[int] = []
        pos, n, state = 0, len(data), self.state
        while pos < n:
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
                pos += 1
                state = QUOTED if char == p.quote and p.doubled else START if char in (
                    p.delimiter, p.newline) else PLAIN
                if char == p.newline:
                    ends.append(pos)
                continue
            if state == START and char == p.quote:
                pos, state = pos + 1, QUOTED
                continue
            found = p.jump.search(data, pos)  # the next newline, or a delimiter and a quote
            if found is None:
                state = START if data[n - 1:n] == p.delimiter else PLAIN
                break
            pos = found.end()
            if found.group() == p.newline:
                ends.append(pos)
                state = START
            else:
                state = QUOTED
        self.state = state
        return ends


class _Patterns:
    """The scanner's expressions and characters, for str or for bytes."""

    def __init__(self, binary: bool, delimiter: str, escape: str) -> None:
        d = re.escape(delimiter)
        run, jump = quoted_run(escape), rf'\n|{d}"'
        enc = (lambda t: t.encode()) if binary else (lambda t: t)
        self.run: re.Pattern[Any] = re.compile(enc(run))
        self.jump: re.Pattern[Any] = re.compile(enc(jump))
        self.quote, self.newline, self.delimiter = enc(QUOTE), enc("\n"), enc(delimiter)
        self.doubled = escape == QUOTE  # "" is a quote inside a quoted field
        self.escape = None if self.doubled else enc(escape)

    @staticmethod
    @functools.lru_cache(maxsize=16)
    def of(binary: bool, delimiter: str, escape: str) -> _Patterns:
        return _Patterns(binary, delimiter, escape)


def join_records(lines: Iterable[AnyStr], delimiter: str = ",", escape: str = QUOTE
                 ) -> Iterator[tuple[int, AnyStr]]:
    """Physical lines (with or without their line ends) as records: (index of the record's
    first line, record text without its line end). A line that ends inside a quoted field
    continues on the next; a quote never closed makes the rest one record."""
    scanner: QuoteScanner[Any] | None = None
    parts: list[Any] = []
    first = 0
    for index, line in enumerate(lines):
        binary = isinstance(line, bytes)
        newline: Any = b"\n" if binary else "\n"
        if scanner is None:
            scanner = QuoteScanner(bytes if binary else str, delimiter, escape)
        if not parts:
            first = index
        piece = line if line.endswith(newline) else line + newline
        parts.append(piece)
        ends = scanner.feed(piece)
        if ends and ends[-1] == len(piece):
            yield first, strip_line_end(piece[:0].join(parts))
            parts = []
    if parts:
        yield first, strip_line_end(parts[0][:0].join(parts))
