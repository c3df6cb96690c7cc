"""The data files a commit names: :class:`DataFile`, and the checks that make a path
given by a caller (one by one, or as Arrow, vectorized) one relative to the table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from markerstore.paths import path_problem
from markerstore.paths_arrow import bad_paths, check_paths
from markerstore.storage import Storage

ArrowPaths: TypeAlias = "pa.Array | pa.ChunkedArray | pa.Table"


@dataclass(frozen=True)
class DataFile:
    """A data file a winning task wrote, relative to the table."""

    path: str
    size: int | None = None
    rows: int | None = None
    checksum: str | None = None

    @property
    def partition(self) -> str:
        return self.path.rpartition("/")[0]


def data_file(storage: Storage, item: str | DataFile | Mapping[str, Any]) -> DataFile:
    """`item` (a path, a dict or a DataFile) as a DataFile relative to the table, its path
    checked to be inside it."""
    if isinstance(item, DataFile):
        entry = item
    elif isinstance(item, str):
        entry = DataFile(item)
    elif isinstance(item, Mapping):
        unknown = set(item) - {"path", "size", "rows", "checksum"}
        if unknown or "path" not in item:
            raise ValueError(f"a file entry has keys path, size, rows, checksum; got "
                             f"{sorted(item)}")
        entry = DataFile(**dict(item))
    else:
        raise TypeError(f"a committed file is a path, a dict or a DataFile, got {item!r}")
    path = entry.path
    if "://" in path or path.startswith("/"):
        path = storage.relative(path)
    problem = path_problem(path)
    if problem is not None:
        raise ValueError(f"file path {entry.path!r} is not inside the table: it {problem}")
    return DataFile(path, entry.size, entry.rows, entry.checksum)


def arrow_paths(storage: Storage, files: ArrowPaths) -> pa.Array:
    """Committed file paths given as Arrow, relative to the table and checked (the
    rules of data_file, vectorized)."""
    if isinstance(files, pa.Table):
        if "path" not in files.column_names:
            raise ValueError(f"committed files as an Arrow table need a 'path' column; "
                             f"got {files.column_names}")
        files = files.column("path")
    column = files.combine_chunks() if isinstance(files, pa.ChunkedArray) else files
    column = column.cast(pa.string())
    if not pc.any(bad_paths(column)).as_py():  # the common case: one pass
        return column
    absolute = pc.fill_null(pc.or_(pc.starts_with(column, "/"),
                                   pc.match_substring(column, "://")), False)
    if pc.any(absolute).as_py():  # few, if any: made relative one by one
        column = pa.array([storage.relative(p) if a else p for p, a in
                           zip(column.to_pylist(), absolute.to_pylist(), strict=True)],
                          pa.string())
    check_paths(column, what="file path")
    return column
