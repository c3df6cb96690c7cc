"""Reading committed error rows with DuckDB: ``errortable.read(path)`` and the `errors` view.

Only rows of committed error instants are visible: completed ones, and inflight ones
whose main instant completed and names them (counted as committed; a read never writes:
``read(..., repair=True)`` in :mod:`errortable.reading.access` has recovery write their commit
first). The read API (``read``, ``connect``, ``query``, the `errors` view) is in
:mod:`errortable.reading.access`. Expired instants are skipped. Parquet error files (the default
format) are read by DuckDB's read_parquet over the committed file list (on S3 through the
table's fsspec filesystem registered with DuckDB): only the columns a query needs are
read, and no Python runs per row. Avro files are decoded with fastavro into Arrow (DuckDB
has no Avro reader here). A corrupt or
missing file is skipped with a :class:`CorruptErrorFileWarning` naming it, unless
``strict=True``, which raises :class:`~markerstore.errors.CorruptErrorFileError`.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from errortable import schema as S
from errortable.writing import files as F
from errortable.writing.expired import EXPIRE_OPERATION
from errortable.writing.recovery import (
    FORWARD,
    Sources,
    decide,
    pending_instants,
    same_table,
)
from errortable.writing.taskwriter import IDENTITY_FILE, OPERATION
from markerstore.errors import (
    CorruptErrorFileError,
    CorruptTableError,
)
from markerstore.paths import checked_paths
from markerstore.sql.sandbox import allow_paths
from markerstore.table import Table
from markerstore.timeline import is_instant
from markerstore.timeline.checks import check_count, check_list

if TYPE_CHECKING:  # imported where used: pyarrow.dataset and pyarrow.fs cost about 60 ms
    import pyarrow.dataset as ds  # in every process, Spark workers that write errors too

log = logging.getLogger(__name__)

REPLAY_LOG_OPERATION = "replay-log"
META_FIELDS = pa.schema([("error_file", pa.string()), ("error_instant", pa.string()),
                         ("source_instant", pa.string()), ("source_table", pa.string()),
                         ("day", pa.string())])
REPLAYED_SCHEMA = pa.schema([("uid", pa.string()), ("replayed_instant", pa.string()),
                             ("replayed_into", pa.string())])

# context key -> view column (RFC-20 columns come first, unchanged)
_FLAT = [("commitTime", "commit_time", "VARCHAR"), ("tableName", "table_name", "VARCHAR"),
         ("tablePath", "table_path", "VARCHAR"), ("partitionPath", "partition_path", "VARCHAR"),
         ("recordKey", "record_key", "VARCHAR"), ("reason", "reason", "VARCHAR"),
         ("check", "check_name", "VARCHAR"), ("column", "column_name", "VARCHAR"),
         ("fingerprint", "fingerprint", "VARCHAR"), ("errorClass", "error_class", "VARCHAR"),
         ("sourceFile", "source_file", "VARCHAR"), ("sourceLine", "source_line", "BIGINT"),
         ("sourceOffset", "source_offset", "BIGINT"), ("taskAttempt", "task_attempt", "VARCHAR")]


class CorruptErrorFileWarning(UserWarning):
    """An error file was skipped because it cannot be read (the message names it)."""


def full_schema() -> pa.Schema:
    return pa.schema(list(S.arrow_schema()) + list(META_FIELDS))


def _lit(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def view_sql(base: str, replayed: str | None) -> str:
    """The `errors` view over a relation holding ErrorRecord + META_FIELDS columns."""
    flat = ",\n  ".join(
        f"context[{_lit(key)}] AS {name}" if kind == "VARCHAR"
        else f"TRY_CAST(context[{_lit(key)}] AS {kind}) AS {name}" for key, name, kind in _FLAT)
    replay_cols = "r.replayed_instant, r.replayed_into" if replayed else \
        "CAST(NULL AS VARCHAR) AS replayed_instant, CAST(NULL AS VARCHAR) AS replayed_into"
    join = f" LEFT JOIN {replayed} r USING (uid)" if replayed else ""
    return (f"SELECT e.uid, e.ts, e.schema, e.record, e.message, e.context,\n"
            f"  make_timestamp(CAST(TRY_CAST(e.ts AS DOUBLE) * 1000000 AS BIGINT)) "
            f"AS created_at,\n  {flat},\n"
            f"  split_part(e.message, chr(10), 1) AS error,\n"
            f"  TRY_CAST(e.day AS DATE) AS day, e.error_instant, e.source_instant, "
            f"e.source_table, e.error_file,\n  {replay_cols}\n"
            f"FROM {base} e{join}")


@dataclass
class CommittedInstant:
    """An error instant whose rows readers see, and the files that hold them."""

    instant: str
    source_table: str | None
    source_instant: str | None
    files: list[str] = field(default_factory=list)
    lazily_rolled_forward: bool = False
    source_table_id: str | None = None


@dataclass(frozen=True)
class SourceFilter:
    """Which main table's rows to read: by its stable id when both it and the error
    instant have one (so a moved or copied table keeps its rows), else by its URL (error
    instants written before ids existed)."""

    url: str
    table_id: str | None = None

    @classmethod
    def of(cls, table: Table) -> SourceFilter:
        return cls(table.storage.url(), table.table_id())

    def matches(self, instant: CommittedInstant) -> bool:
        if self.table_id and instant.source_table_id:
            return self.table_id == instant.source_table_id
        return same_table(instant.source_table, self.url)


def expire_record(table: Table, instant: str, meta: Mapping[str, Any]
                  ) -> dict[str, dict[str, Any]]:
    """What the expire commit `instant` recorded (error instant -> {files, rows, ...}),
    checked: instant ids, valid table-relative file paths, row counts. A bad entry is a
    CorruptTableError naming the commit, before anything is read or deleted."""
    where = table.commit_url(instant)
    expired = meta.get("expired") or {}
    if not isinstance(expired, dict):
        raise CorruptTableError(where, "'expired' must be an object of error instants")
    for error_instant, info in expired.items():
        if not is_instant(error_instant) or not isinstance(info, dict):
            raise CorruptTableError(where, f"'expired' holds {error_instant!r:.40}: "
                                           f"{info!r:.80}, not an error instant's record")
        checked_paths(check_list(info.get("files", []), "files", where), where,
                      what=f"expired file of {error_instant}")
        check_count(info.get("rows"), f"expired rows of {error_instant}", where)
    return expired


@dataclass
class ParquetFiles:
    """Parquet error files (by the URL DuckDB reads them at), with each file's META_FIELDS;
    `fs` is the fsspec filesystem DuckDB must have registered to reach them (None: local
    disk, DuckDB's own)."""

    files: dict[str, dict[str, str | None]]
    fs: Any = None
    items: list[tuple[CommittedInstant, str]] = field(default_factory=list, repr=False)

    def sql(self) -> str:
        """DuckDB's read_parquet over the committed file list; META_FIELDS come from a
        constant map keyed by filename, which DuckDB only evaluates for queries that use
        them (no Python per row, no listing)."""
        files = ", ".join(_lit(f) for f in self.files)
        lookup = "MAP {" + ", ".join(
            f"{_lit(f)}: {{" + ", ".join(f"{_lit(k)}: {_lit(v)}" for k, v in meta.items()) + "}"
            for f, meta in self.files.items()) + "}"
        rfc = ", ".join(f"p.{c}" for c in S.arrow_schema().names)
        meta = ", ".join(f"{lookup}[p.filename].{c} AS {c}" for c in META_FIELDS.names)
        return f"SELECT {rfc}, {meta} FROM read_parquet([{files}], filename = true) p"


def is_error_table(table: Table) -> bool:
    """Whether `table` is an error table (ErrorCommit.open marks it)."""
    return table.storage.exists(table.storage.path(IDENTITY_FILE))


class ErrorTableReader:
    """The committed rows of one error table."""

    def __init__(self, table: Table, *, strict: bool = False,
                 source_storage_options: Mapping[str, Any] | None = None) -> None:
        self.table = table
        self.strict = strict
        self.sources = Sources(source_storage_options if source_storage_options is not None
                               else table.storage.storage_options)
        self.skipped: list[str] = []

    @property
    def url(self) -> str:
        return self.table.storage.url()

    # --- which instants and files ---------------------------------------------------------
    def expired(self) -> dict[str, dict[str, Any]]:
        """Error instants removed by `expire`, with what was recorded about them."""
        result: dict[str, dict[str, Any]] = {}
        for instant, meta in self.table.completed():
            if meta.get("operation") == EXPIRE_OPERATION:
                result.update(expire_record(self.table, instant, meta))
        return result

    def replayed(self) -> pa.Table:
        """uid -> the replay commit (on the target table) that re-ingested it."""
        uids: list[str] = []
        instants: list[str] = []
        targets: list[str] = []
        for _, meta in self.table.completed():
            if meta.get("operation") != REPLAY_LOG_OPERATION:
                continue
            replay = meta.get("replay") or {}
            for uid in replay.get("uids", []):
                uids.append(uid)
                instants.append(str(replay.get("instant")))
                targets.append(str(replay.get("target_table")))
        return pa.table([uids, instants, targets], schema=REPLAYED_SCHEMA)

    def instants(self) -> list[CommittedInstant]:
        """Committed error instants, oldest first."""
        expired = self.expired()
        result = []
        for instant, meta in self.table.completed():
            if meta.get("operation") != OPERATION or instant in expired:
                continue
            result.append(CommittedInstant(instant, meta.get("source_table"),
                                           meta.get("source_instant"),
                                           [f["path"] for f in meta.get("files", [])],
                                           source_table_id=_opt_str(
                                               meta.get("source_table_id"))))
        for instant in pending_instants(self.table):
            decision = decide(self.table, instant, self.sources)
            if decision.action != FORWARD or instant in expired:
                continue
            result.append(CommittedInstant(instant, decision.source_table,
                                           decision.source_instant,
                                           [f["path"] for f in decision.files], True,
                                           decision.source_table_id))
        return sorted(result, key=lambda c: c.instant)

    # --- reading files --------------------------------------------------------------------
    def _skip(self, exc: CorruptErrorFileError) -> None:
        if self.strict:
            raise exc
        self.skipped.append(str(exc))
        warnings.warn(f"{exc}; skipped (the other error files are read)",
                      CorruptErrorFileWarning, stacklevel=4)

    def _meta(self, c: CommittedInstant, path: str) -> dict[str, str | None]:
        day = path.split("/", 1)[0]
        return {"error_file": path, "error_instant": c.instant,
                "source_instant": c.source_instant, "source_table": c.source_table,
                "day": day[4:] if day.startswith("day=") else None}

    def _read_avro(self, items: list[tuple[CommittedInstant, str]]) -> pa.Table | None:
        storage = self.table.storage

        def load(item: tuple[CommittedInstant, str]) -> pa.Table | CorruptErrorFileError:
            c, path = item
            try:
                table = F.read_file(storage, storage.path(path))
            except CorruptErrorFileError as exc:
                return exc
            n = table.num_rows
            for name, value in self._meta(c, path).items():
                table = table.append_column(name, pa.array([value] * n, pa.string()))
            return table

        if not items:
            return None
        with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
            loaded = list(pool.map(load, items))
        tables = []
        for item in loaded:
            if isinstance(item, CorruptErrorFileError):
                self._skip(item)
            else:
                tables.append(item)
        return pa.concat_tables(tables) if tables else None

    def _parquet_dataset(self, items: list[tuple[CommittedInstant, str]]
                         ) -> ds.Dataset | ParquetFiles | None:
        """Parquet files after a footer check, for DuckDB's read_parquet: on local disk
        directly, on S3 and other fsspec storage through the table's filesystem registered
        with DuckDB (memory:// through a lazy pyarrow dataset)."""
        storage = self.table.storage

        def check(item: tuple[CommittedInstant, str]) -> CorruptErrorFileError | None:
            try:
                F.check_parquet(storage, storage.path(item[1]))
            except CorruptErrorFileError as exc:
                return exc
            return None

        if not items:
            return None
        with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
            problems = list(pool.map(check, items))
        good = []
        for item, problem in zip(items, problems, strict=True):
            if problem is None:
                good.append(item)
            else:
                self._skip(problem)
        if not good:
            return None
        if storage.is_local:  # by real path: what was checked is what DuckDB opens
            return ParquetFiles({os.path.realpath(storage.path(p)): self._meta(c, p)
                                 for c, p in good})
        if not storage.is_memory:  # DuckDB reads through the table's fsspec filesystem
            return ParquetFiles({storage.url(storage.path(p)): self._meta(c, p)
                                 for c, p in good}, storage.fs, good)
        return self._arrow_dataset(good)

    def _arrow_dataset(self, good: list[tuple[CommittedInstant, str]]) -> ds.Dataset:
        """A lazy pyarrow dataset (fsspec's memory filesystem, which is not thread-safe
        enough for DuckDB's readers, and a second filesystem of one protocol)."""
        import pyarrow.dataset as ds
        import pyarrow.fs as pafs

        storage = self.table.storage
        partitions = []
        for c, path in good:
            expr = None
            for name, value in self._meta(c, path).items():
                term = ds.field(name) == value if value is not None else \
                    ds.field(name).is_null()
                expr = term if expr is None else expr & term
            partitions.append(expr)
        filesystem = pafs.LocalFileSystem() if storage.is_local else \
            pafs.PyFileSystem(pafs.FSSpecHandler(storage.fs))
        return ds.FileSystemDataset.from_paths(
            [storage.path(p) for _, p in good], schema=full_schema(),
            format=ds.ParquetFileFormat(), filesystem=filesystem, partitions=partitions)

    def sources_for(self, source_filter: SourceFilter | str | None = None
                    ) -> tuple[ds.Dataset | ParquetFiles | None, pa.Table | None]:
        """(lazy Parquet dataset, decoded Avro rows) of the committed instants, optionally
        only those of one source table."""
        if isinstance(source_filter, str):
            source_filter = SourceFilter(source_filter)
        every = self.instants()
        committed = [c for c in every if source_filter is None or source_filter.matches(c)]
        if source_filter is not None and every and not committed:
            self._say_mismatch(every, source_filter)
        avro: list[tuple[CommittedInstant, str]] = []
        parquet: list[tuple[CommittedInstant, str]] = []
        for c in committed:
            for path in c.files:
                try:
                    fmt = F.format_of(self.table.storage.url(self.table.storage.path(path)))
                    self._check_inside(path)
                except CorruptErrorFileError as exc:
                    self._skip(exc)
                    continue
                (avro if fmt == "avro" else parquet).append((c, path))
        return self._parquet_dataset(parquet), self._read_avro(avro)


    def _check_inside(self, path: str) -> None:
        """On local disk: CorruptErrorFileError for an error file reached through a link
        out of the table (nothing reads it: not the footer check, not the view)."""
        storage = self.table.storage
        try:
            storage.check_in_table(storage.path(path))
        except CorruptTableError as exc:
            raise CorruptErrorFileError(f"error file {storage.url(storage.path(path))}: "
                                        f"{exc.entry}; it is not read") from None

    def _say_mismatch(self, instants: list[CommittedInstant], source: SourceFilter) -> None:
        """Say so (a logged warning naming both ids) when this error table is linked to
        `source` (by its URL or by being its ``<table>_errors``) but holds rows of other
        table ids only: a copy of another table's error table, or a table re-created at
        this path. Better than an errors view that is silently empty."""
        from markerstore.config import ERROR_TABLE_SUFFIX_DEFAULT as SUFFIX_DEFAULT

        others = sorted({c.source_table_id for c in instants if c.source_table_id})
        local = same_table(self.url, source.url.rstrip("/") + SUFFIX_DEFAULT)
        linked = local or any(same_table(c.source_table, source.url) for c in instants)
        if not (linked and others and source.table_id):
            return
        message = (f"error table {self.url} holds rows of table id(s) {', '.join(others[:3])}"
                   f", not of {source.url} (id {source.table_id}); it belongs to another "
                   "table (a copy, or a table re-created at this path), so no rows are shown")
        log.warning("%s", message)  # one line on stderr, also where logging is not set up


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def register_errors(con: duckdb.DuckDBPyConnection,
                    readers: Sequence[tuple[ErrorTableReader, SourceFilter | str | None]],
                    name: str = "errors") -> None:
    """Create view `name` in `con` over the committed rows of the readers' error tables
    (each optionally filtered to one source table)."""
    parts: list[str] = []
    replayed: list[pa.Table] = []
    filesystems: dict[str, Any] = {}
    for k, (reader, source_filter) in enumerate(readers):
        with reader.table.pinned_timeline():  # its files and replay log: one listing
            dataset, avro = reader.sources_for(source_filter)
            log = reader.replayed()
        if isinstance(dataset, ParquetFiles) and dataset.fs is not None \
                and not _registered(con, filesystems, dataset.fs):
            # another filesystem of the same protocol: through pyarrow instead
            dataset = reader._arrow_dataset(dataset.items)
        if isinstance(dataset, ParquetFiles):
            allow_paths(con, dataset.files)  # the only files a sandboxed query may read
            parts.append(dataset.sql())
        elif dataset is not None:
            con.register(f"__{name}_pq_{k}", dataset)
            parts.append(f"SELECT * FROM __{name}_pq_{k}")
        if avro is not None:
            con.register(f"__{name}_avro_{k}", avro)
            parts.append(f"SELECT * FROM __{name}_avro_{k}")
        if log.num_rows:
            replayed.append(log)
    if not parts:
        con.register(f"__{name}_empty", full_schema().empty_table())
        parts.append(f"SELECT * FROM __{name}_empty")
    base = f"__{name}_base"
    con.execute(f"CREATE OR REPLACE TEMP VIEW {base} AS " + " UNION ALL BY NAME ".join(parts))
    replay_name = None
    if replayed:
        replay_name = f"__{name}_replayed"
        table = pa.concat_tables(replayed)
        con.register(replay_name, table)
        replay_name = f"(SELECT uid, max(replayed_instant) AS replayed_instant, " \
                      f"max(replayed_into) AS replayed_into FROM {replay_name} GROUP BY uid)"
    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {view_sql(base, replay_name)}")


def _registered(con: duckdb.DuckDBPyConnection, filesystems: dict[str, Any], fs: Any) -> bool:
    """Register `fs` with DuckDB once per protocol; False if the protocol already belongs
    to another filesystem object (another endpoint or credentials)."""
    protocols = fs.protocol if isinstance(fs.protocol, (list, tuple)) else (fs.protocol,)
    key = str(protocols[0])
    if key not in filesystems:
        if key in con.list_filesystems():
            return False  # registered on this connection before: it may be another one
        con.register_filesystem(fs)
        filesystems[key] = fs
    return filesystems[key] is fs


def error_tables_of(target: Table) -> list[str]:
    """The error tables a target table wrote to: named by its completed commits, plus the
    local ``<table>_errors`` when that exists. A named one with the local one's table id
    is a copy of it (the target was copied or moved together with its error table): the
    local one takes its place, so no row is read twice."""
    named: list[tuple[str, str | None]] = []
    for _, meta in target.completed():
        url = meta.get("error_table") or meta.get("replayed_from")
        if url and not any(same_table(url, u) for u, _ in named):
            named.append((str(url), _opt_str(meta.get("error_table_id"))))
    from markerstore.config import ERROR_TABLE_SUFFIX_DEFAULT as SUFFIX_DEFAULT

    local = target.storage.url().rstrip("/") + SUFFIX_DEFAULT
    urls = [u for u, _ in named]
    if any(same_table(local, u) for u in urls):
        return urls
    candidate = Table(local, target.storage.storage_options)
    if not is_error_table(candidate):
        return urls
    local_id = candidate.table_id()
    copies = [i for i, (_, named_id) in enumerate(named) if local_id and named_id == local_id]
    if not copies:
        return [*urls, local]
    urls[copies[0]] = local
    return [u for i, u in enumerate(urls) if i not in copies[1:]]
