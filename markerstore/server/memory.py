"""Giving memory back to the system after the marker server's large, short-lived work.

Loading a folder, a compaction and a GET of a large folder decode rows a piece at a
time; the pieces are freed, but the allocators keep the pages (Arrow's mimalloc pool,
glibc's heap), so the process would stay at its peak. :func:`trim` returns them; it is
called after each of those. :func:`limit_heap` makes glibc serve allocations of 1 MiB or
more (the key arrays, decoded pieces) from their own mappings, returned when freed,
instead of from a heap that grows and fragments. Both do nothing where glibc is not.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
from functools import lru_cache
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20


@lru_cache(maxsize=1)
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim  # noqa: B018 - glibc only
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_heap() -> None:
    """Allocations of :data:`MMAP_THRESHOLD` bytes or more get their own mapping (glibc
    would otherwise raise that threshold as large blocks are freed)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def trim() -> None:
    """Return freed memory to the system: Arrow's pool, then glibc's heap."""
    with contextlib.suppress(Exception):
        pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
