"""DuckDB's ``skip`` for CSV files: the first lines of a file that are no CSV (a title, a
note, the name of a statistics table), skipped before the header.

A skipped line ends at its first line end (the dialect's: LF, CRLF or a lone CR by
default, else ``lineSep``), its quotes unread: a title holding a stray quote opens no
quoted field. The driver finds where the file's CSV text starts (:func:`skipped`, over
the same bytes the tasks read: a UTF-16 file's UTF-8 transcoding), and each task reads
the file from there as if it began there (:class:`Skipped`): the first record is read
from outside a quoted field, a range's look-back ends there, the empty-line and header
rules apply from there, and nothing else of the readers changes. The offsets and line
numbers the readers report are then shifted back to the file's own
(:func:`markerstore.ingest.task.IngestTask.results`).
"""

from __future__ import annotations

import re
from typing import Any

from markerstore.errors import MarkerStoreError

CHUNK_BYTES = 64 * 1024


class SkippedTooLong(MarkerStoreError, ValueError):
    """The lines to skip are longer than the record size limit."""


def _line_end(line_sep: str | None) -> re.Pattern[bytes]:
    return re.compile(rb"\r\n|\r|\n" if line_sep is None else re.escape(line_sep.encode()))


def skipped(handle: Any, lines: int, line_sep: str | None, limit: int) -> tuple[int, int]:
    """(the offset after the first `lines` lines of `handle`, read from its start; how many
    lines that is: fewer in a file of fewer lines, whose end it then is). At most `limit`
    bytes are held (SkippedTooLong past it)."""
    if lines <= 0:
        return 0, 0
    pattern = _line_end(line_sep)
    data = b""
    while True:
        chunk = handle.read(CHUNK_BYTES)
        data += chunk
        ends = [m.end() for m in pattern.finditer(data)]
        if chunk and line_sep is None and data.endswith(b"\r"):
            ends = ends[:-1]  # a CR that ends what is read may begin a CRLF
        if len(ends) >= lines:
            return ends[lines - 1], lines
        if not chunk:  # the file's end: a last line without its line end is one
            return len(data), len(ends) + int(bool(data) and (not ends or ends[-1] < len(data)))
        if len(data) > limit:
            raise SkippedTooLong(f"the first {lines} line(s) hold more than {limit} bytes")


class Skipped:
    """A file object read from byte `base` on, as if the file began there: `read`, `seek`,
    `tell` and `size` count from `base` (a stream that cannot seek is read up to it);
    anything else is the file object's own."""

    def __init__(self, handle: Any, base: int) -> None:
        self._handle, self._base = handle, base
        if callable(getattr(handle, "seek", None)) and getattr(handle, "seekable",
                                                               lambda: True)():
            handle.seek(base)
        else:
            left = base
            while left > 0:
                got = handle.read(min(left, CHUNK_BYTES))
                if not got:
                    break
                left -= len(got)

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._handle.read(size)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            return int(self._handle.seek(self._base + offset)) - self._base
        return int(self._handle.seek(offset, whence)) - self._base

    def tell(self) -> int:
        return int(self._handle.tell()) - self._base

    @property
    def size(self) -> int | None:
        size = getattr(self._handle, "size", None)
        return None if size is None else int(size) - self._base

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)
