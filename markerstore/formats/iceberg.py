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
import random
import re
import time
from collections.abc import Mapping
from typing import Any

import fsspec

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
    ValidationError,
)
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.update.snapshot import ExpireSnapshots, UpdateSnapshot
from pyiceberg.utils.properties import property_as_bool

from markerstore.config import ICEBERG_IDENTIFIER as IDENTIFIER
from markerstore.formats.base import APPEND, OVERWRITE, CommitToPublish, PublishDeferred
from markerstore.formats.iceberg_catalog import (
    CATALOG_PREFIX,
    COMMIT_ATTEMPTS,
    DEFAULT_CATALOG_FILE,
    IDENTIFIER_DEFAULT,
    INSTANT_PROPERTY,
    METADATA_FOLDER,
    RETRY_WAIT_S,
    catalog_options,
    default_identifier,
    open_catalog,
    resolve_catalog,
    sqlite_file,
    table_location,
)
from markerstore.formats.iceberg_files import (
    IcebergPublishError,
    check_partitioning,
    data_files,
    iceberg_schema,
    identity_spec,
    live_files,
    optional_partition_columns,
    referenced_files,
    relative,
)
from markerstore.formats.iceberg_restore import IcebergRestore
from markerstore.table import Table as MarkerstoreTable

__all__ = ["CATALOG_PREFIX", "DEFAULT_CATALOG_FILE", "IDENTIFIER", "INSTANT_PROPERTY",
           "METADATA_FOLDER", "IcebergPublishError", "IcebergPublisher",
           "publisher_from_options"]

# The table property that says before which instant the snapshots were expired.
EXPIRED_BEFORE_PROPERTY = "markerstore.expired-before"
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
        self.catalog_properties = resolve_catalog(url, self.location, catalog_properties,
                                                  self.storage_options)
        self.identifier = identifier or default_identifier(self.location)
        self._catalog: Catalog | None = None

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
            raise IcebergPublishError(
                f"Iceberg table {self.identifier} is at {table.location()}, not at this "
                f"table's {self.location}: set {IDENTIFIER} to another name")
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
            table = self.table()
            if table is None and not commit.added:
                raise PublishDeferred(f"instant {commit.instant} has no file to give the "
                                      f"Iceberg table {self.identifier} its schema")
            table = table or self._create(commit)
            if self._holds(table, commit.instant):
                return
            try:
                self._commit(table, commit)
                return
            except CommitFailedException:
                self._drop_lost_metadata(table.metadata_location)
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise
                time.sleep(random.uniform(0, RETRY_WAIT_S * 2 ** attempt))

    def held_among(self, instants: list[str]) -> set[str]:
        """Those of `instants` the table holds: named by a retained snapshot, or before the
        instant its snapshots were expired up to (:meth:`expire_before`)."""
        table = self.table()
        if table is None or not instants:
            return set()
        return {i for i in instants if self._holds(table, i)}

    def referenced_paths(self) -> set[str]:
        """Table-relative paths of the data files any retained snapshot holds."""
        return self.referenced_paths_since(None)

    def referenced_paths_since(self, instant: str | None) -> set[str]:
        """:meth:`referenced_paths` as they will be once :meth:`expire_before` `instant`
        has expired the older snapshots (None: as they are)."""
        table = self.table()
        if table is None:
            return set()
        metadata = table.metadata
        if instant is not None:
            expired = set(_expirable(table, instant))
            metadata = metadata.model_copy(update={"snapshots": [
                s for s in metadata.snapshots if s.snapshot_id not in expired]})
        paths = referenced_files(table.io, metadata)
        return {rel for rel in (relative(p, self.location) for p in paths) if rel is not None}

    # -- beyond the protocol: releasing old snapshots -----------------------------------

    def expire_before(self, instant: str) -> set[str]:
        """Expire the snapshots of the instants before `instant` (never the current one)
        and return the table-relative paths of the data files no retained snapshot
        references any more: the files a replace replaced, which markerstore may now
        delete. Call it only when every completed instant before `instant` is published:
        from then on an instant before it counts as published (:meth:`holds`, and
        :meth:`publish` is a no-op for it), though :meth:`published_instants` no longer
        lists the expired ones."""
        table = self.table()
        if table is None:
            return set()
        expired = _expirable(table, instant)
        before, metadata_before = self.referenced_paths(), manifest_files(table)
        with _without_retries(table).transaction() as tx:
            if expired:
                ExpireSnapshots(tx).by_ids(expired).commit()
            if instant > (self.expired_before() or ""):
                tx.set_properties({EXPIRED_BEFORE_PROPERTY: instant})
        after = self.table() or table
        for path in sorted(metadata_before - manifest_files(after)):
            after.io.delete(path)         # what only the expired snapshots referenced
        return before - self.referenced_paths()

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
        return table is not None and self._holds(table, instant)

    @classmethod
    def _holds(cls, table: Table, instant: str) -> bool:
        expired = table.properties.get(EXPIRED_BEFORE_PROPERTY)
        return instant in cls._instants(table) or expired is not None and instant < expired

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
                            # metadata files beyond the kept history are deleted
                            TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
                            # a stream's many commits: manifests merged, as Iceberg's Java
                            # library does by default
                            TableProperties.MANIFEST_MERGE_ENABLED: "true"})
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
        with _without_retries(table).transaction() as tx:
            new_columns = set(commit.schema.names) - set(tx.table_metadata.schema().column_names)
            if new_columns:
                _add_columns(tx, commit)
            files = data_files(table.io, tx.table_metadata, self.location, commit.added)
            snapshot = tx.update_snapshot(snapshot_properties=self._summary(commit))
            with (snapshot.overwrite() if removed else _appender(tx, snapshot)) as op:
                for data_file in removed:
                    op.delete_data_file(data_file)
                for data_file in files:
                    op.append_data_file(data_file)

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
        return {INSTANT_PROPERTY: commit.instant}


def _expirable(table: Table, instant: str) -> list[int]:
    """The snapshots :meth:`IcebergPublisher.expire_before` `instant` expires: those of the
    instants before it, never one a branch or tag points at."""
    kept = {ref.snapshot_id for ref in table.metadata.refs.values()}  # heads, tags
    return [s.snapshot_id for s in table.metadata.snapshots
            if s.snapshot_id not in kept and s.summary is not None
            and (s.summary.get(INSTANT_PROPERTY) or instant) < instant]


def _add_columns(tx: Transaction, commit: CommitToPublish) -> None:
    """The commit's new columns added to the table's schema (and its name mapping), in the
    transaction of the commit's snapshot."""
    try:
        with tx.update_schema() as update:
            update.union_by_name(commit.schema)
    except (ValueError, ValidationError) as exc:
        raise IcebergPublishError(f"instant {commit.instant}: the table's new columns do not "
                                  f"fit the Iceberg table's schema: {exc}") from exc


def _appender(tx: Transaction, snapshot: UpdateSnapshot) -> Any:
    """A fast append, or a merging one where the table asks for it
    (``commit.manifest-merge.enabled``, as pyiceberg's own append does)."""
    merge = property_as_bool(tx.table_metadata.properties,
                             TableProperties.MANIFEST_MERGE_ENABLED,
                             TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT)
    return snapshot.merge_append() if merge else snapshot.fast_append()


def manifest_files(table: Table) -> set[str]:
    """The manifest lists and manifests of the table's retained snapshots."""
    paths: set[str] = set()
    for snapshot in table.metadata.snapshots:
        paths.add(snapshot.manifest_list)
        paths.update(m.manifest_path for m in snapshot.manifests(table.io))
    return paths


def _without_retries(table: Table) -> Table:
    """`table` whose transactions do not retry a failed catalog commit themselves.

    pyiceberg retries a commit that lost a race by rebuilding it on the new head, which
    would append the same files a second time when the winner published the same instant;
    :meth:`IcebergPublisher.publish` retries instead, after reading the instants again.
    The setting is the transaction's only: the table's own properties are not changed."""
    properties = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    metadata = table.metadata.model_copy(update={"properties": properties})
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)


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
