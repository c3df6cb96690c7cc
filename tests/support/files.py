"""Marked writes for the core tests: the marker first, then the file."""

from __future__ import annotations

from markerstore import Table


def write_file(table: Table, path: str, data: bytes = b"data") -> str:
    """Write a data file at `path` relative to the table."""
    table.storage.put(table.storage.path(path), data)
    return path


def exists(table: Table, path: str) -> bool:
    return table.storage.exists(table.storage.path(path))


def marked_write(table: Table, instant: str, paths: list[str], io_type: str = "CREATE") -> None:
    """Marker first, then the file, for each path."""
    markers = table.markers(instant)
    for path in paths:
        partition, _, name = path.rpartition("/")
        markers.create(partition, name, io_type)
        write_file(table, path, path.encode())
