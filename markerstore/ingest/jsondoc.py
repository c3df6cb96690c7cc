"""A JSON file read as one document (Spark's ``multiLine``): where its records are.

A document whose top-level value is an array of balanced brackets has one record per
element (each element's text, which may span lines, is parsed as a JSON-lines record is:
an object is a row or an error record, anything else an error record). Any other document
(one object, a scalar, or text that is no single JSON value, such as JSON lines or an
array with an empty element) is one record, the document itself, which then parses or
fails as a whole: nothing in it is guessed.

The element boundaries are found vectorized over the bytes: the quotes that bound strings
(those not escaped by an odd run of backslashes) pair up, brackets and commas between a
pair are text, the bracket depth is a cumulative sum over the brackets outside strings,
and the elements are separated by the commas at depth one. The masks and depths are
computed a 1 MiB chunk at a time (the quote count and depth carried from one chunk to the
next), so what is held beyond the document is the positions of its quotes and backslashes
(4 bytes each) and of the elements found, whatever its nesting (16 MiB of brackets: +33
MiB; it was 40 times the document).
"""

from __future__ import annotations

import re

import numpy as np

_SOLID = re.compile(rb"[^ \t\r\n]")
_BLANK = b" \t\r\n"
_IS_BLANK = np.zeros(256, dtype=bool)
_IS_BLANK[list(_BLANK)] = True
_QUOTE, _COMMA, _BACKSLASH = ord('"'), ord(","), ord("\\")
_STEPS = 64  # whitespace bytes trimmed vectorized around an element; then one by one
_CHUNK = 1 << 20  # bytes of the document scanned at a time

Spans = tuple[np.ndarray, np.ndarray]


def _none() -> Spans:
    return np.zeros(0, np.int64), np.zeros(0, np.int64)


def record_spans(data: bytes, begin: int = 0) -> Spans:
    """(starts, stops) of the records of the JSON document `data[begin:]`, whitespace
    around each left out: the elements of a top-level array, or the whole document; none
    for a blank document or an empty array."""
    found = _SOLID.search(data, begin)
    if found is None:
        return _none()
    first, last = found.start(), len(data.rstrip(_BLANK)) - 1
    whole = np.array([first], np.int64), np.array([last + 1], np.int64)
    if data[first] != ord("[") or data[last] != ord("]"):
        return whole
    region = np.frombuffer(data, dtype=np.uint8)[first:last + 1]
    quotes = _unescaped_quotes(region)
    if len(quotes) % 2:  # a string that never closes
        return whole
    separators = _separators(region, quotes)
    if separators is None:
        return whole
    starts, stops = _trim(data, region, separators[:-1] + 1, separators[1:].copy(), first)
    if len(separators) == 2 and starts[0] >= stops[0]:  # []
        return _none()
    if (starts >= stops).any():  # [1,,2] or a trailing comma: no JSON array
        return whole
    return starts + first, stops + first


def _where(region: np.ndarray, byte: int) -> np.ndarray:
    """Positions of `byte` in `region`, found a chunk at a time (int32 where they fit)."""
    kind = np.dtype(np.int32 if len(region) < 2**31 else np.int64)
    found = [np.add(np.flatnonzero(region[a:a + _CHUNK] == byte), a, dtype=kind)
             for a in range(0, len(region), _CHUNK)]
    return np.concatenate(found) if found else np.zeros(0, kind)


def _unescaped_quotes(region: np.ndarray) -> np.ndarray:
    """Positions of the quotes that open or close a string: those after an even run of
    backslashes (none included)."""
    quotes = _where(region, _QUOTE)
    slashes = _where(region, _BACKSLASH)
    if len(slashes) == 0 or len(quotes) == 0:
        return quotes
    breaks = np.flatnonzero(np.diff(slashes) != 1)  # runs of consecutive backslashes
    ends = np.append(slashes[breaks], slashes[-1])
    lengths = ends - np.concatenate([[slashes[0]], slashes[breaks + 1]]) + 1
    run = np.searchsorted(ends, quotes - 1)  # the run that may end just before a quote
    run = np.minimum(run, len(ends) - 1)
    escaped = (ends[run] == quotes - 1) & (lengths[run] % 2 == 1)
    return quotes[~escaped]


def _separators(region: np.ndarray, quotes: np.ndarray) -> np.ndarray | None:
    """Positions of the array's own brackets and of the commas between its elements (in
    `region`; `quotes` bound its strings), or None if the array does not close at its
    end alone. Read a chunk at a time, the depth carried from one to the next: what is
    held is one chunk's masks and depths, and the commas found."""
    found, depth, size = [], 0, len(region)
    for a in range(0, size, _CHUNK):
        chunk = region[a:a + _CHUNK]
        lo, hi = np.searchsorted(quotes, [a, a + len(chunk)])
        marks = np.zeros(len(chunk), np.int8)
        marks[quotes[lo:hi] - a] = 1
        outside = (np.cumsum(marks, dtype=np.int32) + lo) % 2 == 0  # after even quotes
        step = np.zeros(len(chunk), np.int8)
        step[(chunk == ord("[")) | (chunk == ord("{"))] = 1
        step[(chunk == ord("]")) | (chunk == ord("}"))] = -1
        step[~outside] = 0
        depths = np.cumsum(step, dtype=np.int64) + depth
        last = a + len(chunk) == size
        inner = depths[:-1] if last else depths  # the depth before the array's end
        if (len(inner) and inner.min() < 1) or (last and depths[-1] != 0):
            return None
        found.append(np.flatnonzero((chunk == _COMMA) & outside & (depths == 1)) + a)
        depth = int(depths[-1])
    return np.concatenate([[0], *found, [size - 1]]).astype(np.int64)


def _trim(data: bytes, region: np.ndarray, starts: np.ndarray, stops: np.ndarray,
          first: int) -> Spans:
    """Each span [start, stop) of `region` without the whitespace around it: a few steps
    for all spans at once, then a search for each span still starting or ending blank."""
    for _ in range(_STEPS):
        blank = (starts < stops) & _IS_BLANK[region[np.minimum(starts, len(region) - 1)]]
        if not blank.any():
            break
        starts[blank] += 1
    for _ in range(_STEPS):
        blank = (stops > starts) & _IS_BLANK[region[np.maximum(stops - 1, 0)]]
        if not blank.any():
            break
        stops[blank] -= 1
    for i in np.flatnonzero((starts < stops) & _IS_BLANK[region[np.minimum(
            starts, len(region) - 1)]]):
        found = _SOLID.search(data, first + int(starts[i]), first + int(stops[i]))
        starts[i] = stops[i] if found is None else found.start() - first
    for i in np.flatnonzero((stops > starts) & _IS_BLANK[region[np.maximum(stops - 1, 0)]]):
        stops[i] = len(data[first + int(starts[i]):first + int(stops[i])].rstrip(_BLANK)) \
            + starts[i]
    return starts, stops
