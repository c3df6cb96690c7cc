"""Delta Lake publishing (``pip install 'markerstore[delta]'``, for delta-rs).

Each completed instant becomes exactly one Delta version of the table's own folder
(``_delta_log/`` beside ``.markerstore/``): an ``add`` action per file of the commit
(partition values from the commit's Hive-style folders, statistics from the Parquet
footers) and a ``remove`` action per file a replace replaced. The version carries the
instant twice: as an app transaction ``markerstore-<instant>`` (checked before publishing,
and conflicting with a concurrent publisher of the same instant) and as the commit info
key ``markerstore.instant`` (read back by :meth:`DeltaPublisher.published_instants`).

delta-rs creates the table (its first version) and writes the checkpoints; every later
version is written as the protocol lays it out (:mod:`.delta_evolve`), from what
:mod:`.delta_state` reads of the log (never every live file).

On S3 the Delta log needs put-if-absent: delta-rs's conditional put (``conditional_put``
= ``etag``) is set by default; a store without it needs a locking provider, named through
``markerstore.table.formats.delta.storage_options``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.errors import ConfigError, MarkerStoreError, TableFormatError
from markerstore.formats import delta_state
from markerstore.formats.base import (
    INSTANT_KEY,
    OVERWRITE,
    CommitToPublish,
    PublishDeferred,
    Settled,
    TimelineView,
)
from markerstore.formats.commits import hive_partition
from markerstore.formats.delta_evolve import (
    CHECKPOINT_INTERVAL_KEY,
    LOG_RETENTION_DEFAULT_S,
    LOG_RETENTION_KEY,
    TXN_RETENTION_KEY,
    checkpoint_interval,
    delta_type_json,
    interval_seconds,
    plan_schema,
    version_actions,
    write_version,
)
from markerstore.formats.delta_state import LogState, Metadata
from markerstore.formats.stats import file_stats
from markerstore.formats.values import delta_partition_value
from markerstore.option_values import duration_seconds
from markerstore.table import Table
from markerstore.timeline import parse_instant

log = logging.getLogger(__name__)

APP_PREFIX = "markerstore-"
COMMIT_ATTEMPTS = 8  # a version another writer took first: read the log again, retry
# A new Delta table checkpoints every 10 versions, as Spark's Delta does (delta-rs's
# default, 100, leaves up to 99 JSON files for every reader to replay).
TABLE_CONFIGURATION = {CHECKPOINT_INTERVAL_KEY: "10"}
# How long a removed file's tombstone stays in the log's checkpoints: a new table's is
# the table's replaced-files retention (Delta's own default is 7 days whatever it is).
TOMBSTONE_RETENTION_KEY = "delta.deletedFileRetentionDuration"

# The commit info key of a version markerstore published to make the Delta table hold the
# timeline's files again (after another tool's commit, or a lost log): the instant whose
# snapshot it holds.
RESTORED_KEY = "markerstore.restored"
FOREIGN_LIMIT = 100  # versions after markerstore's last one read, at most
# How much younger than the app transaction retention an instant must be for its missing
# transaction to mean "never published" (its publish came after its start, clocks differ)
TXN_MARGIN_S = 3600


def table_configuration(table: Table) -> dict[str, str]:
    """The properties of a Delta table markerstore creates for `table`."""
    seconds = int(duration_seconds(table.settings[config.TABLE_RETENTION]))
    return {**TABLE_CONFIGURATION, TOMBSTONE_RETENTION_KEY: f"interval {seconds} seconds"}


def delta_uri(table: Table) -> str:
    """The table's folder as delta-rs names it (a local path or s3://bucket/key)."""
    storage = table.storage
    if storage.is_local:
        return storage.root
    if storage.is_s3:
        return f"s3://{storage.root}"
    raise ConfigError(f"table {storage.url()} cannot publish Delta: delta-rs reaches local "
                      "folders and S3, not this store")


def delta_storage_options(table: Table) -> dict[str, str]:
    """delta-rs storage options from the table's fsspec options (S3 keys, endpoint,
    region; conditional put by ETag), under the user's own
    (``markerstore.table.formats.delta.storage_options``)."""
    given: Mapping[str, Any] = table.storage.storage_options
    result: dict[str, str] = {}
    if table.storage.is_s3:
        client = dict(given.get("client_kwargs") or {})
        endpoint = given.get("endpoint_url") or client.get("endpoint_url")
        names = {"key": "AWS_ACCESS_KEY_ID", "secret": "AWS_SECRET_ACCESS_KEY",
                 "token": "AWS_SESSION_TOKEN"}
        result.update({names[k]: str(v) for k, v in given.items() if k in names and v})
        if endpoint:
            result["AWS_ENDPOINT_URL"] = str(endpoint)
            if str(endpoint).startswith("http://"):
                result["AWS_ALLOW_HTTP"] = "true"
        region = client.get("region_name") or given.get("region_name")
        if region:
            result["AWS_REGION"] = str(region)
        result["conditional_put"] = "etag"
    result.update(table.settings[config.DELTA_STORAGE_OPTIONS])
    return result


class DeltaPublisher:
    """The Delta log of one markerstore table."""

    name = "delta"

    def __init__(self, table: Table) -> None:
        self.table = table
        self.uri = delta_uri(table)
        self.storage_options = delta_storage_options(table)
        self._delta: Any = None  # the table as delta-rs last loaded it
        self._state: LogState | None = None  # the log as this publish last read it

    def __repr__(self) -> str:
        return f"DeltaPublisher({self.uri!r})"

    def _load(self) -> Any:
        """The Delta table (delta-rs), or None where the folder has no Delta log yet."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        self._delta = None
        try:
            self._delta = DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        return self._delta

    def _log(self) -> LogState | None:
        """What a publish reads of the log: its latest version, metadata, protocol, app
        transactions (:mod:`.delta_state`, the later versions only where this thread read
        it before); None where the folder has no Delta log yet."""
        self._state = delta_state.read(self.table.storage)
        return self._state

    def _read(self) -> LogState | None:
        """The log as this publish last read it (by :meth:`unpublished`: a version another
        writer added since makes the write of the next one fail, and the log is read
        again), else read now."""
        return self._state if self._state is not None else self._log()

    def versions(self) -> list[tuple[int, str | None]]:
        """Every version the log keeps, oldest first, with the instant it published (None
        for a version markerstore did not write)."""
        delta = self._load()
        if delta is None:
            return []
        found = [(int(h["version"]), h.get(INSTANT_KEY)) for h in delta.history()]
        return sorted((v, str(i) if i is not None else None) for v, i in found)

    def published_instants(self) -> set[str]:
        return {i for _, i in self.versions() if i is not None}

    def unpublished(self, view: TimelineView) -> list[str]:
        """The completed instants of `view` the log does not hold: the log read once, its
        latest version's settled mark naming which instants to look up (each by its app
        transaction, which outlives the commit info Delta's log cleanup removes)."""
        state = self._log()
        if state is None:
            return list(view.completed)
        mark = Settled.from_summary(state.info)
        return self._unheld(state, view.candidates(mark))

    def held_among(self, instants: list[str]) -> set[str]:
        """Those of `instants` the log holds by their app transaction."""
        state = self._log()
        if state is None or not instants:
            return set()
        return set(instants) - set(self._unheld(state, instants))

    def _unheld(self, state: LogState, instants: list[str]) -> list[str]:
        """Those of `instants` without an app transaction in the log. Where the table
        expires app transactions (``delta.setTransactionRetentionDuration``, set by a user
        or another tool), one old enough to have lost its transaction cannot be told from
        one never published: TableFormatError, rather than publishing it twice."""
        missing = [i for i in instants if APP_PREFIX + i not in state.txns]
        seconds = interval_seconds(state.metadata.configuration
                                   if state.metadata is not None else {}, TXN_RETENTION_KEY)
        if seconds is None or not missing:
            return missing
        horizon = time.time() - seconds + TXN_MARGIN_S
        old = [i for i in missing if parse_instant(i).timestamp() < horizon]
        if old:
            raise TableFormatError(
                f"the Delta table {self.uri} expires app transactions ({TXN_RETENTION_KEY}"
                f" = {seconds:g} s): whether it holds instant {old[0]} ({len(old)} such "
                "instant(s), old enough to have lost theirs) cannot be told; move "
                "_delta_log/ aside and run markerstore verify --repair to rebuild it from "
                "the timeline")
        return missing

    def position(self) -> str | None:
        """``v<version>`` of the log's latest version, None before the first."""
        state = self._read()
        return None if state is None else f"v{state.version}"

    def referenced_paths(self) -> set[str]:
        """The files of the latest version (older versions' removed files are deleted by
        markerstore once the replace that removed them is published, as a zero-retention
        VACUUM would; within the retention they are kept for time travel)."""
        paths = delta_state.live_files(self.table.storage)
        return set() if paths is None else {urllib.parse.unquote(p) for p in paths}

    def check_write(self, schema: pa.Schema | None, partition_by: tuple[str, ...]) -> None:
        """Refuse, before anything is written, a write the Delta table cannot take: a
        column type Delta has no equivalent for, other partition columns than the
        table's, a column whose type changes. A log that cannot be read now is the
        publish's to report (the write is not refused for it)."""
        if schema is not None:
            for field in schema:
                delta_type_json(field)
        try:
            state = self._log()
            metadata = None if state is None else state.metadata
            existing = None if state is None else state.schema()
        except Exception as exc:
            log.warning("the Delta log of %s cannot be read to check the write (%s); "
                        "its publish will say", self.uri, exc)
            return
        if metadata is None or existing is None:
            return
        table_partitions = tuple(metadata.partition_columns)
        if partition_by != table_partitions:
            raise TableFormatError(
                f"this write is partitioned by {list(partition_by)}, the Delta table "
                f"{self.uri} by {list(table_partitions)}: a Delta table keeps its "
                "partition columns (write with those, or to a new table)")
        if schema is not None:
            plan_schema(existing, schema)

    # -- another tool's versions, a lost log: the timeline's files again -----------------

    def foreign_commits(self) -> list[dict[str, Any]]:
        """The versions after markerstore's last one that add or remove files without an
        instant (another tool's appends, overwrites, compactions), newest first: each
        ``{"id": "version 7", "what": "WRITE (Overwrite) by delta-rs:py-1.6.6"}``."""
        state = self._read()
        if state is None or INSTANT_KEY in state.info or RESTORED_KEY in state.info:
            return []  # the latest version is markerstore's
        found = []
        latest = state.version
        for version in range(latest, max(-1, latest - FOREIGN_LIMIT), -1):
            actions = delta_state.read_version(self.table.storage, version)
            if actions is None:
                break
            info: dict[str, Any] = next(
                (a["commitInfo"] for a in actions if "commitInfo" in a), {})
            if INSTANT_KEY in info or RESTORED_KEY in info:
                break
            if any("add" in a or "remove" in a for a in actions):
                mode = (info.get("operationParameters") or {}).get("mode")
                by = info.get("engineInfo") or info.get("clientVersion") or "another tool"
                what = f"{info.get('operation', 'a commit')}{f' ({mode})' if mode else ''}"
                found.append({"id": f"version {version}", "what": f"{what} by {by}"})
        return found

    def problem(self, completed: list[str]) -> dict[str, str] | None:
        """What is lost of the Delta table: its log, while the timeline has completed
        instants (None: nothing)."""
        if not completed or self._load() is not None:
            return None
        return {"kind": "format_lost", "path": "_delta_log/",
                "detail": f"the Delta log of {self.uri} is missing (deleted, or never "
                          f"published): it holds none of the {len(completed)} completed "
                          "instant(s)"}

    def restore(self, commit: CommitToPublish, instants: list[str]) -> str:
        """One version that makes the Delta table hold exactly `commit.added` (the
        timeline's files as of `commit.instant`): the log created anew where it is
        missing, with `instants` (every completed instant up to `commit.instant`) as held;
        else another tool's files removed and markerstore's added. Returns the version."""
        from deltalake.transaction import CommitProperties, RemoveAction, Transaction

        now = int(time.time() * 1000)
        delta = self._load()
        properties = CommitProperties(
            custom_metadata={RESTORED_KEY: commit.instant, "markerstore.mode": "restore"},
            app_transactions=[Transaction(APP_PREFIX + i, 1, now) for i in instants]
            if delta is None else None)
        schema = _delta_schema(commit.schema)
        if delta is None:
            self._create(commit, self._actions(commit, now), properties)
            return "version 0"
        current = {urllib.parse.unquote(p) for p in pa.table(delta.get_add_actions(
            flatten=True)).column("path").to_pylist()}
        wanted = {f.path for f in commit.added}
        adds = self._actions(only_files(commit, wanted - current), now)
        removes = [RemoveAction(p, True, now) for p in sorted(current - wanted)]
        delta.create_write_transaction([*adds, *removes], mode="append", schema=schema,
                                       partition_by=list(delta.metadata().partition_columns)
                                       or None, commit_properties=properties)
        return f"version {delta.version() + 1}"

    def publish(self, commit: CommitToPublish) -> None:
        from deltalake.transaction import CommitProperties, Transaction

        state = self._read()
        app_id = APP_PREFIX + commit.instant
        if state is not None and app_id in state.txns:
            return  # published already
        custom = {INSTANT_KEY: commit.instant, "markerstore.mode": commit.mode,
                  **(commit.settled.to_summary() if commit.settled is not None else {})}
        if state is not None:
            self._write(state, commit, custom, app_id)
            return
        if not commit.added:
            raise PublishDeferred(f"instant {commit.instant} has no file to give the Delta "
                                  f"table {self.uri} its schema")
        now = int(time.time() * 1000)
        properties = CommitProperties(custom_metadata=custom,
                                      app_transactions=[Transaction(app_id, 1, now)])
        try:
            self._create(commit, self._actions(commit, now), properties)
        except Exception as exc:
            # A concurrent publisher of the same instant wins: that is this publish done.
            again = self._log()
            if again is not None and app_id in again.txns:
                log.info("instant %s: published to Delta by another writer (%s)",
                         commit.instant, exc)
                return
            raise
        log.info("instant %s: Delta table created (%d file(s))", commit.instant,
                 len(commit.added))

    def _write(self, state: LogState, commit: CommitToPublish, custom: dict[str, str],
               app_id: str) -> None:
        """Publish `commit` as the log's next version, written as the protocol lays it
        out (:func:`~markerstore.formats.delta_evolve.write_version`: created if absent),
        with a ``metaData`` action where its columns change the table's schema; a
        version another writer took first is looked at again (the same instant
        published by it is this publish done)."""
        types = {f.name: f.type for f in commit.schema}
        stats = file_stats(self.table, commit) if commit.added else {}
        for _ in range(COMMIT_ATTEMPTS):
            merged = plan_schema(state.schema(), _delta_schema(commit.schema),
                                 has_files=True) if commit.added else None
            metadata = self._partitioning(state, commit)
            actions = version_actions(commit, metadata, state.protocol, merged, stats,
                                      custom, app_id,
                                      functools.partial(_partition_values, types=types))
            version = state.version + 1
            if write_version(self.table.storage, version, actions):
                state.apply(version, actions)
                state.identity = None
                delta_state.remember(self.table.storage, state)
                if version % checkpoint_interval(metadata.configuration) == 0:
                    self._checkpoint(version, metadata)
                log.info("instant %s: Delta version %d published (%d file(s)%s%s)",
                         commit.instant, version, len(commit.added),
                         ", overwrite" if commit.mode == OVERWRITE else "",
                         ", with the table's new schema" if merged is not None else "")
                return
            again = self._log()  # another writer took that version: look again
            if again is None:
                raise MarkerStoreError(f"the Delta log of {self.uri} is gone")
            state = again
            if app_id in state.txns:
                log.info("instant %s: published to Delta by another writer", commit.instant)
                return
        raise MarkerStoreError(f"instant {commit.instant}: the Delta log of {self.uri} "
                               f"moved on {COMMIT_ATTEMPTS} times while publishing it")

    def _actions(self, commit: CommitToPublish, now: int) -> list[Any]:
        """An ``add`` per file of the commit (statistics from its footer), a ``remove`` per
        file it replaced."""
        from deltalake.transaction import AddAction, RemoveAction

        stats = file_stats(self.table, commit)
        types = {f.name: f.type for f in commit.schema}
        adds = [AddAction(f.path, f.size, _partition_values(f.partition, types), now, True,
                          stats.get(f.path, json.dumps({"numRecords": f.rows})))
                for f in commit.added]
        removes = [RemoveAction(p, True, now, None,
                                _partition_values(hive_partition(p), types) or None)
                   for p in commit.removed]
        return [*adds, *removes]

    def _partitioning(self, state: LogState, commit: CommitToPublish) -> Metadata:
        """The table's metadata, whose partition columns a commit with files must share
        (refused when the write starts, so only a write from before that check meets
        this)."""
        metadata = state.metadata
        if metadata is None or state.protocol is None:
            raise TableFormatError(f"the Delta log of {self.uri} has no metaData or "
                                   f"protocol action at version {state.version}")
        existing = list(metadata.partition_columns)
        if commit.added and list(commit.partition_by) != existing:
            raise MarkerStoreError(
                f"instant {commit.instant} is partitioned by {list(commit.partition_by)}, "
                f"the Delta table {self.uri} by {existing}; a Delta table keeps its "
                "partitioning")
        return metadata

    def _checkpoint(self, version: int, metadata: Metadata) -> None:
        """A checkpoint of `version` (delta-rs writes it), as the table's
        ``delta.checkpointInterval`` asks; once the table is older than its
        ``delta.logRetentionDuration`` (Delta's 30 days unless set), the log files before
        the checkpoint older than that are deleted, as Delta's own writers clean the log
        up (before, there is nothing to delete, and looking costs a listing of the whole
        log). A failure is only logged: the log is whole without either."""
        from deltalake import DeltaTable

        try:
            delta = DeltaTable(self.uri, version=version, storage_options=self.storage_options)
            delta.create_checkpoint()
            if _log_expires(metadata):
                delta.cleanup_metadata()
        except Exception as exc:
            log.warning("the Delta checkpoint of %s at version %d or its log cleanup was "
                        "not done: %s", self.uri, version, exc)

    def _create(self, commit: CommitToPublish, actions: list[Any], properties: Any) -> None:
        """The Delta table, created by its first version (`actions`: `commit`'s files)."""
        from deltalake import Schema
        from deltalake.transaction import create_table_with_add_actions

        if commit.removed:
            raise MarkerStoreError(f"instant {commit.instant} replaces files but {self.uri} "
                                   "has no Delta log to remove them from")
        create_table_with_add_actions(
            self.uri, Schema.from_arrow(_delta_schema(commit.schema)), actions, mode="error",
            partition_by=list(commit.partition_by) or None,
            configuration=table_configuration(self.table), storage_options=self.storage_options,
            commit_properties=properties)
        self._load()


def _log_expires(metadata: Metadata) -> bool:
    """Whether the table is old enough for log files to have passed its
    ``delta.logRetentionDuration`` (a table whose creation time is not known: yes)."""
    seconds = interval_seconds(metadata.configuration, LOG_RETENTION_KEY)
    seconds = LOG_RETENTION_DEFAULT_S if seconds is None else seconds
    return metadata.created_time is None or \
        time.time() * 1000 - metadata.created_time >= seconds * 1000


def _delta_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema as Delta takes it: no field or schema metadata, large types
    normalised by delta-rs itself."""
    return pa.schema([f.remove_metadata() for f in schema])


def _partition_values(values: Mapping[str, str | None], types: Mapping[str, pa.DataType]
                      ) -> dict[str, str | None]:
    """A file's partition values as Delta keeps them (:func:`delta_partition_value`)."""
    return {name: delta_partition_value(text, types.get(name, pa.string()))
            for name, text in values.items()}


def only_files(commit: CommitToPublish, paths: set[str]) -> CommitToPublish:
    """`commit` with only those of its added files at `paths`, and nothing removed."""
    return dataclasses.replace(commit, added=tuple(f for f in commit.added if f.path in paths),
                               removed=())


def publisher(table: Table) -> DeltaPublisher:
    """The Delta publisher of `table` (the factory in :mod:`markerstore.formats` calls
    this)."""
    return DeltaPublisher(table)
