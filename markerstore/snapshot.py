"""Snapshots: the data files of a table as of a completed instant, from the timeline alone.

A snapshot is never a listing. Every completed commit names its files; a commit in
conflict mode replace also names the files it replaced (``replaced_files``), which stop
being live the moment that commit's instant completes, before they are deleted. So the
files live as of instant T are: the files of every completed instant <= T, minus every
file replaced by a completed instant <= T. An inflight or rolled-back write adds nothing.
The SQL view ``files`` is built from :func:`live_files` too.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from markerstore.errors import SnapshotError
from markerstore.storage import Storage

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    import pyarrow.dataset as ds


def live_files(completed: Iterable[tuple[str, dict[str, Any]]], as_of: str | None = None
               ) -> list[tuple[str, dict[str, Any]]]:
    """(instant, file entry) of every file live as of `as_of` (default: the latest), from
    the (instant, commit metadata) pairs of completed commits, oldest first."""
    commits = [(i, m) for i, m in completed if as_of is None or i <= as_of]
    replaced = {path for _, meta in commits for path in meta.get("replaced_files", [])}
    return [(instant, entry) for instant, meta in commits
            for entry in meta.get("files", []) if entry["path"] not in replaced]


@dataclass(frozen=True)
class SnapshotFile:
    instant: str
    path: str
    size: int | None = None
    rows: int | None = None


@dataclass
class Snapshot:
    """The committed data files of a table as of one completed instant."""

    storage: Storage
    instant: str | None
    files: list[SnapshotFile] = field(default_factory=list)

    @classmethod
    def of(cls, storage: Storage, completed: list[tuple[str, dict[str, Any]]],
           as_of: str | None = None) -> Snapshot:
        """The snapshot at `as_of` (a completed instant) or at the latest completed one.
        Refuses an instant that is not completed, and one whose files a later replace
        replaced once they are deleted (they stay for the retention,
        ``markerstore.table.replaced_files.retention``, for time travel)."""
        instants = [i for i, _ in completed]
        if as_of is not None and as_of not in instants:
            raise SnapshotError(f"instant {as_of} is not a completed instant of "
                                f"{storage.url()}")
        instant = as_of or (instants[-1] if instants else None)
        files = [SnapshotFile(i, e["path"], e.get("size"), e.get("rows"))
                 for i, e in live_files(completed, instant)]
        if as_of is not None:
            later = {p for i, m in completed if i > as_of for p in m.get("replaced_files", [])}
            gone = [f.path for f in files
                    if f.path in later and not storage.exists(storage.path(f.path))]
            if gone:
                raise SnapshotError(f"the snapshot at {as_of} is gone: a later replace "
                                    f"replaced {len(gone)} of its files and they were "
                                    f"deleted, past the retention (e.g. {gone[0]})")
        return cls(storage, instant, files)

    @property
    def paths(self) -> list[str]:
        """The files' paths relative to the table."""
        return [f.path for f in self.files]

    @property
    def urls(self) -> list[str]:
        """The files' full URLs (local paths for a local table), each checked to be in the
        table (a reader is never handed a link out of it)."""
        return [self.storage.url(p) for p in self._checked_paths()]

    def _checked_paths(self, suffix: str = "") -> list[str]:
        """The files' storage paths (those ending in `suffix`); CorruptTableError if one
        resolves outside the table (see Storage.check_contained)."""
        paths = [self.storage.path(f.path) for f in self.files if f.path.endswith(suffix)]
        self.storage.check_contained(paths, follow=True)
        return paths

    @property
    def rows(self) -> int | None:
        counts = [f.rows for f in self.files]
        return sum(c for c in counts if c is not None) if None not in counts else None

    def dataset(self) -> ds.Dataset:
        """A pyarrow dataset over exactly these files, partition columns from the folder
        names (hive style). Its schema holds every column a commit wrote: a later
        commit's new columns (null in the older files' rows) and widened types, as Delta
        and Iceberg readers see the table (one footer read per instant after the first;
        the files of one instant share a schema)."""
        import pyarrow.dataset as ds

        paths = self._checked_paths(".parquet")
        dataset = ds.dataset(paths, filesystem=self.storage.fs, format="parquet",
                             partitioning="hive", partition_base_dir=self.storage.root)
        unified = self._unified_schema(dataset.schema)
        if unified is None or unified.equals(dataset.schema):
            return dataset
        return ds.dataset(paths, schema=unified, filesystem=self.storage.fs,
                          format="parquet", partitioning="hive",
                          partition_base_dir=self.storage.root)

    def _unified_schema(self, first: pa.Schema) -> pa.Schema | None:
        """`first` (the oldest file's schema with the partition columns) with the columns
        of every later instant's files; None where one instant holds them all, or where
        they do not unify (the dataset then reads with the oldest file's schema)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        firsts: dict[str, str] = {}
        for f in self.files:
            if f.path.endswith(".parquet"):
                firsts.setdefault(f.instant, self.storage.path(f.path))
        later = list(firsts.values())[1:]
        if not later:
            return None
        with ThreadPoolExecutor(max_workers=min(8, len(later))) as pool:
            schemas = list(pool.map(lambda p: pq.read_schema(p, filesystem=self.storage.fs),
                                    later))
        try:
            return pa.unify_schemas([first, *schemas], promote_options="permissive")
        except (pa.ArrowInvalid, pa.ArrowTypeError, NotImplementedError):
            return None

    def duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over :meth:`dataset` (scanned lazily)."""
        import duckdb

        con = con or duckdb.connect()
        return con.from_arrow(self.dataset())
