"""The marker server's dedupe state in compact form: 16 bytes per marker, not a string.

A marker is known by its *key*, the MD5 of its name (``<partition>/<file>.marker.<IO>``)
as 16 bytes. A :class:`KeySet` holds the keys of one marker folder as two sorted numpy
arrays of 64-bit halves (16 bytes a marker, plus 8 for an optional value such as the
request that created it) and a small dict of the keys added since the last merge; the
dict is merged into the arrays, vectorized, once it holds :data:`MERGE_AT` keys. A Python
set of the names takes about 100 bytes a marker; this takes 16-24.

Two names share a key only if MD5 collides: about n^2 / 2^129 for n markers, 1.5e-27 for
a million (a content hash at the strength of git's object names). A name is never
written to a key set or read back from it; GET reads the names from the segments.

Keys are computed one by one (hashlib) for requests and vectorized (DuckDB's ``md5``
over an Arrow column of names) when a folder is loaded; the two agree byte for byte.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MERGE_AT = 1 << 15  # keys held in the dict before they are merged into the arrays
SMALL = 2048  # fewer names than this are hashed one by one (a DuckDB query costs more)
_local = threading.local()  # a DuckDB connection per thread
_EMPTY = np.empty(0, np.uint64)


def key_of(name: str) -> bytes:
    """The key of a marker name."""
    return hashlib.md5(name.encode("utf-8"), usedforsecurity=False).digest()


def names_of(rows: pa.Table | pa.RecordBatch) -> pa.Array:
    """The marker name of every row (``<partition>/<file>.marker.<IO>``, no ``/`` when the
    partition is empty), vectorized."""
    partition = rows.column("partition")
    file_name = rows.column("file")
    joined = pc.binary_join_element_wise(partition, file_name, "/")
    path = pc.if_else(pc.equal(partition, ""), file_name, joined)
    names = pc.binary_join_element_wise(path, rows.column("io_type"), ".marker.")
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    return names


def keys_of(names: pa.Array) -> np.ndarray:
    """The keys of an Arrow array of names as an (n, 2) array of big-endian uint64
    halves (vectorized: DuckDB's md5 is hashlib's)."""
    if len(names) < SMALL:
        return _split([key_of(name) for name in names.to_pylist()])
    return _md5(pa.table({"n": names}), "n")


def row_keys(rows: pa.Table) -> np.ndarray:
    """The keys of the marker names of rows with partition, file and io_type, as
    :func:`keys_of` (the names are built and hashed in one DuckDB pass)."""
    if rows.num_rows < SMALL:
        return keys_of(names_of(rows))
    return _md5(rows.select(["partition", "file", "io_type"]), _NAME_SQL)


# The marker name, as MarkerName.name spells it.
_NAME_SQL = ("CASE WHEN partition = '' THEN file ELSE partition || '/' || file END "
             "|| '.marker.' || io_type")


def _md5(table: pa.Table, expression: str) -> np.ndarray:
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect()
    relation = con.from_arrow(table).select(f"unhex(md5({expression})) AS k")
    digests = relation.to_arrow_table()
    column = digests.column("k").combine_chunks()
    data = column.buffers()[2]
    start = column.offset * 16  # every value is 16 bytes: offsets are 16 * i
    raw = np.frombuffer(data, dtype=">u8", count=len(column) * 2, offset=start)
    return raw.astype(np.uint64).reshape(-1, 2)


def _split(keys: Iterable[bytes]) -> np.ndarray:
    blob = b"".join(keys)
    return np.frombuffer(blob, dtype=">u8").astype(np.uint64).reshape(-1, 2)


class KeySet:
    """A set of 16-byte keys, each with an optional 64-bit value (0: none). ``name in
    keys`` and ``keys >= names`` also take marker names, like a set of names."""

    def __init__(self) -> None:
        self._hi = _EMPTY
        self._lo = _EMPTY
        self._val = _EMPTY
        self._recent: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._hi) + len(self._recent)

    def __contains__(self, key: object) -> bool:
        """A key, or a marker name (str), is held."""
        if isinstance(key, str):
            key = key_of(key)
        if not isinstance(key, bytes):
            return False
        return key in self._recent or self._find(key) >= 0

    def __ge__(self, names: Iterable[str | bytes]) -> bool:
        """Holds every one of these names or keys (like a set's ``>=``)."""
        return all(name in self for name in names)

    @property
    def nbytes(self) -> int:
        """Bytes held in the arrays (the dict aside)."""
        return int(self._hi.nbytes + self._lo.nbytes + self._val.nbytes)

    def _find(self, key: bytes) -> int:
        if not len(self._hi):
            return -1
        hi = int.from_bytes(key[:8], "big")
        lo = int.from_bytes(key[8:], "big")
        i = int(np.searchsorted(self._hi, np.uint64(hi)))
        while i < len(self._hi) and int(self._hi[i]) == hi:
            if int(self._lo[i]) == lo:
                return i
            i += 1
        return -1

    def contains_many(self, keys: list[bytes]) -> list[bool]:
        """Membership of each key (vectorized over the arrays)."""
        if not keys:
            return []
        found = [k in self._recent for k in keys]
        if len(self._hi):
            pairs = _split(keys)
            hit = self._locate(pairs[:, 0], pairs[:, 1]) >= 0
            found = [a or bool(b) for a, b in zip(found, hit, strict=True)]
        return found

    def _locate(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """Index in the arrays of each (hi, lo), -1 where absent."""
        left = np.searchsorted(self._hi, hi, side="left")
        right = np.searchsorted(self._hi, hi, side="right")
        result = np.full(len(hi), -1, np.int64)
        for j in np.nonzero(right > left)[0]:  # equal high halves: almost always one
            for i in range(int(left[j]), int(right[j])):
                if self._lo[i] == lo[j]:
                    result[j] = i
                    break
        return result

    def value(self, key: bytes) -> int:
        """The value stored with a key (0 if none or absent)."""
        if key in self._recent:
            return self._recent[key]
        i = self._find(key)
        return int(self._val[i]) if i >= 0 else 0

    def add(self, key: bytes, value: int = 0) -> bool:
        """Add a key (and set its value, if not 0); True if it was not held."""
        if key in self._recent:
            if value:
                self._recent[key] = value
            return False
        i = self._find(key)
        if i >= 0:
            if value:
                self._val[i] = np.uint64(value)
            return False
        self._recent[key] = value
        if len(self._recent) >= MERGE_AT:
            self.merge()
        return True

    def add_many(self, keys: list[bytes], values: list[int]) -> None:
        """Add keys with their values (a value of 0 leaves a held key's value as it is);
        one vectorized lookup for all of them."""
        held = self.contains_many(keys)
        for key, value, present in zip(keys, values, held, strict=True):
            if not present:
                if value or key not in self._recent:  # (a key twice in `keys`)
                    self._recent[key] = value
            elif value:
                self.add(key, value)
        if len(self._recent) >= MERGE_AT:
            self.merge()

    def merge(self) -> None:
        """Move the dict into the sorted arrays."""
        if not self._recent:
            return
        pairs = _split(self._recent)
        values = np.fromiter(self._recent.values(), np.uint64, len(self._recent))
        self._recent = {}
        self._insert(pairs[:, 0], pairs[:, 1], values)

    def add_arrays(self, pairs: np.ndarray) -> int:
        """Add an (n, 2) array of keys (from :func:`keys_of`); returns how many were new
        (duplicates within `pairs` count once)."""
        if not len(pairs):
            return 0
        self.merge()
        before = len(self._hi)
        hi, lo = pairs[:, 0], pairs[:, 1]
        order = np.argsort(hi)
        hi, lo = hi[order], lo[order]
        if len(hi) > 1 and bool((hi[1:] == hi[:-1]).any()):  # duplicates (or a rare tie)
            order = np.lexsort((lo, hi))
            hi, lo = hi[order], lo[order]
            keep = np.ones(len(hi), bool)
            keep[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
            hi, lo = hi[keep], lo[keep]
        if before:
            fresh = self._locate(hi, lo) < 0
            hi, lo = hi[fresh], lo[fresh]
        self._insert(hi, lo, np.zeros(len(hi), np.uint64))
        return len(self._hi) - before

    def _insert(self, hi: np.ndarray, lo: np.ndarray, values: np.ndarray) -> None:
        """Insert keys that are not held: the arrays are sorted by the high half only
        (lookups scan the few keys that share one), so this is a searchsorted and one
        copy, O(n), not a sort of everything held."""
        if not len(hi):
            return
        if len(hi) > 1 and bool((hi[1:] < hi[:-1]).any()):
            order = np.argsort(hi, kind="stable")
            hi, lo, values = hi[order], lo[order], values[order]
        if not len(self._hi):
            self._hi, self._lo, self._val = hi.copy(), lo.copy(), values.copy()
            return
        at = np.searchsorted(self._hi, hi)
        self._hi = np.insert(self._hi, at, hi)
        self._lo = np.insert(self._lo, at, lo)
        self._val = np.insert(self._val, at, values)

    def clear(self) -> None:
        self._hi = self._lo = self._val = _EMPTY
        self._recent = {}
