"""One JSON-lines record read as RFC 8259 says, however hostile: a dict, or an
:class:`InvalidJson` whose message says what is wrong (it never quotes a value).

- Nesting deeper than :data:`MAX_DEPTH` arrays and objects is refused before parsing (the
  recursive parsers would otherwise raise RecursionError at a depth that depends on the
  stack); a RecursionError anywhere is refused the same way.
- A key twice in one object, at any depth, is refused: which value was meant is unknown.
- A number whose magnitude no double can hold (``1e400``) is refused rather than read as
  infinity; an integer beyond int64 is read exactly (the cast to the column decides),
  and a number with a fraction keeps its text (:class:`JsonFloat`), so a DECIMAL column
  reads it exactly as written, as Spark's JSON reader does.
- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON; they are read as doubles when
  `allow_non_numeric` (Spark's ``allowNonNumericNumbers``, default true), else refused.
- A lone surrogate escape (``"\\ud800"``) is refused: no UTF-8 text can hold it.
- `text_columns`: a value that is not a string (number, boolean, array, object) for one of
  these keys is replaced by its JSON text exactly as the record writes it, as Spark's JSON
  reader does for a STRING column.
- `binary_columns`: a string for one of these keys is :class:`Base64Text`: the bytes of a
  BINARY column are base64 in JSON, as Spark's JSON writer writes them and its reader
  reads them (RFC 4648; text that is not base64 is a cast error).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Collection
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from markerstore.values.shapes import ShapeError

MAX_DEPTH = 512
_CHUNK = 1 << 20  # bytes :func:`nesting_depth` scans at a time

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SPACE = re.compile(r"[ \t\n\r]*")


class InvalidJson(ShapeError):
    """A JSON-lines record that is not one JSON object this reader accepts (its text holds
    no value of the record; `safe` leaves out a key it names)."""


def nesting_depth(text: str) -> int:
    """How deep arrays and objects nest in `text` (brackets inside strings ignored)."""
    import numpy as np

    codes = np.frombuffer(_STRING.sub("", text).encode("utf-8", "surrogatepass"), np.uint8)
    deepest = depth = 0
    for at in range(0, len(codes), _CHUNK):  # a chunk at a time: memory a few chunks
        chunk = codes[at:at + _CHUNK]
        step = np.zeros(len(chunk), np.int8)
        step[(chunk == ord("[")) | (chunk == ord("{"))] = 1
        step[(chunk == ord("]")) | (chunk == ord("}"))] = -1
        depths = np.cumsum(step, dtype=np.int64) + depth
        deepest, depth = max(deepest, int(depths.max())), int(depths[-1])
    return deepest


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise InvalidJson(f"key {json.dumps(key)} appears twice in one object",
                                  "a key appears twice in one object")
            seen.add(key)
    return value


class JsonFloat(float):
    """A JSON number with a fraction or an exponent: its double, which is what every
    reader of a float sees, and its `text`, which a DECIMAL column reads exactly."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> JsonFloat:
        value = super().__new__(cls, text)
        value.text = text
        return value


class Base64Text(str):
    """A JSON string for a BINARY column: its bytes, in base64."""

    __slots__ = ()


def _finite(text: str) -> float:
    value = JsonFloat(text)
    if math.isinf(value):
        raise InvalidJson("a number too large in magnitude for a double")
    return value


def _non_numeric(token: str) -> float:
    raise InvalidJson(f"{token} is not a JSON number (allowNonNumericNumbers is false)")


@functools.lru_cache(maxsize=2)
def _decoder(allow_non_numeric: bool) -> json.JSONDecoder:
    if allow_non_numeric:
        return json.JSONDecoder(object_pairs_hook=_unique, parse_float=_finite)
    return json.JSONDecoder(object_pairs_hook=_unique, parse_float=_finite,
                            parse_constant=_non_numeric)


def load_object(text: str, allow_non_numeric: bool = True,
                text_columns: Collection[str] = (),
                binary_columns: Collection[str] = ()) -> dict[str, Any]:
    """The JSON object on one line (`text` stripped of surrounding whitespace)."""
    if text.startswith("\ufeff"):
        raise InvalidJson("a byte order mark (BOM, U+FEFF) before the JSON text (one at the "
                          "start of a file is dropped; elsewhere it is an error)")
    brackets = text.count("[") + text.count("{")
    if brackets > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        raise InvalidJson(f"arrays and objects nested deeper than {MAX_DEPTH} levels")
    decoder = _decoder(allow_non_numeric)
    try:
        value = decoder.decode(text)
    except RecursionError:
        raise InvalidJson(f"arrays and objects nested deeper than {MAX_DEPTH} levels") \
            from None
    if not isinstance(value, dict):
        raise InvalidJson(f"expected a JSON object, got {type(value).__name__}")
    if "\\u" in text:  # a lone surrogate escape is no text Arrow can hold
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidJson("a lone surrogate escape (\\ud800-\\udfff), which no UTF-8 "
                              "text can hold") from None
    keys = [k for k in text_columns if k in value and value[k] is not None
            and not isinstance(value[k], str)]
    if keys:
        value.update(member_texts(text, set(keys), decoder))
    for key in binary_columns:
        if isinstance(value.get(key), str):
            value[key] = Base64Text(value[key])
    return value


def member_texts(text: str, keys: Collection[str], decoder: json.JSONDecoder
                 ) -> dict[str, str]:
    """The JSON text of the top-level members `keys` of the object `text` (already known
    to parse), exactly as written."""
    found: dict[str, str] = {}
    pos = _SPACE.match(text, 0).end() + 1  # type: ignore[union-attr]  # after "{"
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if text[pos] == "}":
            return found
        key, pos = scanstring(text, pos + 1)
        pos = _SPACE.match(text, pos).end() + 1  # type: ignore[union-attr]  # after ":"
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        _, end = decoder.raw_decode(text, pos)
        if key in keys:
            found[key] = text[pos:end]
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text[pos] == ",":
            pos += 1
