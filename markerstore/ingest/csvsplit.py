"""Where the CSV records of a block end, vectorized: the ends errortable's
:class:`~errortable.csvtext.QuoteScanner` finds, without Python per line.

A newline ends a record unless it lies inside a quoted field. Each physical line maps the
state at its start (inside a quoted field or not) to the state at its end: a line without
a quote keeps it, and for a line with quotes two regular expressions (Arrow's RE2, over
those lines only) tell the state at its end when it starts outside and when it starts
inside a quoted field. The state after every line is then the composition of those maps,
done with cumulative sums: each map is constant, the identity or a flip. A block without
a quote costs one scan for quotes.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_QUOTE, _NEWLINE = ord('"'), ord("\n")


def re2_char(char: str) -> str:
    """`char` as a literal in an RE2 expression, in a character class too."""
    return char if char.isalnum() else f"\\x{{{ord(char):02x}}}"


@functools.lru_cache(maxsize=16)
def _patterns(delimiter: str, escape: str = '"') -> tuple[str, str]:
    """(ends inside a quoted field when the line starts outside one, the same when it starts
    inside one): RE2 expressions over a line without its newline. With an escape other
    than the quote, an escape at the line's end escapes its newline (still inside)."""
    d = re2_char(delimiter)
    if escape == '"':
        quoted, end = '[^"]*(?:""[^"]*)*', "$"
        tail = f'(?:[^{d}"][^{d}]*)?'  # after a closing quote: ordinary characters
    else:
        e = re2_char(escape)
        quoted, end = f'[^"{e}]*(?:{e}.[^"{e}]*)*', f"{e}?$"
        tail = f"[^{d}]*"
    field = f'(?:"{quoted}"{tail}|[^{d}"][^{d}]*)?'
    opened = f'"{quoted}{end}'  # a quoted field still open at the line's end
    from_outside = f"^(?:{field}{d})*{opened}"
    from_inside = f'^{quoted}(?:"{tail}{d}(?:{field}{d})*{opened}|{end})'
    return from_outside, from_inside


def newlines_of(data: bytes) -> np.ndarray:
    """The positions of the newlines in `data`."""
    return np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == _NEWLINE)


def record_ends(data: bytes, final: bool, delimiter: str = ",",
                newlines: np.ndarray | None = None, escape: str = '"') -> np.ndarray:
    """Positions just after each complete record of `data` (which starts at a record's
    start): just after each newline outside a quoted field, and the end of `data` when
    `final` and the last record has no newline (or its quote never closed). `newlines`:
    the newlines of `data`, when known."""
    if newlines is None:
        newlines = newlines_of(data)
    if b'"' not in data:  # no quote: every newline ends a record
        ends = newlines + 1
    else:
        ends = _outside(data, np.frombuffer(data, dtype=np.uint8), newlines, delimiter,
                        escape)
    if final and len(data) and (len(ends) == 0 or ends[-1] != len(data)):
        ends = np.append(ends, len(data))
    return ends.astype(np.int64)


def _outside(data: bytes, raw: np.ndarray, newlines: np.ndarray, delimiter: str,
             escape: str = '"') -> np.ndarray:
    """The ends of the newlines that lie outside quoted fields."""
    quotes = np.flatnonzero(raw == _QUOTE)
    line_ends = newlines + 1
    if len(quotes) == 0 or len(newlines) == 0:
        return line_ends
    line_of = np.searchsorted(newlines, quotes)  # the line holding each quote
    lines = np.unique(line_of[line_of < len(newlines)])
    if len(lines) == 0:
        return line_ends
    starts = np.concatenate([[0], line_ends[:-1]]).astype(np.int64)
    offsets = np.empty(2 * len(lines), dtype=np.int64)
    offsets[0::2], offsets[1::2] = starts[lines], newlines[lines]
    # Each quoted line is the pair (start, newline) of a binary array over `data`; the
    # entries between pairs (newline, next start) are dropped by taking the even ones.
    spans = pa.Array.from_buffers(pa.large_binary(), len(offsets) - 1,
                                  [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    texts = spans.take(pa.array(np.arange(0, len(offsets) - 1, 2)))
    outside_open, inside_open = _patterns(delimiter, escape)
    from_out = np.zeros(len(newlines), dtype=bool)  # no quote: stays outside
    from_in = np.ones(len(newlines), dtype=bool)  # no quote: stays inside
    from_out[lines] = pc.match_substring_regex(texts, outside_open).to_numpy(
        zero_copy_only=False)
    from_in[lines] = pc.match_substring_regex(texts, inside_open).to_numpy(
        zero_copy_only=False)
    return line_ends[~_compose(from_out, from_in)]


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
