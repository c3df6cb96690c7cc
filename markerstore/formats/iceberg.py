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

The catalog is any catalog pyiceberg loads, configured with pyiceberg's own property
names (``markerstore.table.iceberg.catalog.<property>``); without ``uri`` or ``type``, a
local table gets the embedded SQL catalog on SQLite. A table on S3 or another object
store must name its catalog: SQLite cannot live on an object store, and a catalog file
on one machine's disk would let writers on other machines each keep their own, diverging
view of the table.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import fsspec

try:
    from pyiceberg.catalog import Catalog, load_catalog
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

from markerstore.errors import ConfigError
from markerstore.formats.base import APPEND, OVERWRITE, CommitToPublish
from markerstore.formats.iceberg_files import (
    IcebergPublishError,
    check_partitioning,
    data_files,
    iceberg_schema,
    identity_spec,
    live_files,
    referenced_files,
    relative,
)
from markerstore.paths import META_SEGMENT

__all__ = ["CATALOG_PREFIX", "DEFAULT_NAMESPACE", "IDENTIFIER", "INSTANT_PROPERTY",
           "IcebergPublishError", "IcebergPublisher", "catalog_options", "default_catalog_db",
           "publisher_from_options"]

# Option keys (markerstore.config holds them with the table's other options).
CATALOG_PREFIX = "markerstore.table.iceberg.catalog."   # + a pyiceberg catalog property
IDENTIFIER = "markerstore.table.iceberg.identifier"     # namespace.table in the catalog
IDENTIFIER_DEFAULT = ""                                 # markerstore.<folder name>
# The name pyiceberg's own configuration knows the catalog by (~/.pyiceberg.yaml,
# PYICEBERG_CATALOG__MARKERSTORE__*), and the namespace of the tables it publishes.
CATALOG_NAME = "markerstore"
DEFAULT_NAMESPACE = CATALOG_NAME
# The snapshot summary property that names the instant a snapshot publishes.
INSTANT_PROPERTY = "markerstore.instant"
# Where the embedded catalog of a local table lives, relative to the table folder.
DEFAULT_CATALOG_FILE = f"{META_SEGMENT}/iceberg/catalog.db"
# Folders (relative to the table) Iceberg writes into: not markerstore's orphans.
METADATA_FOLDER = "metadata"
COMMIT_ATTEMPTS = 8    # another writer's commit won: read the instants again, then retry
RETRY_WAIT_S = 0.05

_LOCAL_SCHEMES = ("", "file")
_S3_SCHEMES = ("s3", "s3a", "s3n")
_NAME = re.compile(r"[^A-Za-z0-9_]")
_VERSION = re.compile(r"^(\d+)-")
_log = logging.getLogger(__name__)


def table_location(url: str) -> str:
    """The Iceberg location of a markerstore table URL (a local path becomes file://)."""
    scheme = urlsplit(url).scheme
    if scheme in _LOCAL_SCHEMES or len(scheme) == 1:  # a Windows drive letter too
        path = urlsplit(url).path if scheme == "file" else url
        return "file://" + os.path.abspath(path).rstrip("/")
    if scheme in _S3_SCHEMES or scheme in ("gs", "gcs", "abfs", "abfss", "hdfs", "oss"):
        return url.rstrip("/")
    raise ConfigError(f"table {url}: Iceberg cannot publish a table on {scheme}:// "
                      "(local, s3://, gs://, abfs://, hdfs:// are supported)")


def default_catalog_db(location: str) -> str:
    """The SQLite file of the embedded catalog of the local table at `location`."""
    return f"{urlsplit(location).path}/{DEFAULT_CATALOG_FILE}"


def catalog_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The pyiceberg catalog properties among markerstore options
    (``markerstore.table.iceberg.catalog.uri`` -> ``uri``)."""
    return {key[len(CATALOG_PREFIX):]: str(value) for key, value in options.items()
            if key.startswith(CATALOG_PREFIX) and len(key) > len(CATALOG_PREFIX)}


def io_properties(storage_options: Mapping[str, Any]) -> dict[str, str]:
    """pyiceberg FileIO properties equal to fsspec/s3fs storage options (endpoint,
    credentials, region), so the table's storage is configured once."""
    client = storage_options.get("client_kwargs") or {}
    pairs = {"s3.endpoint": storage_options.get("endpoint_url") or client.get("endpoint_url"),
             "s3.access-key-id": storage_options.get("key"),
             "s3.secret-access-key": storage_options.get("secret"),
             "s3.session-token": storage_options.get("token"),
             "s3.region": client.get("region_name") or storage_options.get("region")}
    return {key: str(value) for key, value in pairs.items() if value}


def _default_identifier(location: str) -> str:
    folder = urlsplit(location).path.rstrip("/").rpartition("/")[2]
    return f"{DEFAULT_NAMESPACE}.{_NAME.sub('_', folder) or 'table'}"


class IcebergPublisher:
    """The Iceberg format of one markerstore table (a :class:`FormatPublisher`)."""

    name = "iceberg"

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None,
                 catalog_properties: Mapping[str, str] | None = None,
                 identifier: str | None = None) -> None:
        self.location = table_location(url)
        properties = dict(catalog_properties or {})
        local = self.location.startswith("file://")
        if not {"uri", "type"} & properties.keys():
            if not local:
                raise ConfigError(
                    f"table {url}: Iceberg publishing of a table on object storage needs a "
                    f"catalog: set {CATALOG_PREFIX}uri (e.g. sqlite:////path/catalog.db "
                    "on a disk every writer shares, or a REST catalog's URL)")
            properties.update(type="sql", uri=f"sqlite:///{default_catalog_db(self.location)}")
        self.storage_options = dict(storage_options or {})
        self.catalog_properties = {**io_properties(self.storage_options), **properties}
        self.identifier = identifier or _default_identifier(self.location)
        self._catalog: Catalog | None = None

    # -- the catalog and the table -------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            db = self._sqlite_file()
            if db is not None:
                os.makedirs(os.path.dirname(db) or ".", exist_ok=True)
            self._catalog = _load_catalog(self.catalog_properties)
        return self._catalog

    def _sqlite_file(self) -> str | None:
        uri = self.catalog_properties.get("uri", "")
        return uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None

    def table(self) -> Table | None:
        """The Iceberg table, or None before the first publish (a SQLite catalog that does
        not exist yet is not created by asking)."""
        db = self._sqlite_file()
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
            table = self.table() or self._create(commit)
            if commit.instant in self._instants(table):
                return
            try:
                self._commit(table, commit)
                return
            except CommitFailedException:
                self._drop_lost_metadata(table.metadata_location)
                if attempt == COMMIT_ATTEMPTS - 1:
                    raise
                time.sleep(random.uniform(0, RETRY_WAIT_S * 2 ** attempt))

    def referenced_paths(self) -> set[str]:
        """Table-relative paths of the data files any retained snapshot holds."""
        table = self.table()
        if table is None:
            return set()
        paths = referenced_files(table.io, table.metadata)
        return {rel for rel in (relative(p, self.location) for p in paths) if rel is not None}

    # -- one snapshot --------------------------------------------------------------------

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
        schema = iceberg_schema(commit.schema)
        spec = identity_spec(schema, commit.partition_by)
        self._create_namespace()
        try:
            return self.catalog.create_table(
                self.identifier, schema, location=self.location, partition_spec=spec,
                properties={TableProperties.DEFAULT_NAME_MAPPING:
                            schema.name_mapping.model_dump_json()})
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
        check_partitioning(table.metadata, tuple(commit.partition_by))
        removed = self._removed(table, commit) if commit.mode == OVERWRITE else []
        with _without_retries(table).transaction() as tx:
            new_columns = set(commit.schema.names) - set(tx.table_metadata.schema().column_names)
            if new_columns:
                _add_columns(tx, commit)
            files = data_files(table.io, tx.table_metadata, self.location, commit.added)
            snapshot = tx.update_snapshot(snapshot_properties=self._summary(commit))
            with (snapshot.overwrite() if removed else snapshot.fast_append()) as op:
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


def _load_catalog(properties: Mapping[str, str]) -> Catalog:
    """The catalog; a SQL catalog whose tables another process is creating at the same
    moment (SQLAlchemy: "table ... already exists") is loaded again."""
    for attempt in range(COMMIT_ATTEMPTS):
        try:
            return load_catalog(CATALOG_NAME, **properties)
        except (ValueError, TypeError, NotImplementedError) as exc:
            raise ConfigError(f"Iceberg catalog ({CATALOG_PREFIX}*): {exc}") from exc
        except Exception as exc:
            if "already exists" not in str(exc) or attempt == COMMIT_ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0, RETRY_WAIT_S))
    raise AssertionError("unreachable")


def _add_columns(tx: Transaction, commit: CommitToPublish) -> None:
    """The commit's new columns added to the table's schema (and its name mapping), in the
    transaction of the commit's snapshot."""
    try:
        with tx.update_schema() as update:
            update.union_by_name(commit.schema)
    except (ValueError, ValidationError) as exc:
        raise IcebergPublishError(f"instant {commit.instant}: the table's new columns do not "
                                  f"fit the Iceberg table's schema: {exc}") from exc


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
