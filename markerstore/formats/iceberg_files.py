"""Iceberg's view of a markerstore commit: the table's schema and partition spec, and one
manifest entry (a ``DataFile``) per Parquet file of a commit.

The partition record of each entry comes from the commit (the file's Hive-style folder,
typed by the table's schema), never from the file: markerstore's data files hold no
partition column, and pyiceberg's ``add_files`` reads identity partitions from file
statistics, so on such a file it records a null partition and every row scans back with
a null partition column, without a warning. The column statistics (counts, bounds) are
read from each file's Parquet footer, through the table's own FileIO.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestFile
from pyiceberg.partitioning import PartitionField, PartitionSpec, partition_record_value
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import UpdateSnapshot, _OverwriteFiles
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyiceberg.utils.concurrent import ExecutorFactory

from markerstore.errors import IcebergPublishError
from markerstore.formats.base import PublishedFile
from markerstore.formats.iceberg_merge import merge_in_tiers
from markerstore.paths import HIVE_DEFAULT_PARTITION

FIRST_PARTITION_FIELD_ID = 1000  # Iceberg's first partition field id
_log = logging.getLogger(__name__)


def iceberg_schema(schema: pa.Schema) -> Schema:
    """The Iceberg schema of an Arrow schema, with field ids 1..n in column order."""
    try:
        return assign_fresh_schema_ids(Catalog._convert_schema_if_needed(schema))
    except (TypeError, ValueError) as exc:
        raise IcebergPublishError(f"the table's schema has no Iceberg equivalent: {exc}") from exc


def optional_partition_columns(schema: pa.Schema, partition_by: Iterable[str]) -> pa.Schema:
    """`schema` with its partition columns optional. A partition column is in no data file,
    and Iceberg readers fill it from the partition value (the spec's column projection),
    which pyiceberg refuses for a required field ("Field is required, and could not be
    found in the file"); a NOT NULL partition column (Spark's ``current_date()``) is
    published optional, its values unchanged."""
    names = set(partition_by)
    return pa.schema([f.with_nullable(True) if f.name in names else f for f in schema],
                     metadata=schema.metadata)


def identity_spec(schema: Schema, partition_by: Iterable[str]) -> PartitionSpec:
    """Identity partitions on `partition_by`, in that order."""
    fields = []
    for offset, name in enumerate(partition_by):
        column = schema.find_field(name) if name in schema.column_names else None
        if column is None:
            raise IcebergPublishError(f"partition column {name!r} is not in the table's "
                                      f"schema ({', '.join(schema.column_names)})")
        fields.append(PartitionField(source_id=column.field_id,
                                     field_id=FIRST_PARTITION_FIELD_ID + offset,
                                     transform=IdentityTransform(), name=name))
    return PartitionSpec(*fields)


def check_partitioning(metadata: TableMetadata, partition_by: tuple[str, ...]) -> None:
    """The Iceberg table is partitioned by identity on exactly `partition_by`."""
    spec, schema = metadata.spec(), metadata.schema()
    names = tuple(schema.find_column_name(f.source_id) for f in spec.fields)
    identity = all(isinstance(f.transform, IdentityTransform) for f in spec.fields)
    if names != partition_by or not identity:
        shown = ", ".join(f"{f.transform}({n})" for f, n in zip(spec.fields, names,
                                                                strict=True))
        raise IcebergPublishError(
            f"the Iceberg table is partitioned by [{shown}], the markerstore table by "
            f"identity on [{', '.join(partition_by)}]")


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"not a boolean: {text!r}")
    return lowered == "true"


def _timestamp(text: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(text)


def _timestamptz(text: str) -> _dt.datetime:
    value = _dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)


_PARSERS: dict[type[IcebergType], Callable[[str], Any]] = {
    StringType: str, IntegerType: int, LongType: int, FloatType: float, DoubleType: float,
    BooleanType: _bool, DateType: _dt.date.fromisoformat, TimeType: _dt.time.fromisoformat,
    TimestampType: _timestamp, TimestamptzType: _timestamptz, DecimalType: decimal.Decimal,
    BinaryType: bytes.fromhex, FixedType: bytes.fromhex, UUIDType: uuid.UUID,
}


def partition_value(value: str | None, column_type: IcebergType) -> Any:
    """The Python value of a partition folder's text, unescaped (``hive_partition``),
    for a column of `column_type` (None for Hive's default partition); ValueError when it
    does not fit."""
    if value is None or value == HIVE_DEFAULT_PARTITION:
        return None
    parser = _PARSERS.get(type(column_type))
    if parser is None:
        raise ValueError(f"{column_type} cannot be a partition column here")
    try:
        return parser(value)
    except (ValueError, ArithmeticError) as exc:
        raise ValueError(f"{value!r} is not a {column_type}") from exc


def partition_record(file: PublishedFile, metadata: TableMetadata) -> Record:
    """The partition record of `file`, from its folder, typed by the table's schema."""
    schema, values = metadata.schema(), file.partition
    record = []
    for spec_field in metadata.spec().fields:
        column = schema.find_field(spec_field.source_id)
        if column.name not in values:
            raise IcebergPublishError(
                f"{file.path}: no partition value for column {column.name!r} "
                f"(the commit gives {sorted(values) or 'none'})")
        try:
            value = partition_value(values[column.name], column.field_type)
        except ValueError as exc:
            raise IcebergPublishError(f"{file.path}: partition column {column.name!r}: "
                                      f"{exc}") from exc
        record.append(partition_record_value(spec_field, value, schema))
    return Record(*record)


def data_file(io: FileIO, metadata: TableMetadata, location: str,
              file: PublishedFile) -> DataFile:
    """The manifest entry of one Parquet file of a commit: its partition record from the
    commit, its statistics from its footer."""
    path = f"{location}/{file.path}"
    schema = metadata.schema()
    try:
        with io.new_input(path).open() as stream:
            footer = pq.read_metadata(stream)
    except FileNotFoundError:
        return _gone(metadata, path, file)
    mapping = parquet_path_to_id_mapping(schema)
    unknown = [c for c in (footer.schema.column(i).path for i in range(footer.num_columns))
               if c not in mapping]
    if unknown:
        raise IcebergPublishError(f"{file.path}: column(s) {', '.join(unknown)} are not in "
                                  "the Iceberg table's schema")
    stats = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer,
        stats_columns=compute_statistics_plan(schema, metadata.properties),
        parquet_column_mapping=mapping)
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
        partition=partition_record(file, metadata), file_size_in_bytes=file.size,
        sort_order_id=None, spec_id=metadata.default_spec_id, equality_ids=None,
        key_metadata=None, **stats.to_serialized_dict())


def _gone(metadata: TableMetadata, path: str, file: PublishedFile) -> DataFile:
    """The entry of a committed file that is gone: a later completed instant replaced it
    and its files were deleted before this instant was published (a crash between an
    instant and its publish, then another writer's replace). Its size and rows come from
    the commit, without column statistics; the later instant's snapshot deletes it."""
    if file.rows is None:
        raise IcebergPublishError(f"{file.path}: the file is gone and the commit does not "
                                  "say how many rows it held")
    _log.warning("publishing %s without statistics: the file is gone (a later replace "
                 "deleted it)", file.path)
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
        partition=partition_record(file, metadata), file_size_in_bytes=file.size,
        record_count=file.rows, sort_order_id=None, spec_id=metadata.default_spec_id,
        equality_ids=None, key_metadata=None)


def data_files(io: FileIO, metadata: TableMetadata, location: str,
               files: Iterable[PublishedFile]) -> list[DataFile]:
    """The manifest entries of `files`, their footers read in parallel."""
    executor = ExecutorFactory.get_or_create()
    return list(executor.map(lambda f: data_file(io, metadata, location, f), files))


class _ManifestCache:
    """The live entries of manifests already read, by manifest path: a manifest is never
    rewritten (a new one gets a new name), and pyiceberg takes milliseconds to open each,
    while a publish reads the current ones several times (the files a replace removes,
    those retained snapshots reference before and after their expiry). Bounded by the
    entries it holds, the oldest read first dropped."""

    def __init__(self, max_entries: int = 200_000) -> None:
        self.max_entries = max_entries
        self._by_path: OrderedDict[str, list[DataFile]] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()

    def live(self, io: FileIO, manifest: ManifestFile) -> list[DataFile]:
        with self._lock:
            found = self._by_path.get(manifest.manifest_path)
            if found is not None:
                self._by_path.move_to_end(manifest.manifest_path)
                return found
        found = [e.data_file for e in manifest.fetch_manifest_entry(io, discard_deleted=True)]
        with self._lock:
            self._by_path[manifest.manifest_path] = found
            self._entries += len(found)
            while self._entries > self.max_entries and len(self._by_path) > 1:
                _, dropped = self._by_path.popitem(last=False)
                self._entries -= len(dropped)
        return found


MANIFESTS = _ManifestCache()


def live_files(io: FileIO, metadata: TableMetadata, snapshot_id: int | None = None
               ) -> dict[str, DataFile]:
    """The data files a snapshot (the current one by default) holds, by full path."""
    snapshot = (metadata.current_snapshot() if snapshot_id is None
                else metadata.snapshot_by_id(snapshot_id))
    if snapshot is None:
        return {}
    found: dict[str, DataFile] = {}
    for manifest in snapshot.manifests(io):
        for data_file in MANIFESTS.live(io, manifest):
            found[data_file.file_path] = data_file
    return found


def referenced_files(io: FileIO, metadata: TableMetadata) -> set[str]:
    """Full paths of the data files any retained snapshot holds (each manifest read once)."""
    seen: set[str] = set()
    paths: set[str] = set()
    for snapshot in metadata.snapshots:
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in seen:
                continue
            seen.add(manifest.manifest_path)
            paths.update(f.file_path for f in MANIFESTS.live(io, manifest))
    return paths


class MergingOverwrite(_OverwriteFiles):
    """pyiceberg's overwrite, whose manifests are merged in tiers as an append's are
    (``commit.manifest-merge.enabled``, ``commit.manifest.min-count-to-merge``;
    :mod:`.iceberg_merge`), as every snapshot producer of Iceberg's Java library merges
    them: else each replace leaves one more manifest for every reader and every later
    commit to open."""

    def __init__(self, update: UpdateSnapshot) -> None:
        metadata = update._transaction.table_metadata
        super().__init__(
            operation=Operation.OVERWRITE if metadata.snapshot_by_name(name=update._branch)
            else Operation.APPEND, transaction=update._transaction, io=update._io,
            branch=update._branch, snapshot_properties=update._snapshot_properties)

    def _process_manifests(self, manifests: list[ManifestFile]) -> list[ManifestFile]:
        return merge_in_tiers(self, manifests)


def relative(path: str, location: str) -> str | None:
    """`path` relative to the table `location`, or None when it is outside it."""
    prefix = location.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else None
