"""A line-oriented source task read as blocks of lines, as Arrow string arrays.

The same lines as :func:`markerstore.ingest.sources.read_lines`, with the same rules for
byte ranges (a range starts after the first newline at or after its start, unless it is
0, and ends with the line that crosses its end), but a block at a time: the bytes of a
block are decoded in one call (bad UTF-8 replaced, as read_lines does) and cut into lines
by Arrow, so no Python runs per line and memory stays bounded by the block size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.ingest.sources import SourceTask

BLOCK_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Block:
    """Lines of a task: `lines[i]` is line `first_line + i` of the task (1-based, counted
    from the task's start), without its line end."""

    first_line: int
    lines: pa.Array

    def __len__(self) -> int:
        return len(self.lines)


def split_lines(data: bytes) -> pa.Array:
    """The lines of `data` (complete lines; the last may lack its newline) as strings:
    decoded as UTF-8 (invalid bytes replaced), line ends stripped. The lines are views of
    one buffer: numpy finds the newlines, Arrow checks the UTF-8 and trims."""
    if not data:
        return pa.array([], pa.large_string())
    if not _is_utf8(data):  # invalid UTF-8 somewhere: replace it, as read_lines does
        data = data.decode("utf-8", "replace").encode("utf-8")
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    ends = newlines + 1
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    offsets = np.concatenate([[0], ends]).astype(np.int64)
    lines = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets),
                                             pa.py_buffer(data))
    return pc.utf8_rtrim(lines, characters="\r\n")


def _is_utf8(data: bytes) -> bool:
    try:
        pa.array([data], pa.large_binary()).cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _open(task: SourceTask, storage_options: dict[str, Any] | None) -> Any:
    compression = "infer" if task.whole_file else None
    return fsspec.open(task.url, "rb", compression=compression, **(storage_options or {}))


def _skip_partial_line(handle: Any, start: int) -> int:
    """Seek to the first line that starts at or after `start`; its offset."""
    handle.seek(start - 1)
    if handle.read(1) == b"\n":
        return start
    return start + len(handle.readline())


def _cut_at_end(data: bytes, offset: int, end: int | None) -> tuple[bytes, bool]:
    """`data` (complete lines starting at `offset`) up to the line that crosses `end`;
    and whether the task ends there."""
    if end is None or offset + len(data) <= end:
        return data, False
    index = data.find(b"\n", max(0, end - offset - 1))
    return data[: index + 1], True


def read_blocks(task: SourceTask, storage_options: dict[str, Any] | None = None,
                block_bytes: int = BLOCK_BYTES) -> Iterator[Block]:
    """The task's lines, block by block (each block about `block_bytes` of input)."""
    with _open(task, storage_options) as handle:
        offset = _skip_partial_line(handle, task.start) if task.start else 0
        first_line, carry, done = 1, b"", False
        while not done:
            if task.end is not None and offset >= task.end:
                return
            chunk = handle.read(block_bytes)
            data = carry + chunk
            if not chunk:
                complete, carry, done = data, b"", True
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data
                    continue
                complete, carry = data[: cut + 1], data[cut + 1:]
            complete, ended = _cut_at_end(complete, offset, task.end)
            done = done or ended
            offset += len(complete)
            lines = split_lines(complete)
            if len(lines):
                yield Block(first_line, lines)
                first_line += len(lines)
