"""A JSON file read as one document (Spark's ``multiLine``): where its records are.

A document whose top-level value is an array of balanced brackets has one record per
element (each element's text, which may span lines, is parsed as a JSON-lines record is:
an object is a row or an error record, anything else an error record). Any other document
(one object, a scalar, or text that is no single JSON value, such as JSON lines or an
array with an empty element) is one record, the document itself, which then parses or
fails as a whole: nothing in it is guessed.

The element boundaries are found vectorized over the bytes: strings are masked out (their
brackets and commas are text), the bracket depth is a cumulative sum, and the elements
are separated by the commas at depth one.
"""

from __future__ import annotations

import re

import numpy as np

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SPACE = np.array([ord(c) for c in " \t\r\n"], dtype=np.uint8)
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))
_COMMA, _QUOTE = ord(","), ord('"')


def _nonblank(raw: np.ndarray, begin: int) -> np.ndarray:
    """Positions (from `begin`) of the bytes that are not JSON whitespace."""
    return begin + np.flatnonzero(~np.isin(raw[begin:], _SPACE))


def record_spans(data: bytes, begin: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(starts, stops) of the records of the JSON document `data[begin:]`, whitespace
    around each left out: the elements of a top-level array, or the whole document; none
    for a blank document or an empty array."""
    raw = np.frombuffer(data, dtype=np.uint8)
    solid = _nonblank(raw, begin)
    if len(solid) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first, last = int(solid[0]), int(solid[-1])
    whole = np.array([first], np.int64), np.array([last + 1], np.int64)
    if raw[first] != _OPEN[0] or raw[last] != _CLOSE[0]:
        return whole
    masked = raw[first:last + 1].copy()
    for match in _STRING.finditer(data, first, last + 1):
        masked[match.start() - first:match.end() - first] = 0
    if (masked == _QUOTE).any():  # a string that never closes
        return whole
    depth = np.cumsum(np.isin(masked, _OPEN).astype(np.int64)
                      - np.isin(masked, _CLOSE).astype(np.int64))
    if depth[-1] != 0 or depth[:-1].min() < 1:  # the array must close at the end alone
        return whole
    commas = first + np.flatnonzero((masked == _COMMA) & (depth == 1))
    bounds = np.concatenate([[first], commas, [last]])  # separators: [ , , ... ]
    lo, hi = bounds[:-1] + 1, bounds[1:]  # each element between two separators
    at = np.searchsorted(solid, lo)  # its first byte that is not whitespace
    starts = solid[np.minimum(at, len(solid) - 1)]
    stops = solid[np.maximum(np.searchsorted(solid, hi) - 1, 0)] + 1
    empty = starts >= hi
    if len(commas) == 0 and empty.all():  # []
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if empty.any():  # [1,,2] or a trailing comma: no JSON array
        return whole
    return starts.astype(np.int64), stops.astype(np.int64)
