"""Apache Iceberg: each completed instant of a markerstore table becomes one snapshot of an
Iceberg table whose location is the markerstore table's folder (pyiceberg).

* An ``APPEND`` instant is a fast append of its files; an ``OVERWRITE`` (a replace) is
  one overwrite snapshot that deletes the files the replace removed and adds its files:
  readers see the old files or the new, never both and never neither.
* The snapshot summary holds the instant (``markerstore.instant``), so
  :meth:`IcebergPublisher.published_instants` reads the table's own snapshot log and a
  second publish of an instant is a no-op.
* The Iceberg table is created by the first publish, from the commit's schema and
  partition columns (identity partitions), with a name mapping
  (``schema.name-mapping.default``): markerstore's files carry no Iceberg field ids.
* The partition record of every file comes from the commit, never from the file (see
  :mod:`markerstore.formats.iceberg_files`).
* Iceberg's metadata (table metadata JSON, manifest lists, manifests) is written under
  the table folder's ``metadata/``; the embedded catalog, when it is the default, is the
  SQLite file ``.markerstore/iceberg/catalog.db`` of a local table.

The catalog and where the table is: :mod:`markerstore.formats.iceberg_catalog`.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import fsspec
import pyarrow as pa

try:
    from pyiceberg.catalog import Catalog
except ModuleNotFoundError as _missing:  # pragma: no cover - depends on the installation
    raise ModuleNotFoundError(
        "publishing Iceberg needs pyiceberg: pip install 'markerstore[iceberg]'",
        name=_missing.name) from _missing
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import ExpireSnapshots, UpdateSnapshot
from pyiceberg.utils.properties import property_as_bool

from markerstore.backoff import backoff
from markerstore.config import ICEBERG_IDENTIFIER as IDENTIFIER
from markerstore.errors import ConfigError, IcebergPublishError, IcebergTableTaken, TableFormatError
from markerstore.formats.base import (
    APPEND,
    OVERWRITE,
    SETTLED_BEFORE_KEY,
    SETTLED_COUNT_KEY,
    CommitToPublish,
    PublishDeferred,
    Settled,
    TimelineView,
)
from markerstore.formats.iceberg_catalog import (
    CATALOG_PREFIX,
    COMMIT_ATTEMPTS,
    DEFAULT_CATALOG_FILE,
    IDENTIFIER_DEFAULT,
    INSTANT_PROPERTY,
    METADATA_FOLDER,
    RETRY_WAIT_S,
    catalog_options,
    check_catalog_properties,
    check_identifier,
    default_identifier,
    open_catalog,
    resolve_catalog,
    sqlite_file,
    table_location,
)
from markerstore.formats.iceberg_evolve import check_types, evolve, plan_schema
from markerstore.formats.iceberg_files import (
    MergingOverwrite,
    check_partitioning,
    data_files,
    iceberg_schema,
    identity_spec,
    live_files,
    optional_partition_columns,
    referenced_files,
    relative,
)
from markerstore.formats.iceberg_merge import TieredAppend
from markerstore.formats.iceberg_restore import IcebergRestore
from markerstore.table import Table as MarkerstoreTable

__all__ = ["CATALOG_PREFIX", "DEFAULT_CATALOG_FILE", "IDENTIFIER", "INSTANT_PROPERTY",
           "METADATA_FOLDER", "IcebergPublishError", "IcebergPublisher",
           "publisher_from_options"]

# The table properties that say before which instant the snapshots were expired, and
# how many instants the timeline had before it then (:meth:`IcebergPublisher.expire_before`).
EXPIRED_BEFORE_PROPERTY = "markerstore.expired-before"
EXPIRED_COUNT_PROPERTY = "markerstore.expired-count"
# commit.manifest.min-count-to-merge of the tables markerstore creates (Iceberg's default,
# 100, lets a table of small commits reach 100 manifests, each opened by every commit)
MIN_MERGE_COUNT = "16"
# write.metadata.previous-versions-max of the tables markerstore creates: the metadata files
# the metadata log names (Iceberg's default, 100, is half of a small table's metadata)
PREVIOUS_VERSIONS = 16
# Snapshots superseded before the retention's cutoff that a write's expiry lets gather
# before it expires them (in one commit; a write does not pay one every time).
EXPIRE_BATCH = 16
_VERSION = re.compile(r"^(\d+)-")
_log = logging.getLogger(__name__)


class IcebergPublisher(IcebergRestore):
    """The Iceberg format of one markerstore table (a :class:`FormatPublisher`); what can
    go wrong with it from outside, and its repair: :class:`IcebergRestore`."""

    name = "iceberg"
    # Iceberg's own folder in the table: verify counts nothing in it as an orphan.
    metadata_folder = METADATA_FOLDER
    held_before_property = EXPIRED_BEFORE_PROPERTY

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None,
                 catalog_properties: Mapping[str, str] | None = None,
                 identifier: str | None = None) -> None:
        self.location = table_location(url)
        self.storage_options = dict(storage_options or {})
        check_catalog_properties(catalog_properties or {})
        self.catalog_properties = resolve_catalog(url, self.location, catalog_properties,
                                                  self.storage_options)
        self.identifier = check_identifier(identifier or default_identifier(self.location))
        self._catalog: Catalog | None = None
        self._table: Table | None = None  # the table as this publish last read it

    # -- the catalog and the table -------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = open_catalog(self.catalog_properties)
        return self._catalog

    def table(self) -> Table | None:
        """The Iceberg table, or None before the first publish (a SQLite catalog that does
        not exist yet is not created by asking)."""
        db = sqlite_file(self.catalog_properties)
        if self._catalog is None and db is not None and not os.path.exists(db):
            return None
        try:
            table = self.catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None
        if table.location().rstrip("/") != self.location:
            raise IcebergTableTaken(
                f"the Iceberg identifier {self.identifier} names the table at "
                f"{table.location()} in this catalog, not this table ({self.location}): "
                f"set {IDENTIFIER} to a name of its own")
        self._table = table
        return table

    # -- the FormatPublisher protocol ----------------------------------------------------

    def published_instants(self) -> set[str]:
        """The instants named in the summaries of the table's retained snapshots."""
        table = self.table()
        return set() if table is None else self._instants(table)

    def publish(self, commit: CommitToPublish) -> None:
        """Make `commit` one snapshot, atomically; a no-op when a snapshot holds it. A
        commit that another writer committed first is tried again on the new table."""
        if commit.mode not in (APPEND, OVERWRITE):
            raise IcebergPublishError(f"instant {commit.instant}: unknown mode {commit.mode!r}")
        for attempt in range(COMMIT_ATTEMPTS):
            # the table as this publish last read or committed it; after a lost race, anew
            table = self._table if attempt == 0 and self._table is not None else self.table()
            if table is None and not commit.added:
                raise PublishDeferred(f"instant {commit.instant} has no file to give the "
                                      f"Iceberg table {self.identifier} its schema")
            table = table or self._create(commit)
            if self._held(table)(commit.instant):
                return
            try:
                self._commit(table, commit)
                return
            except CommitFailedException:
                self._drop_lost_metadata(table.metadata_location)
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise
                time.sleep(backoff(attempt, RETRY_WAIT_S, full_jitter=True))

    def held_among(self, instants: list[str]) -> set[str]:
        """Those of `instants` the table holds: named by a retained snapshot, or before the
        instant its snapshots were expired up to (:meth:`expire_before`)."""
        table = self.table()
        if table is None or not instants:
            return set()
        held = self._held(table)
        return {i for i in instants if held(i)}

    def unpublished(self, view: TimelineView) -> list[str]:
        """The completed instants of `view` the table does not hold: its metadata read
        once. An instant before the point its snapshots were expired up to is held, unless
        the timeline has more instants before that point than it had then: a writer whose
        clock is behind started one since, and it cannot be told from those expired (an
        IcebergPublishError says so)."""
        table = self.table()
        if table is None:
            return list(view.completed)
        expired = _expired_mark(table)
        if expired is not None and not view.still_settled(expired):
            late = view.count_before(expired.before) - expired.count
            raise IcebergPublishError(
                f"{late} instant(s) older than {expired.before}, the instant the Iceberg "
                f"table's snapshots were expired up to, appeared on the timeline since (a "
                "writer's clock behind the others'): which of them it holds cannot be "
                "told; publish them by hand or rebuild the Iceberg table")
        held = self._held(table)
        return [i for i in view.completed if not held(i)]

    def position(self) -> str | None:
        """``snapshot <id>`` of the current snapshot, None before the first."""
        table = self._table if self._table is not None else self.table()
        current = None if table is None else table.current_snapshot()
        return None if current is None else f"snapshot {current.snapshot_id}"

    def check_write(self, schema: pa.Schema | None, partition_by: tuple[str, ...]) -> None:
        """Refuse, before anything is written, a write the Iceberg table cannot take: a
        column type Iceberg has no equivalent for, other partition columns than the
        table's, a type change Iceberg does not allow as a widening, an identifier the
        catalog holds for another table. A catalog that does not answer now is the
        publish's to report (the write is not refused for it)."""
        if schema is not None:
            check_types(schema)
        try:
            table = self._table if self._table is not None else self.table()
        except (TableFormatError, ConfigError):
            raise
        except Exception as exc:
            _log.warning("the Iceberg catalog of %s cannot be read to check the write (%s); "
                         "its publish will say", self.identifier, exc)
            return
        if table is None:
            return
        try:
            check_partitioning(table.metadata, partition_by)
        except IcebergPublishError as exc:
            raise TableFormatError(f"{exc}: an Iceberg table published from markerstore "
                                   "keeps its partition columns") from None
        if schema is not None:
            plan_schema(table.schema(), schema)

    def referenced_paths(self) -> set[str]:
        """Table-relative paths of the data files any retained snapshot holds."""
        return self.referenced_paths_since(None)

    def referenced_paths_since(self, instant: str | None) -> set[str]:
        """:meth:`referenced_paths` as they will be once :meth:`expire_before` `instant`
        has expired the older snapshots (None: as they are)."""
        table = self.table()
        return set() if table is None else self._referenced(table, instant)

    def _referenced(self, table: Table, instant: str | None = None) -> set[str]:
        metadata = table.metadata
        if instant is not None:
            expired = set(_expirable(table, instant))
            metadata = metadata.model_copy(update={"snapshots": [
                s for s in metadata.snapshots if s.snapshot_id not in expired]})
        paths = referenced_files(table.io, metadata)
        return {rel for rel in (relative(p, self.location) for p in paths) if rel is not None}

    # -- beyond the protocol: releasing old snapshots -----------------------------------

    def expire_before(self, instant: str, count: int | None = None, *,
                      released: bool = True) -> set[str]:
        """Expire the snapshots of the instants before `instant` (never the current one)
        and return the table-relative paths of the data files no retained snapshot
        references any more: the files a replace replaced, which markerstore may now
        delete. Call it only when every instant before `instant` is terminal and every
        completed one published (:func:`markerstore.formats.referenced_paths` picks such
        a point): from then on an instant before it counts as published (:meth:`holds`,
        and :meth:`publish` is a no-op for it), though :meth:`published_instants` no
        longer lists the expired ones. `count`: how many instants the timeline has before
        `instant` (kept, so that one started later with an older id is noticed); without
        `released`, the paths are not worked out (every manifest read twice) and the set
        is empty."""
        table = self.table()
        if table is None:
            return set()
        expired = _expirable(table, instant)
        before = self._referenced(table) if released else set()
        metadata_before = manifest_files(table)
        after = _without_retries(table)
        with after.transaction() as tx:
            if expired:
                ExpireSnapshots(tx).by_ids(expired).commit()
            if instant > (table.properties.get(EXPIRED_BEFORE_PROPERTY) or ""):
                mark = {EXPIRED_BEFORE_PROPERTY: instant}
                if count is not None:
                    mark[EXPIRED_COUNT_PROPERTY] = str(count)
                tx.set_properties(mark)
        _drop_old_metadata(table, after)
        self._table = after  # its metadata is the committed one now
        for path in sorted(metadata_before - manifest_files(after)):
            after.io.delete(path)         # what only the expired snapshots referenced
        return before - self._referenced(after) if released else set()

    def retained_from(self, cutoff_ms: int) -> str | None:
        """The instant of the snapshot that was current at `cutoff_ms` (epoch ms): time
        travel back to the cutoff reads it, so it and the later ones are kept, and
        :meth:`expire_before` it expires the older ones. None where no snapshot of an
        instant is that old."""
        table = self.table()
        if table is None:
            return None
        old = [s for s in table.metadata.snapshots
               if s.timestamp_ms <= cutoff_ms and s.summary is not None
               and s.summary.get(INSTANT_PROPERTY)]
        if not old:
            return None
        latest = max(old, key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
        return str(latest.summary.get(INSTANT_PROPERTY)) if latest.summary else None

    def snapshots_due(self, cutoff_ms: int) -> bool:
        """Whether :data:`EXPIRE_BATCH` snapshots or more were superseded before
        `cutoff_ms` (epoch ms): the write's expiry then expires them (the table as this
        publish last read it; not read for this)."""
        table = self._table
        if table is None:
            return False
        old = sum(1 for s in table.metadata.snapshots if s.timestamp_ms <= cutoff_ms)
        return old - 1 >= EXPIRE_BATCH

    def expired_before(self) -> str | None:
        """The instant before which :meth:`expire_before` expired every snapshot (those
        instants were published), or None."""
        table = self.table()
        return None if table is None else table.properties.get(EXPIRED_BEFORE_PROPERTY)

    # -- one snapshot --------------------------------------------------------------------

    def holds(self, instant: str) -> bool:
        """Whether `instant` is published: a retained snapshot names it, or it is before
        the instant that :meth:`expire_before` expired the snapshots up to."""
        table = self.table()
        return table is not None and self._held(table)(instant)

    @classmethod
    def _held(cls, table: Table) -> Callable[[str], bool]:
        """Whether the table holds an instant: its retained snapshots' instants (read once),
        and the point its snapshots were expired up to."""
        named = cls._instants(table)
        expired = table.properties.get(EXPIRED_BEFORE_PROPERTY)
        return lambda i: i in named or (expired is not None and i < expired)

    @staticmethod
    def _instants(table: Table) -> set[str]:
        found = (s.summary.get(INSTANT_PROPERTY) for s in table.metadata.snapshots
                 if s.summary is not None)
        return {instant for instant in found if instant}

    def _create(self, commit: CommitToPublish) -> Table:
        """The Iceberg table, created empty from the commit's schema and partitioning
        (by this writer, or by another that created it first)."""
        if commit.removed:
            raise IcebergPublishError(
                f"instant {commit.instant} replaces {len(commit.removed)} file(s) but the "
                f"Iceberg table {self.identifier} does not exist yet: the formats have "
                "drifted (publish the table's instants from its first)")
        schema = iceberg_schema(optional_partition_columns(commit.schema,
                                                           commit.partition_by))
        spec = identity_spec(schema, commit.partition_by)
        self._create_namespace()
        try:
            return self.catalog.create_table(
                self.identifier, schema, location=self.location, partition_spec=spec,
                properties={TableProperties.DEFAULT_NAME_MAPPING:
                            schema.name_mapping.model_dump_json(),
                            # metadata files beyond the kept history are deleted, and the
                            # history (the metadata log every load parses) is 16 files,
                            # not 100: time travel reads the retained snapshots
                            TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
                            TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(PREVIOUS_VERSIONS),
                            # a stream's many commits: manifests merged, 16 of a tier into
                            # one of the next (each commit reads them all; .iceberg_merge)
                            TableProperties.MANIFEST_MERGE_ENABLED: "true",
                            TableProperties.MANIFEST_MIN_MERGE_COUNT: MIN_MERGE_COUNT})
        except TableAlreadyExistsError:
            self._drop_lost_metadata(None)
            table = self.table()
            if table is None:
                raise
            return table

    def _create_namespace(self) -> None:
        """The identifier's namespace, created unless it exists (a SQL catalog raises its
        database's error when another process creates it at the same moment)."""
        namespace = self.identifier.rpartition(".")[0]
        if not namespace or self.catalog.namespace_exists(namespace):
            return
        try:
            self.catalog.create_namespace_if_not_exists(namespace)
        except Exception:
            if not self.catalog.namespace_exists(namespace):
                raise

    def _drop_lost_metadata(self, base: str | None) -> None:
        """Delete the metadata file a commit that lost a race wrote: a catalog that keeps
        its metadata in the table (SQL, Glue, Hive) writes ``<version>-<uuid>.metadata.json``
        before it swaps the pointer, and every writer that started from `base` and did not
        win wrote one of that version that nothing will reference."""
        match = _VERSION.match(base.rpartition("/")[2]) if base else None
        prefix = f"{(int(match.group(1)) if match else -1) + 1:05d}-"
        table = self.table()
        keep = set() if table is None else {
            table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}
        try:
            fs, folder = fsspec.core.url_to_fs(f"{self.location}/{METADATA_FOLDER}",
                                               **self.storage_options)
            fs.invalidate_cache(folder)       # s3fs keeps listings; the file is new
            for path in fs.ls(folder, detail=False):
                name = path.rstrip("/").rpartition("/")[2]
                full = f"{self.location}/{METADATA_FOLDER}/{name}"
                if name.startswith(prefix) and name.endswith(".metadata.json") \
                        and full not in keep:
                    fs.rm(path)
        except OSError as exc:
            _log.warning("could not delete the metadata of a lost Iceberg commit: %s", exc)

    def _commit(self, table: Table, commit: CommitToPublish) -> None:
        if commit.added:  # a commit without files has no partitioning to check
            check_partitioning(table.metadata, tuple(commit.partition_by))
        removed = self._removed(table, commit) if commit.mode == OVERWRITE else []
        evolved = plan_schema(table.schema(), commit.schema, has_files=True) \
            if commit.added else None
        committing = _without_retries(table, heads_only=True)
        with committing.transaction() as tx:
            if evolved is not None:
                evolve(tx, commit.instant, evolved)
            files = data_files(table.io, tx.table_metadata, self.location, commit.added)
            snapshot = tx.update_snapshot(snapshot_properties=self._summary(commit))
            with (MergingOverwrite(snapshot) if removed else _appender(tx, snapshot)) as op:
                for data_file in removed:
                    op.delete_data_file(data_file)
                for data_file in files:
                    op.append_data_file(data_file)
        _drop_old_metadata(table, committing)
        self._table = committing  # its metadata is the committed one now

    def _removed(self, table: Table, commit: CommitToPublish) -> list[Any]:
        live = live_files(table.io, table.metadata)
        wanted = {f"{self.location}/{path}": path for path in commit.removed}
        missing = sorted(path for full, path in wanted.items() if full not in live)
        if missing:
            raise IcebergPublishError(
                f"instant {commit.instant} replaces {len(missing)} file(s) the Iceberg table "
                f"does not hold (first: {missing[0]}): the formats have drifted")
        return [live[full] for full in wanted]

    @staticmethod
    def _summary(commit: CommitToPublish) -> dict[str, str]:
        settled = commit.settled.to_summary() if commit.settled is not None else {}
        return {INSTANT_PROPERTY: commit.instant, **settled}


def _expired_mark(table: Table) -> Settled | None:
    """The point the table's snapshots were expired up to, with the count of instants
    before it then; None where none were expired, or before counts were kept."""
    before = table.properties.get(EXPIRED_BEFORE_PROPERTY)
    count = table.properties.get(EXPIRED_COUNT_PROPERTY)
    return Settled.from_summary({SETTLED_BEFORE_KEY: before, SETTLED_COUNT_KEY: count})


def _expirable(table: Table, instant: str) -> list[int]:
    """The snapshots :meth:`IcebergPublisher.expire_before` `instant` expires: those of the
    instants before it, never one a branch or tag points at."""
    kept = {ref.snapshot_id for ref in table.metadata.refs.values()}  # heads, tags
    return [s.snapshot_id for s in table.metadata.snapshots
            if s.snapshot_id not in kept and s.summary is not None
            and (s.summary.get(INSTANT_PROPERTY) or instant) < instant]


def _appender(tx: Transaction, snapshot: UpdateSnapshot) -> Any:
    """A fast append, or one whose manifests are merged in tiers where the table asks for
    merging (``commit.manifest-merge.enabled``; :mod:`.iceberg_merge`)."""
    merge = property_as_bool(tx.table_metadata.properties,
                             TableProperties.MANIFEST_MERGE_ENABLED,
                             TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT)
    if not merge:
        return snapshot.fast_append()
    return TieredAppend(operation=Operation.APPEND, transaction=tx, io=snapshot._io,
                        branch=snapshot._branch,
                        snapshot_properties=snapshot._snapshot_properties)


def manifest_files(table: Table) -> set[str]:
    """The manifest lists and manifests of the table's retained snapshots."""
    paths: set[str] = set()
    for snapshot in table.metadata.snapshots:
        paths.add(snapshot.manifest_list)
        paths.update(m.manifest_path for m in snapshot.manifests(table.io))
    return paths


def _without_retries(table: Table, *, heads_only: bool = False) -> Table:
    """`table` for one transaction of markerstore's, which does not retry a failed catalog
    commit itself, over the part of its metadata a transaction reads.

    pyiceberg retries a commit that lost a race by rebuilding it on the new head, which
    would append the same files a second time when the winner published the same instant;
    :meth:`IcebergPublisher.publish` retries instead, after reading the instants again.
    The setting is the transaction's only: the table's own properties are not changed.

    pyiceberg also copies a transaction's whole metadata each time it reads it (some
    twenty times a commit), so a commit cost more with every snapshot and metadata file
    the table keeps. The catalog applies the transaction's updates to the whole metadata
    it loads itself, once; the transaction works over it without the snapshot and
    metadata logs, and with `heads_only` without the snapshots the refs do not name (the
    current one, a new snapshot's parent, stays). :func:`_drop_old_metadata` then deletes
    the metadata files the commit dropped from the log, as pyiceberg would have."""
    metadata = table.metadata
    update: dict[str, Any] = {
        "properties": {**metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"},
        "snapshot_log": [], "metadata_log": []}
    if heads_only:
        heads = {ref.snapshot_id for ref in metadata.refs.values()}
        update["snapshots"] = [s for s in metadata.snapshots if s.snapshot_id in heads]
    return Table(table.name(), metadata.model_copy(update=update), table.metadata_location,
                 table.io, table.catalog)


def _drop_old_metadata(base: Table, committed: Table) -> None:
    """Delete the metadata files the commit from `base` to `committed` dropped from the
    table's metadata log (``write.metadata.delete-after-commit.enabled``, whose count
    ``write.metadata.previous-versions-max`` keeps)."""
    if committed.metadata_location == base.metadata_location or not property_as_bool(
            committed.metadata.properties, TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED,
            TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED_DEFAULT):
        return
    kept = {e.metadata_file for e in committed.metadata.metadata_log}
    dropped = {e.metadata_file for e in base.metadata.metadata_log} - kept
    for path in sorted(dropped - {committed.metadata_location}):
        try:
            committed.io.delete(path)
        except OSError as exc:  # an orphan Iceberg's cleanup finds; never the table's state
            _log.warning("could not delete the old Iceberg metadata file %s: %s", path, exc)


def publisher_from_options(url: str, storage_options: Mapping[str, Any] | None,
                           options: Mapping[str, Any]) -> IcebergPublisher:
    """The publisher of the table at `url` from markerstore options (the catalog keys
    under :data:`CATALOG_PREFIX` and :data:`IDENTIFIER`)."""
    identifier = str(options.get(IDENTIFIER) or IDENTIFIER_DEFAULT) or None
    return IcebergPublisher(url, storage_options, catalog_options(options), identifier)


def publisher(table: MarkerstoreTable) -> IcebergPublisher:
    """The Iceberg publisher of `table`, from the options it was opened with (the catalog
    keys under :data:`CATALOG_PREFIX`, :data:`IDENTIFIER`) and its storage options (the
    factory in :mod:`markerstore.formats.publish` calls this)."""
    return publisher_from_options(table.storage.url(), table.storage.storage_options,
                                  table.settings.explicit())
