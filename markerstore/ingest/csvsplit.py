"""Where the CSV records of a block end, vectorized: the ends errortable's
:class:`~markerstore.values.csv.QuoteScanner` finds, without Python per line.

A line end (the dialect's: by default each of LF, CRLF and a lone CR, :func:`line_ends_of`)
ends a record unless it lies inside a quoted field. The dialect
(:class:`markerstore.values.csv.Dialect`: separator, quote, escape, comment, line ends, white
space) is passed whole (``record_ends(..., dialect=...)``). Each physical line maps the
state at its start (inside a quoted field or not) to the state at its end: a line without
a quote keeps it, and for a line with quotes two regular expressions (Arrow's RE2, over
those lines only) tell the state at its end when it starts outside and when it starts
inside a quoted field. The state after every line is then the composition of those maps,
done with cumulative sums: each map is constant, the identity or a flip. A comment line
that starts outside a quoted field stays outside (its quotes are unread). A block without
a quote costs one scan for quotes.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.values.csv import Dialect

_NEWLINE, _CR = ord("\n"), ord("\r")


def re2_char(char: str) -> str:
    """`char` as a literal in an RE2 expression, in a character class too."""
    return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):02x}}}"


def re2_class(chars: str) -> str:
    """`chars` as the inside of an RE2 character class."""
    return "".join(re2_char(c) for c in chars)


@functools.lru_cache(maxsize=16)
def _patterns(delimiter: str, escape: str = '"', quote: str = '"', white: str = ""
              ) -> tuple[str, str]:
    """(ends inside a quoted field when the line starts outside one, the same when it starts
    inside one): RE2 expressions over a line without its line end. With an escape other
    than the quote, an escape at the line's end escapes its line end (still inside). With
    `white` (ignoreLeadingWhiteSpace), a quote after white space at a field's start opens
    a quoted field."""
    d, q = re2_char(delimiter), re2_char(quote)
    if escape == quote:
        quoted, end = f"[^{q}]*(?:{q}{q}[^{q}]*)*", "$"
        tail = f"(?:[^{d}{q}][^{d}]*)?"  # after a closing quote: ordinary characters
    else:
        e = re2_char(escape)
        quoted, end = f"[^{q}{e}]*(?:{e}.[^{q}{e}]*)*", f"{e}?$"
        tail = f"[^{d}]*"
    lead = f"[{re2_class(white)}]*" if white else ""
    first = f"[^{d}{q}{re2_class(white)}]"
    field = f"{lead}(?:{q}{quoted}{q}{tail}|{first}[^{d}]*)?"
    opened = f"{lead}{q}{quoted}{end}"  # a quoted field still open at the line's end
    from_outside = f"(?s)^(?:{field}{d})*{opened}"
    from_inside = f"(?s)^{quoted}(?:{q}{tail}{d}(?:{field}{d})*{opened}|{end})"
    return from_outside, from_inside


def newlines_of(data: bytes) -> np.ndarray:
    """The positions of the newlines in `data`."""
    return np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE)


def line_ends_of(data: bytes, line_sep: str | None = None, final: bool = True) -> np.ndarray:
    """The positions of the last byte of each line end in `data`: by default an LF, or a CR
    not followed by an LF (a CR that ends `data` only when `final`: the next bytes may
    begin with an LF); else the last byte of each `line_sep`."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if line_sep is None:
        if b"\r" not in data or (data.count(b"\r") == data.count(b"\r\n")
                                 and not data.endswith(b"\r")):
            return np.flatnonzero(raw == _NEWLINE)  # no CR alone: every line end has an LF
        lf = raw == _NEWLINE
        lone = raw == _CR
        lone[:-1] &= ~lf[1:]
        if not final:
            lone[-1] = False
        return np.flatnonzero(lf | lone)
    if line_sep == "\r\n":
        ends = np.flatnonzero(raw == _NEWLINE)
        return ends[(ends > 0) & (raw[np.maximum(ends - 1, 0)] == _CR)]
    return np.flatnonzero(raw == ord(line_sep))


def count_line_ends(before: bytes, piece: bytes, line_sep: str | None, final: bool) -> int:
    """How many line ends end in `piece`, read after the byte `before` (the last of the
    previous piece, whose CR may end a line only now: a CRLF cut in two, or a CR alone);
    counted, no positions held. A CR last ends a line only when `final`."""
    cr_before = before == b"\r"
    if line_sep is None:
        lone = piece.count(b"\r") - piece.count(b"\r\n")  # a CR not before a LF
        if piece.endswith(b"\r") and not final:
            lone -= 1  # a LF may follow
        alone = cr_before and piece[:1] != b"\n" and bool(piece or final)  # the CR before
        return piece.count(b"\n") + lone + int(alone)
    if line_sep == "\r\n":
        return piece.count(b"\r\n") + int(cr_before and piece[:1] == b"\n")
    return piece.count(line_sep.encode())


def record_ends(data: bytes, final: bool, delimiter: str = ",",
                newlines: np.ndarray | None = None, escape: str = '"', *,
                dialect: Dialect | None = None) -> np.ndarray:
    """Positions just after each complete record of `data` (which starts at a record's
    start): just after each line end outside a quoted field, and the end of `data` when
    `final` and the last record has no line end (or its quote never closed). `newlines`:
    the line ends of `data` (:func:`line_ends_of`), when known. `dialect` (else the
    `delimiter` and `escape`) says how the text is written."""
    dialect = Dialect.of(dialect, delimiter, escape)
    if newlines is None:
        newlines = line_ends_of(data, dialect.line_sep, final)
    if dialect.quote.encode() not in data:  # no quote: every line end ends a record
        ends = newlines + 1
    else:
        raw = np.frombuffer(data, dtype=np.uint8)
        quotes = np.flatnonzero(raw == ord(dialect.quote))
        by_parity = _by_parity(raw, quotes, newlines, dialect)
        # else a quote that is text, an escape, a comment line's quotes: line by line
        ends = (by_parity if by_parity is not None else
                _outside(data, raw, newlines, dialect, quotes))
    if final and len(data) and (len(ends) == 0 or ends[-1] != len(data)):
        ends = np.append(ends, len(data))
    return ends.astype(np.int64)


def _by_parity(raw: np.ndarray, quotes: np.ndarray, newlines: np.ndarray, dialect: Dialect
               ) -> np.ndarray | None:
    """The ends of the line ends outside quoted fields, by the parity of the quotes before
    them (:func:`parity_holds`); None where that parity is not the state."""
    if not parity_holds(raw, quotes, newlines, dialect):
        return None
    if 4 * len(quotes) < len(newlines):  # few quotes: the lines they span, a byte a line
        return newlines[_spanned(quotes, newlines) == 0] + 1
    flipped = np.searchsorted(quotes, newlines)  # the quotes before each line end
    flipped &= 1  # odd: inside a quoted field
    return newlines[flipped == 0] + 1


def _spanned(quotes: np.ndarray, newlines: np.ndarray) -> np.ndarray:
    """1 for each line end that lies between an odd quote and the next (inside a quoted
    field, by the parity), else 0: int8, where the quotes are few."""
    n = len(newlines)
    after = np.searchsorted(newlines, quotes)  # the line end that follows each quote
    opens, closes = after[0::2], after[1::2]
    if len(closes) < len(opens):
        closes = np.append(closes, n)  # open to the end
    spans = opens < closes  # (a field closed on its own line spans no line end)
    mark = np.zeros(n + 1, np.int8)
    mark[opens[spans]] += 1  # each index once: the spans are disjoint and in order
    mark[closes[spans]] -= 1
    return np.cumsum(mark[:n], dtype=np.int8)


def parity_holds(raw: np.ndarray, quotes: np.ndarray, newlines: np.ndarray | None,
                 dialect: Dialect, inside: bool = False) -> bool:
    """Whether, read from a line start (outside a quoted field, or inside one when
    `inside`), the state after each byte of `raw` is the parity of the quotes before it
    (`quotes`: their positions; `newlines`: the line ends').

    A quote read outside a quoted field opens one (at a field's start), and every quote
    read inside one closes it or (doubled) is the first of a pair; either way the state
    flips at each quote, as long as every quote that the parity places outside a quoted
    field opens one (or is the second of a doubled pair): it stands at a line start, right
    after the delimiter or (doubled) right after a quote. The first quote that breaks this
    rule is the first where the parity and the state part (a quote inside a plain field,
    after white space or after a closed field is text); so are an escape (other than the
    quote) before a quote inside a quoted field, and a comment line's quotes (unread).
    Any of those: False, and the lines are read one by one. (`newlines`: None when not
    known; only a dialect with a comment character needs them.)"""
    return parity_break(raw, quotes, newlines, dialect, inside) is None


def parity_break(raw: np.ndarray, quotes: np.ndarray, newlines: np.ndarray | None,
                 dialect: Dialect, inside: bool = False) -> int | None:
    """Where the parity stops being the state (:func:`parity_holds`): None where it never
    does; else the position of the first quote that the parity places outside a quoted
    field and that opens none (read as text: the state there is outside), or -1 where an
    escape or a comment line may be the first."""
    outside = quotes[int(inside)::2]  # the quotes the parity places outside
    before = raw[np.maximum(outside - 1, 0)]
    after_delimiter = np.ones(len(outside), dtype=bool)  # its bytes (one beyond ASCII:
    for k, byte in enumerate(reversed(dialect.delimiter_bytes), start=1):  # several)
        after_delimiter &= (outside >= k) & (raw[np.maximum(outside - k, 0)] == byte)
    opens = (outside == 0) | after_delimiter
    if dialect.doubled:
        opens |= before == ord(dialect.quote)
    first = None
    if not opens.all():
        rest = outside[~opens]
        text = rest[~_line_starts(raw, rest, dialect.line_sep)]
        first = int(text[0]) if len(text) else None
    if not dialect.doubled and _escapes_a_quote(raw, quotes, dialect, inside):
        return -1
    if dialect.comment:
        if newlines is None:
            newlines = line_ends_of(raw.tobytes(), dialect.line_sep)
        if _comment_quotes(raw, quotes, newlines, dialect.comment):
            return -1
    return first


def _line_starts(raw: np.ndarray, at: np.ndarray, line_sep: str | None) -> np.ndarray:
    """Whether each position `at` (> 0) of `raw` follows a line end: a LF or a CR (then a
    lone one) by default, else `line_sep`."""
    before = raw[at - 1]
    if line_sep is None:
        return (before == _NEWLINE) | (before == _CR)
    if len(line_sep) == 1:
        return before == ord(line_sep)
    return (at >= 2) & (before == _NEWLINE) & (raw[np.maximum(at - 2, 0)] == _CR)


def _escapes_a_quote(raw: np.ndarray, quotes: np.ndarray, dialect: Dialect,
                     inside: bool) -> bool:
    """Whether an escape inside a quoted field (by the quotes' parity) stands before a
    quote or an escape (then the parity may miscount)."""
    escapes = np.flatnonzero(raw == ord(dialect.escape))
    if len(escapes) == 0:
        return False
    quoted = ((np.searchsorted(quotes, escapes) + inside) & 1) == 1
    following = raw[np.minimum(escapes[quoted] + 1, len(raw) - 1)]
    return bool(((following == ord(dialect.quote)) | (following == ord(dialect.escape))
                 ).any())


def _comment_quotes(raw: np.ndarray, quotes: np.ndarray, newlines: np.ndarray,
                    comment: str) -> bool:
    """Whether a line that starts with the comment character holds a quote."""
    starts = np.concatenate([[0], newlines + 1])
    starts = starts[starts < len(raw)]
    starts = starts[raw[starts] == ord(comment)]
    if len(starts) == 0:
        return False
    stops = np.append(newlines, len(raw))[np.searchsorted(newlines, starts)]
    return bool((np.searchsorted(quotes, stops) > np.searchsorted(quotes, starts)).any())


def _outside(data: bytes, raw: np.ndarray, newlines: np.ndarray, dialect: Dialect,
             quotes: np.ndarray | None = None) -> np.ndarray:
    """The ends of the line ends that lie outside quoted fields."""
    if quotes is None:
        quotes = np.flatnonzero(raw == ord(dialect.quote))
    line_ends = newlines + 1
    if len(quotes) == 0 or len(newlines) == 0:
        return line_ends
    line_of = np.searchsorted(newlines, quotes)  # the line holding each quote
    lines = np.unique(line_of[line_of < len(newlines)])
    if len(lines) == 0:
        return line_ends
    starts = np.concatenate([[0], line_ends[:-1]]).astype(np.int64)
    if dialect.line_sep is not None and len(dialect.line_sep) == 2:  # \r\n: its CR too
        stops = newlines - 1
    else:
        stops = newlines
    offsets = np.empty(2 * len(lines), dtype=np.int64)
    offsets[0::2], offsets[1::2] = starts[lines], stops[lines]
    # Each quoted line is the pair (start, line end) of a binary array over `data`; the
    # entries between pairs (line end, next start) are dropped by taking the even ones.
    spans = pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                  [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    texts = spans.take(pa.array(np.arange(0, len(offsets) - 1, 2)))
    white = dialect.white if dialect.ignore_leading else ""
    delimiter = dialect.delimiter_bytes
    if len(delimiter) > 1:  # one character of several bytes (UTF-8): the lines with it as
        if b"\xff" in data:  # the one byte UTF-8 never holds (bytes that are no UTF-8:
            return _scanned(data, dialect)  # the scanner reads them)
        texts = pc.replace_substring(texts, delimiter, b"\xff")
        delimiter = b"\xff"
    outside_open, inside_open = _patterns(delimiter.decode("latin-1"), dialect.escape,
                                          dialect.quote, white)
    from_out = np.zeros(len(newlines), dtype=bool)  # no quote: stays outside
    from_in = np.ones(len(newlines), dtype=bool)  # no quote: stays inside
    from_out[lines] = pc.match_substring_regex(texts, outside_open).to_numpy(
        zero_copy_only=False)
    from_in[lines] = pc.match_substring_regex(texts, inside_open).to_numpy(
        zero_copy_only=False)
    if dialect.comment:  # a comment line that starts outside a quoted field stays outside
        from_out[lines[raw[starts[lines]] == ord(dialect.comment)]] = False
    return line_ends[~_compose(from_out, from_in)]


def _scanned(data: bytes, dialect: Dialect) -> np.ndarray:
    """The ends of the lines of `data` that end a record, by errortable's quote scanner."""
    from markerstore.values.csv import QuoteScanner

    return np.array(QuoteScanner(bytes, dialect=dialect).feed(data), dtype=np.int64)


def _compose(from_out: np.ndarray, from_in: np.ndarray) -> np.ndarray:
    """Whether each line ends inside a quoted field, the first starting outside: each line's
    map is constant (both the same), the identity (out, in) or a flip (in, out). After line
    k the state is the value of the last constant map j <= k, flipped once for every flip
    in (j, k]; before any constant map, the start (outside) flipped likewise."""
    n = len(from_out)
    constant = from_out == from_in
    flips = np.cumsum(from_out & ~from_in)
    last = np.maximum.accumulate(np.where(constant, np.arange(n), -1))
    seen = last >= 0
    at = np.where(seen, last, 0)
    value = np.where(seen, from_out[at], False)
    before = np.where(seen, flips[at], 0)
    return value ^ ((flips - before) % 2 == 1)


def without_line_ends(raw: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                      line_sep: str | None = None) -> np.ndarray:
    """Where each record ``raw[starts[i]:ends[i]]`` stops without its line end: an LF (and
    a CR before it), or a lone CR, by default; LF or CRLF with `line_sep` LF; else
    `line_sep`."""
    stops = ends.copy()

    def ending(byte: int, where: np.ndarray) -> np.ndarray:
        return where & (stops > starts) & (raw[np.maximum(stops - 1, 0)] == byte)

    if line_sep in (None, "\n"):
        has_lf = ending(_NEWLINE, np.ones(len(stops), dtype=bool))
        stops[has_lf] -= 1
        stops[ending(_CR, has_lf if line_sep else np.ones(len(stops), dtype=bool))] -= 1
        return stops
    at = ending(ord(line_sep[-1]), np.ones(len(stops), dtype=bool))
    if len(line_sep) == 2:  # \r\n: both, or neither
        at &= (stops - 1 > starts) & (raw[np.maximum(stops - 2, 0)] == _CR)
    stops[at] -= len(line_sep)
    return stops


def comment_records(raw: np.ndarray, starts: np.ndarray, stops: np.ndarray, comment: str
                    ) -> np.ndarray:
    """Whether each record ``raw[starts[i]:stops[i]]`` is a comment line (starts with
    `comment`, unless that is empty)."""
    if not comment or len(starts) == 0:
        return np.zeros(len(starts), dtype=bool)
    return (stops > starts) & (raw[np.minimum(starts, max(len(raw) - 1, 0))] ==
                               ord(comment))
