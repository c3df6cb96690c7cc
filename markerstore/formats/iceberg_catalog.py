"""Where the Iceberg table of a markerstore table is, and which catalog holds it.

The catalog is any catalog pyiceberg loads, configured with pyiceberg's own property
names (``markerstore.table.iceberg.catalog.<property>``); without ``uri`` or ``type``, a
local table gets the embedded SQL catalog on SQLite, ``.markerstore/iceberg/catalog.db``
in the table (nothing else has to run). A table on S3 or another object store must name
its catalog: SQLite cannot live on an object store, and a catalog file on one machine's
disk would let writers on other machines each keep their own, diverging view of the
table. The table's fsspec storage options (S3 endpoint, credentials, region) become
pyiceberg's FileIO properties, so the storage is configured once.
"""

from __future__ import annotations

import difflib
import os
import random
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import pyiceberg.io
from pyiceberg.catalog import Catalog, load_catalog

from markerstore.config import ICEBERG_CATALOG_PREFIX as CATALOG_PREFIX
from markerstore.config import ICEBERG_IDENTIFIER
from markerstore.errors import ConfigError, TableFormatError
from markerstore.formats.base import INSTANT_KEY
from markerstore.paths import META_SEGMENT

# The option keys (the catalog's prefix above, the identifier) are in markerstore.config.
IDENTIFIER_DEFAULT = ""                                 # markerstore.<folder name>
# The name pyiceberg's own configuration knows the catalog by (~/.pyiceberg.yaml,
# PYICEBERG_CATALOG__MARKERSTORE__*), and the namespace of the tables it publishes.
CATALOG_NAME = "markerstore"
DEFAULT_NAMESPACE = CATALOG_NAME
# The snapshot summary property that names the instant a snapshot publishes.
INSTANT_PROPERTY = INSTANT_KEY
# Where the embedded catalog of a local table lives, relative to the table folder.
DEFAULT_CATALOG_FILE = f"{META_SEGMENT}/iceberg/catalog.db"
# Folders (relative to the table) Iceberg writes into: not markerstore's orphans.
METADATA_FOLDER = "metadata"
COMMIT_ATTEMPTS = 8    # another writer's commit won: read the instants again, then retry
RETRY_WAIT_S = 0.05

# The catalog properties pyiceberg reads (its configuration page: every catalog type's,
# the FileIO's, which pyiceberg.io names too), and the families whose names are the
# user's (REST headers, table defaults and overrides, auth and TLS settings).
CATALOG_PROPERTIES = frozenset({
    "type", "uri", "warehouse", "py-catalog-impl", "py-io-impl", "token", "credential",
    "scope", "audience", "resource", "oauth2-server-uri", "prefix", "snapshot-loading-mode",
    "view-endpoints-supported", "rest-page-size", "namespace-separator",
    "scan-planning-mode", "rest.sigv4-enabled", "rest.signing-region", "rest.signing-name",
    "rest.sigv4.max-retries", "echo", "pool_pre_ping", "init_catalog_tables", "ugi",
    "hive.hive2-compatible", "hive.kerberos-authentication", "hive.kerberos-service-name",
    "table-name", "glue.id", "glue.region", "glue.endpoint", "glue.profile-name",
    "glue.access-key-id", "glue.secret-access-key", "glue.session-token", "glue.max-retries",
    "glue.retry-mode", "glue.skip-archive", "dynamodb.region", "dynamodb.profile-name",
    "dynamodb.access-key-id", "dynamodb.secret-access-key", "dynamodb.session-token",
    "downcast-ns-timestamp-to-us-on-write", "pyarrow.use-large-types-on-read",
    "gcs.default-location",
    *(value for key, value in vars(pyiceberg.io).items()
      if key.isupper() and isinstance(value, str) and "." in value),
})
CATALOG_PROPERTY_FAMILIES = ("header.", "table-default.", "table-override.", "auth.", "ssl.",
                             "gcp.")
_LOCAL_SCHEMES = ("", "file")
_S3_SCHEMES = ("s3", "s3a", "s3n")
_NAME = re.compile(r"[^A-Za-z0-9_]")


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


def check_catalog_properties(properties: Mapping[str, Any]) -> None:
    """TableFormatError naming a catalog property pyiceberg does not know (a typo would
    otherwise be ignored, and the table published into another catalog), with the
    closest known name."""
    for key in sorted(properties):
        if key in CATALOG_PROPERTIES or key.startswith(CATALOG_PROPERTY_FAMILIES):
            continue
        close = difflib.get_close_matches(key, sorted(CATALOG_PROPERTIES), n=1, cutoff=0.6)
        hint = f"; did you mean {CATALOG_PREFIX}{close[0]}?" if close else ""
        raise TableFormatError(f"unknown Iceberg catalog property {key!r} "
                               f"({CATALOG_PREFIX}{key}){hint}")


def check_identifier(identifier: str) -> str:
    """`identifier` if it names a table in a namespace (``namespace.table``, nested
    namespaces dotted), else TableFormatError saying what is wrong."""
    parts = identifier.split(".")
    if len(parts) < 2:
        problem = "it has no namespace"
    elif any(not part.strip() or part != part.strip() for part in parts):
        problem = "a part of it is empty or has spaces around it"
    else:
        return identifier
    raise TableFormatError(f"{ICEBERG_IDENTIFIER}={identifier!r}: {problem}; an Iceberg "
                           "identifier is namespace.table (e.g. lake.events)")


def default_identifier(location: str) -> str:
    folder = urlsplit(location).path.rstrip("/").rpartition("/")[2]
    return f"{DEFAULT_NAMESPACE}.{_NAME.sub('_', folder) or 'table'}"


def sqlite_file(properties: Mapping[str, str]) -> str | None:
    """The SQLite file of a SQL catalog on SQLite, else None."""
    uri = properties.get("uri", "")
    return uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None


def resolve_catalog(url: str, location: str, catalog_properties: Mapping[str, str] | None,
                    storage_options: Mapping[str, Any]) -> dict[str, str]:
    """The catalog properties of the table at `location`: the given ones, the embedded
    SQLite catalog for a local table that names none, the FileIO properties of its
    storage options under them."""
    properties = dict(catalog_properties or {})
    if not {"uri", "type"} & properties.keys():
        if not location.startswith("file://"):
            raise ConfigError(
                f"table {url}: Iceberg publishing of a table on object storage needs a "
                f"catalog: set {CATALOG_PREFIX}uri (e.g. sqlite:////path/catalog.db "
                "on a disk every writer shares, or a REST catalog's URL)")
        properties.update(type="sql", uri=f"sqlite:///{default_catalog_db(location)}")
    return {**io_properties(storage_options), **properties}


def open_catalog(properties: Mapping[str, str]) -> Catalog:
    """The catalog (a SQLite file's folder created first); a SQL catalog whose tables
    another process is creating at the same moment (SQLAlchemy: "table ... already
    exists") is loaded again."""
    db = sqlite_file(properties)
    if db is not None:
        os.makedirs(os.path.dirname(db) or ".", exist_ok=True)
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
