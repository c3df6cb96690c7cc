"""Source files in another character encoding than UTF-8 (Spark's `encoding`, alias
`charset`): their records are read as UTF-8 text, each record's own bytes kept for an
error record.

Single-byte encodings (ISO-8859-1, Windows-1252) keep every newline where it is, so
records are found in the file's bytes as for UTF-8 and only their text is transcoded, a
block at a time (:func:`transcode_spans`). A byte the encoding does not define (five in
Windows-1252) makes its record an ``encoding`` error record.

UTF-16 (with a byte order mark, or UTF-16LE / UTF-16BE) has two-byte newlines, so the
stream is transcoded to UTF-8 before records are found (:class:`Utf16Stream`); a file is
then read whole by one task, and the byte offsets of its records are those of the UTF-8
text. A lone surrogate makes its record an ``encoding`` error record holding the record's
bytes in the file's encoding.
"""

from __future__ import annotations

import codecs
from functools import lru_cache
from typing import Any

import numpy as np

UTF8 = "utf-8"
SINGLE_BYTE = ("iso-8859-1", "windows-1252")
UTF16 = ("utf-16", "utf-16le", "utf-16be")
_CODEC = {"iso-8859-1": "latin-1", "windows-1252": "cp1252", "utf-16": "utf-16",
          "utf-16le": "utf-16-le", "utf-16be": "utf-16-be", UTF8: "utf-8"}


def codec(encoding: str) -> str:
    """Python's codec of an encoding named here."""
    return _CODEC[encoding]


@lru_cache(maxsize=4)
def _extra_bytes(encoding: str) -> np.ndarray:
    """For each byte, how many more bytes its character takes in UTF-8 (a byte the
    encoding leaves undefined stays one byte, which is no UTF-8)."""
    extra = np.zeros(256, dtype=np.int64)
    for b in range(128, 256):
        text = bytes([b]).decode(codec(encoding), "surrogateescape")
        extra[b] = len(text.encode("utf-8", "surrogateescape")) - 1
    return extra


def transcode_spans(data: bytes, starts: np.ndarray, stops: np.ndarray, encoding: str
                    ) -> tuple[bytes, np.ndarray, np.ndarray]:
    """`data` (a single-byte encoding) as UTF-8, and the records' spans in it. A byte the
    encoding does not define is kept as it is: no UTF-8, so its record is set apart."""
    raw = np.frombuffer(data, dtype=np.uint8)
    high = np.flatnonzero(raw >= 0x80)
    if len(high) == 0:
        return data, starts, stops
    text = data.decode(codec(encoding), "surrogateescape").encode("utf-8", "surrogateescape")
    grown = np.concatenate([[0], np.cumsum(_extra_bytes(encoding)[raw[high]])])

    def moved(positions: np.ndarray) -> np.ndarray:
        return positions + grown[np.searchsorted(high, positions, side="left")]

    return text, moved(starts), moved(stops)


class Utf16Stream:
    """A file object's UTF-16 bytes read as UTF-8: ``read(n)`` gives up to `n` bytes of
    the UTF-8 text (fewer only at the end), decoded chunk by chunk; a lone surrogate
    passes through as bytes that are no UTF-8, and so does an odd last byte."""

    def __init__(self, handle: Any, encoding: str) -> None:
        self.handle = handle
        self.decoder = codecs.getincrementaldecoder(codec(encoding))("surrogatepass")
        self.encoding = codec(encoding)  # the bytes' order, once a BOM says it
        self.done = False
        self.pending = b""

    def _more(self, size: int) -> None:
        chunk = self.handle.read(max(size, 1 << 16))
        if self.encoding == "utf-16":
            self.encoding = "utf-16-be" if chunk.startswith(b"\xfe\xff") else "utf-16-le"
        try:
            text = self.decoder.decode(chunk, final=not chunk)
            self.pending += text.encode("utf-8", "surrogatepass")
        except UnicodeDecodeError:  # an odd last byte: no UTF-16, nor UTF-8 once read
            self.pending += b"\xff"
            self.done = True
        self.done = self.done or not chunk

    def read(self, size: int = -1) -> bytes:
        while not self.done and (size < 0 or len(self.pending) < size):
            self._more(size)
        if size < 0:
            size = len(self.pending)
        data, self.pending = self.pending[:size], self.pending[size:]
        return data

    def original(self, data: bytes) -> bytes:
        """The bytes a record had in the file, from its UTF-8 transcoding."""
        name = "utf-16-le" if self.encoding == "utf-16" else self.encoding
        return data.decode("utf-8", "surrogatepass").encode(name, "surrogatepass")
