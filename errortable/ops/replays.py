"""Replay: re-ingest selected error records into their target table as a new commit.

Without Spark: the records' JSON is validated again against the target table's schema
(read from its newest Parquet data file; hive-style partition folders give the partition
columns), the rows that now pass are written as Parquet files with markers, and the
target table commits them with the replayed error uids in the commit's own metadata. That
one atomic write is what makes replay idempotent: a second replay reads the uids of every
earlier replay commit and skips them, whether or not anything after the commit ran. Then
a ``replay-log`` commit on the error table records the uids too, for the `errors` view's
``replayed_instant`` column (best effort: the target's metadata is the source of truth).
Records that still fail stay in the error table, untouched, and are counted by reason.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from errortable.capture.records import REASON, SOURCE_LINE
from errortable.capture.validator import Validator
from errortable.reading.access import connect, readers_for
from errortable.reading.reader import REPLAY_LOG_OPERATION, CommittedInstant, ErrorTableReader
from errortable.writing.commit import publish_formats
from errortable.writing.recovery import same_table
from errortable.writing.registry import storage_options_for
from markerstore.errors import ConfigError, ErrorTableError, InstantNotFoundError
from markerstore.render.html import table_html
from markerstore.sql import sandbox
from markerstore.table import DataFile, Table
from markerstore.timeline import COMPLETED
from markerstore.values.formats import ValueFormats

log = logging.getLogger(__name__)

OPERATION = "replay"
UIDS_KEY = "replayed_error_uids"


@dataclass
class TargetReplay:
    """The replay into one target table."""

    target_table: str
    selected: int = 0
    already_replayed: int = 0
    no_payload: int = 0
    still_failing: dict[str, int] = field(default_factory=dict)
    written_rows: int = 0
    instant: str | None = None
    files: list[str] = field(default_factory=list)
    uids: list[str] = field(default_factory=list)


@dataclass
class ReplayResult:
    """What a replay did (or, with dry_run, would do), per target table."""

    path: str
    where: str
    dry_run: bool
    targets: list[TargetReplay] = field(default_factory=list)

    @property
    def written_rows(self) -> int:
        return sum(t.written_rows for t in self.targets)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "written_rows": self.written_rows}

    def _repr_html_(self) -> str:
        rows = [{k: v for k, v in asdict(t).items() if k != "uids"} for t in self.targets]
        verb = "would replay" if self.dry_run else "replayed"
        return f"<b>{verb} {self.written_rows} row(s) where {self.where}</b>" + table_html(rows)


def replayed_uids(target: Table) -> set[str]:
    """Every error uid that a completed replay commit of `target` re-ingested."""
    uids: set[str] = set()
    for _, meta in target.completed():
        uids.update(meta.get(UIDS_KEY) or [])
    return uids


def target_schema(target: Table) -> tuple[pa.Schema, list[str]]:
    """(file schema + partition columns as strings, partition columns), from the newest
    Parquet data file of the target's completed commits."""
    for _, meta in reversed(target.completed()):
        for entry in meta.get("files", []):
            path = entry["path"]
            if not path.endswith(".parquet"):
                continue
            with target.storage.open_read(target.storage.path(path)) as handle:
                schema = pq.read_schema(handle).remove_metadata()
            partitions = [part.split("=", 1)[0] for part in path.split("/")[:-1]
                          if "=" in part]
            fields = list(schema) + [pa.field(p, pa.string()) for p in partitions
                                     if p not in schema.names]
            return pa.schema(fields), partitions
    raise ErrorTableError(f"cannot tell the schema of {target.storage.url()}: none of its "
                          "commits has a Parquet data file")


def _select(con: duckdb.DuckDBPyConnection, where: str, unsafe_sql: bool,
            limits: sandbox.Limits | None) -> list[tuple[Any, ...]]:
    query = ("SELECT uid, record, source_table, replayed_instant, error_instant FROM errors "
             f"WHERE ({where}) ORDER BY created_at, uid")
    if len(con.extract_statements(query)) != 1:
        raise ConfigError(f"--where must be one SQL condition, got {where!r}")
    with sandbox.limited(con, limits or (sandbox.UNLIMITED_TIME if unsafe_sql else None)):
        if unsafe_sql:
            return con.sql(query).fetchall()
        return sandbox.select(con, query, limits).fetchall()


def replay(path: str, where: str, storage_options: Mapping[str, Any] | None = None, *,
           dry_run: bool = False, target: str | None = None,
           unsafe_sql: bool = False, limits: sandbox.Limits | None = None,
           formats: ValueFormats | None = None) -> ReplayResult:
    """Re-ingest the error records selected by `where` (SQL over the `errors` view) into
    their target tables (or into `target`), once. `where` runs in the SQL sandbox (it
    reads the `errors` view and nothing else, within `limits`) unless `unsafe_sql`.
    `formats`: how text values read (the ingest's dateFormat and the like), as the
    ingest that stored the records read them."""
    if not where or not where.strip():
        raise ConfigError("--where needs a SQL condition over the errors view (for example "
                          "\"reason = 'cast'\")")
    readers = readers_for(path, storage_options)
    con = connect(path, storage_options)
    result = ReplayResult(path, where, dry_run)
    by_target: dict[str, list[tuple[str, str | None]]] = {}
    skipped_logged: dict[str, int] = Counter()
    origins: set[tuple[str, str]] = set()
    selected = _select(con, where, unsafe_sql, limits)
    for uid, record, source_table, replayed, error_instant in selected:
        url = target or source_table
        if not url:
            raise ErrorTableError(f"error row {uid} names no target table; pass a target")
        origins.add((url, error_instant))
        if replayed is not None:
            skipped_logged[url] += 1
            continue
        by_target.setdefault(url, []).append((uid, record))
    error_table = readers[0][0].table
    tables = {url: Table(url, storage_options_for(url, error_table.storage.storage_options))
              for url in set(by_target) | set(skipped_logged)}
    if target is None:  # the target comes from the error table's files: check it first
        check_origins(readers, tables, origins)
    for url in sorted(tables):
        rows = by_target.get(url, [])
        outcome = _replay_into(tables[url], rows, where, dry_run, error_table.storage.url(),
                               formats)
        outcome.selected += skipped_logged.get(url, 0)
        outcome.already_replayed += skipped_logged.get(url, 0)
        result.targets.append(outcome)
        if outcome.instant is not None:
            _log_replay(error_table, outcome)
    return result


def check_origins(readers: list[tuple[ErrorTableReader, Any]], tables: Mapping[str, Table],
                  origins: set[tuple[str, str]]) -> None:
    """Refuse (ErrorTableError, one line, before anything is written) unless each target
    table is the one its error instant came from: the table id the instant records is the
    target's, and the target's commit of the instant's main instant names this error
    instant of this error table. The `source_table` URL in an error instant is the
    error table's content, which whoever can write that folder can edit; neither check
    can be met by editing the error table alone."""
    known: dict[str, list[tuple[Table, CommittedInstant]]] = {}
    for reader, _ in readers:
        for committed in reader.instants():
            known.setdefault(committed.instant, []).append((reader.table, committed))
    for url, error_instant in sorted(origins):
        problems = [_origin_problem(tables[url], error_table, committed)
                    for error_table, committed in known.get(error_instant, [])]
        if not problems or all(problems):
            why = next((p for p in problems if p), "it is not a committed error instant")
            raise ErrorTableError(
                f"refusing to replay error instant {error_instant} into {url}: {why} (its "
                "source_table may have been edited; pass --target to choose the table)")


def _origin_problem(target: Table, error_table: Table, committed: CommittedInstant
                    ) -> str | None:
    """Why `target` is not the table that error instant `committed` came from (None: it
    is)."""
    target_id = target.table_id()
    if committed.source_table_id and committed.source_table_id != target_id:
        return (f"the error instant records table id {committed.source_table_id}, and "
                f"{target.storage.url()} has {target_id or 'none'}")
    source_instant = committed.source_instant
    try:
        if not source_instant or target.state(source_instant) != COMPLETED:
            return f"main instant {source_instant} is not completed on {target.storage.url()}"
        meta = target.commit_metadata(source_instant)
    except InstantNotFoundError:
        return f"main instant {source_instant} is not on the timeline of {target.storage.url()}"
    named_id, own_id = meta.get("error_table_id"), error_table.table_id()
    same = named_id == own_id if named_id and own_id else \
        same_table(meta.get("error_table"), error_table.storage.url())
    if meta.get("error_instant") != committed.instant or not same:
        return (f"main instant {source_instant} of {target.storage.url()} did not write "
                "this error instant")
    return None


def _replay_into(table: Table, rows: list[tuple[str, str | None]], where: str,
                 dry_run: bool, error_table: str, formats: ValueFormats | None = None
                 ) -> TargetReplay:
    outcome = TargetReplay(table.storage.url(), selected=len(rows))
    done = replayed_uids(table)
    records, uids = [], []
    for uid, record in rows:
        if uid in done:
            outcome.already_replayed += 1
            continue
        value = json.loads(record) if record is not None else None
        if not isinstance(value, dict):
            outcome.no_payload += 1  # dropped or redacted payload, or a raw unparsed line
            continue
        records.append(value)
        uids.append(uid)
    if not records:
        return outcome
    schema, partitions = target_schema(table)
    validator = Validator(schema, partition_by=partitions, formats=formats)
    # Row numbers stand in for line numbers, so each failure names its input row.
    good, failing = validator.split_records(records, line_numbers=range(len(records)))
    outcome.still_failing = dict(Counter(e["context"][REASON] for e in failing))
    failed_rows = {int(e["context"][SOURCE_LINE]) for e in failing}
    good_uids = [uid for i, uid in enumerate(uids) if i not in failed_rows]
    if len(good_uids) != good.num_rows:
        raise ErrorTableError("replay lost track of which records passed validation")
    outcome.written_rows = good.num_rows
    outcome.uids = good_uids
    if dry_run or good.num_rows == 0:
        return outcome
    instant = table.start_commit(operation=OPERATION, rollback_failed=False,
                                 extra={"replayed_from": error_table})
    try:
        files = _write(table, instant, pa.Table.from_batches([good]), partitions)
        table.commit(instant, files, metadata={UIDS_KEY: good_uids, "replayed_from": error_table,
                                               "replay_where": where})
    except BaseException:
        table.abort(instant)
        raise
    publish_formats(table)
    outcome.instant = instant
    outcome.files = [f.path for f in files]
    log.info("replayed %d error record(s) into %s as %s", good.num_rows,
             table.storage.url(), instant)
    return outcome


def _write(table: Table, instant: str, rows: pa.Table, partitions: list[str]
           ) -> list[DataFile]:
    markers = table.markers(instant)
    groups: list[tuple[str, pa.Table]] = []
    if partitions:
        keys = rows.select(partitions).to_pylist()
        seen: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            folder = "/".join(f"{p}={key[p]}" for p in partitions)
            seen.setdefault(folder, []).append(i)
        for folder, indices in seen.items():
            part = rows.take(pa.array(indices, pa.int64())).drop_columns(partitions)
            groups.append((folder, part))
    else:
        groups.append(("", rows))
    files = []
    for folder, part in groups:
        name = f"{uuid.uuid4()}-replay_{instant}.parquet"
        markers.create(folder, name, "CREATE", task_attempt="replay")
        path = f"{folder}/{name}" if folder else name
        with table.storage.open_write(table.storage.path(path)) as handle:
            pq.write_table(part, handle)
        size = int(table.storage.info(table.storage.path(path))["size"])
        files.append(DataFile(path, size, part.num_rows))
    return files


def _log_replay(error_table: Table, outcome: TargetReplay) -> None:
    try:
        instant = error_table.start_commit(operation=REPLAY_LOG_OPERATION,
                                           rollback_failed=False)
        error_table.commit(instant, [], metadata={"replay": {
            "uids": outcome.uids, "instant": outcome.instant,
            "target_table": outcome.target_table}})
        publish_formats(error_table)
    except Exception as exc:
        log.warning("replay %s into %s committed, but recording it on the error table %s "
                    "failed (%s); replays stay idempotent through the target's metadata",
                    outcome.instant, outcome.target_table, error_table.storage.url(), exc)

