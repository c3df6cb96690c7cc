"""Table formats a table also publishes (Delta Lake, Iceberg) and replaced files' retention."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    duration,
    json_object,
    optional_str,
    table_formats,
)

TABLE_FORMATS = "markerstore.table.formats"
DELTA_STORAGE_OPTIONS = "markerstore.table.formats.delta.storage_options"
TABLE_RETENTION = "markerstore.table.replaced_files.retention"
ICEBERG_IDENTIFIER = "markerstore.table.iceberg.identifier"     # namespace.table
ICEBERG_CATALOG_PREFIX = "markerstore.table.iceberg.catalog."   # + a pyiceberg property

DEFINITIONS: tuple[Option, ...] = (
    Option(TABLE_FORMATS, (), table_formats,
           "Table formats the table also publishes, comma separated: delta, iceberg or "
           "both. Each completed commit becomes one Delta version / Iceberg snapshot of the "
           "same folder. Set when the table is created (recorded in .markerstore/table.json, "
           "honoured by every writer); another value for an existing table is an error.",
           ()),
    Option(DELTA_STORAGE_OPTIONS, {}, json_object,
           "Delta publishing: delta-rs storage options (a JSON object) over those derived "
           "from the table's own (S3 endpoint, keys, region; conditional_put=etag). Where "
           "the store has no put-if-absent, name a locking provider here (e.g. "
           "{\"AWS_S3_LOCKING_PROVIDER\": \"dynamodb\", \"DELTA_DYNAMO_TABLE_NAME\": ...}).",
           ()),
    Option(TABLE_RETENTION, "7d", duration,
           "How long the files a replace replaced stay, so that snapshot(as_of=...), "
           "Delta's older versions and Iceberg's older snapshots still read them (Delta's "
           "delta.deletedFileRetentionDuration, 7 days): 7d, 12h, 30m, 45s, or 0 to delete "
           "them once the replace is published. Once it has passed, the next write, "
           "markerstore expire and verify --repair delete them (no file a retained "
           "version or snapshot references) and expire Iceberg's older snapshots (a "
           "write, once 16 are due; appends' too). A Delta table markerstore creates "
           "takes it as its delta.deletedFileRetentionDuration.",
           ()),
    Option(ICEBERG_IDENTIFIER, None, optional_str,
           "Iceberg publishing: the table's identifier (namespace.table) in its catalog "
           "(default: markerstore.<folder name>; its error table: the same namespace and "
           "the error table's folder name).",
           ()),
)

# Keys of a family: a prefix and a name the user picks (another library's own property
# names). resolve() keeps them as text, under the prefix's spelling.
PREFIX_KEYS: dict[str, str] = {
    ICEBERG_CATALOG_PREFIX + "<property>":
        "Iceberg publishing: one property of the catalog, as pyiceberg names it (uri, "
        "type, warehouse, s3.endpoint, ...). Default: a local table's embedded SQLite "
        "catalog (.markerstore/iceberg/catalog.db); a table on S3 must set "
        + ICEBERG_CATALOG_PREFIX + "uri.",
}
