"""Every option key, its default, its aliases, in one place (the error table's too).

The keys are defined by area, one module each, and joined here explicitly (no module adds
to the table when it is imported): `markers` (the marker mechanisms), `write` (a write and
its commit: conflicts, staging, data files, heartbeats), `storage`, `server` (the marker
server and its client), `sql` (the SQL sandbox), `ingest` (reading source files), `values`
(text into typed values), `error_table`, `formats` (Delta and Iceberg publishing) and
`source` (keys of the Spark data source only). Every name is importable from here:
``from markerstore import config; config.MARKERS_TYPE``.

Keys are Spark-style strings. Hudi's spellings (``hoodie.*``) and the s3committer's
(``s3.multipart.committer.*``) are accepted as aliases. ``resolve()`` maps a user's dict
to canonical keys, rejects unknown keys with the closest matches, parses each value,
and returns a frozen :class:`Settings`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from markerstore.config import (
    error_table,
    formats,
    ingest,
    markers,
    server,
    sql,
    storage,
    values,
    write,
)
from markerstore.config.error_table import (
    ERROR_MAX_FRACTION,
    ERROR_MAX_RECORDS,
    ERROR_PAYLOAD_DROP,
    ERROR_PAYLOAD_REDACT,
    ERROR_STACKTRACE_MAX_CHARS,
    ERROR_STACKTRACE_MAX_CHARS_DEFAULT,
    ERROR_TABLE_BASE_PATH,
    ERROR_TABLE_ENABLED,
    ERROR_TABLE_FORMAT,
    ERROR_TABLE_FORMAT_DEFAULT,
    ERROR_TABLE_FORMATS,
    ERROR_TABLE_NAME,
    ERROR_TABLE_NAME_DEFAULT,
    ERROR_TABLE_SUFFIX,
    ERROR_TABLE_SUFFIX_DEFAULT,
    FAILED_RECORDS_HELP,
    FAILED_RECORDS_METRIC,
    REASON_KEY,
)
from markerstore.config.formats import (
    DELTA_STORAGE_OPTIONS,
    ICEBERG_CATALOG_PREFIX,
    ICEBERG_IDENTIFIER,
    PREFIX_KEYS,
    TABLE_FORMATS,
    TABLE_RETENTION,
)
from markerstore.config.ingest import (
    CONNECT_RETRIES,
    CONNECT_TIMEOUT_MS,
    INGEST_CORRUPT_RECORD,
    INGEST_CSV_COMMENT,
    INGEST_CSV_ESCAPE,
    INGEST_CSV_HEADER,
    INGEST_CSV_IGNORE_LEADING,
    INGEST_CSV_IGNORE_TRAILING,
    INGEST_CSV_LINE_SEP,
    INGEST_CSV_NULL_PADDING,
    INGEST_CSV_QUOTE,
    INGEST_CSV_SEP,
    INGEST_CSV_SKIP,
    INGEST_ENCODING,
    INGEST_ENCODING_ERRORS,
    INGEST_INFER_RECORDS,
    INGEST_INFER_SCHEMA,
    INGEST_JSON_MULTILINE,
    INGEST_MODE,
    INGEST_PREFER_DATE,
    INGEST_PREFERS_DECIMAL,
    INGEST_PRIMITIVES_AS_STRING,
    INGEST_RECORD_MAX_BYTES,
    INGEST_SPLIT_BYTES,
    INGEST_TASK_BYTES,
    INGEST_VALUE_AS_TEXT,
)
from markerstore.config.markers import (
    BATCH_FORMAT,
    BATCH_INTERVAL_MS,
    BATCH_MAX_SEGMENTS,
    BATCH_NUM_THREADS,
    BATCHED_FALLBACK_DIRECT,
    EARLY_CONFLICT_DETECTION,
    MARKERS_DELETE_PARALLELISM,
    MARKERS_TYPE,
)
from markerstore.config.server import (
    CLIENT_CONNECT_TIMEOUT_MS,
    CLIENT_RETRIES,
    CLIENT_TIMEOUT_MS,
    SERVER_HEADER_TIMEOUT_MS,
    SERVER_HOST,
    SERVER_INSTANT_CHECK_MS,
    SERVER_MAX_BODY_BYTES,
    SERVER_TOKEN_ENV,
)
from markerstore.config.source import (
    SOURCE_CHECK_PREFIX,
    SOURCE_KEY,
    SOURCE_KEYS,
    SOURCE_PARTITION_BY,
    SOURCE_STORAGE_OPTION_PREFIX,
    SOURCE_STORAGE_OPTIONS,
    STREAM_QUERY_ID,
)
from markerstore.config.sql import (
    SQL_MEMORY_LIMIT,
    SQL_TIME_LIMIT_MS,
)
from markerstore.config.storage import (
    STORAGE_RETRIES,
    STORAGE_RETRY_BASE_DELAY_MS,
)
from markerstore.config.values import (
    INGEST_DATE_FORMAT,
    INGEST_EMPTY_VALUE,
    INGEST_LOCALE,
    INGEST_NAN_VALUE,
    INGEST_NEGATIVE_INF,
    INGEST_NON_NUMERIC,
    INGEST_NULL_VALUE,
    INGEST_POSITIVE_INF,
    INGEST_TIMESTAMP_FORMAT,
    INGEST_TIMESTAMP_NTZ_FORMAT,
)
from markerstore.config.write import (
    COMMIT_THREADS,
    CONFLICT_MODE,
    FAILED_WRITES_POLICY,
    HEARTBEAT_INTERVAL_MS,
    HEARTBEAT_MAX_CLOCK_SKEW_MS,
    HEARTBEAT_TOLERABLE_MISSES,
    MAX_OPEN_FILES,
    PARQUET_COMPRESSION,
    PARTITION_SORT,
    ROLL_FORWARD,
    ROW_GROUP_BYTES,
    STAGING_DIR,
    STAGING_MODE,
    STAGING_SWEEP_GRACE_MS,
    TARGET_FILE_SIZE,
    UPLOAD_PART_SIZE,
    UUID_REQUIRED,
    WRITE_UUID,
)
from markerstore.errors import ConfigError
from markerstore.option_values import Option

# What `markerstore.config` offers: every key and constant of the areas, the table and its
# resolution.
__all__ = [
    "BATCHED_FALLBACK_DIRECT",
    "BATCH_FORMAT",
    "BATCH_INTERVAL_MS",
    "BATCH_MAX_SEGMENTS",
    "BATCH_NUM_THREADS",
    "CLIENT_CONNECT_TIMEOUT_MS",
    "CLIENT_RETRIES",
    "CLIENT_TIMEOUT_MS",
    "COMMIT_THREADS",
    "CONFLICT_MODE",
    "CONNECT_RETRIES",
    "CONNECT_TIMEOUT_MS",
    "DELTA_STORAGE_OPTIONS",
    "EARLY_CONFLICT_DETECTION",
    "ERROR_MAX_FRACTION",
    "ERROR_MAX_RECORDS",
    "ERROR_PAYLOAD_DROP",
    "ERROR_PAYLOAD_REDACT",
    "ERROR_STACKTRACE_MAX_CHARS",
    "ERROR_STACKTRACE_MAX_CHARS_DEFAULT",
    "ERROR_TABLE_BASE_PATH",
    "ERROR_TABLE_ENABLED",
    "ERROR_TABLE_FORMAT",
    "ERROR_TABLE_FORMATS",
    "ERROR_TABLE_FORMAT_DEFAULT",
    "ERROR_TABLE_NAME",
    "ERROR_TABLE_NAME_DEFAULT",
    "ERROR_TABLE_SUFFIX",
    "ERROR_TABLE_SUFFIX_DEFAULT",
    "FAILED_RECORDS_HELP",
    "FAILED_RECORDS_METRIC",
    "FAILED_WRITES_POLICY",
    "HEARTBEAT_INTERVAL_MS",
    "HEARTBEAT_MAX_CLOCK_SKEW_MS",
    "HEARTBEAT_TOLERABLE_MISSES",
    "ICEBERG_CATALOG_PREFIX",
    "ICEBERG_IDENTIFIER",
    "INGEST_CORRUPT_RECORD",
    "INGEST_CSV_COMMENT",
    "INGEST_CSV_ESCAPE",
    "INGEST_CSV_HEADER",
    "INGEST_CSV_IGNORE_LEADING",
    "INGEST_CSV_IGNORE_TRAILING",
    "INGEST_CSV_LINE_SEP",
    "INGEST_CSV_NULL_PADDING",
    "INGEST_CSV_QUOTE",
    "INGEST_CSV_SEP",
    "INGEST_CSV_SKIP",
    "INGEST_DATE_FORMAT",
    "INGEST_EMPTY_VALUE",
    "INGEST_ENCODING",
    "INGEST_ENCODING_ERRORS",
    "INGEST_INFER_RECORDS",
    "INGEST_INFER_SCHEMA",
    "INGEST_JSON_MULTILINE",
    "INGEST_LOCALE",
    "INGEST_MODE",
    "INGEST_NAN_VALUE",
    "INGEST_NEGATIVE_INF",
    "INGEST_NON_NUMERIC",
    "INGEST_NULL_VALUE",
    "INGEST_POSITIVE_INF",
    "INGEST_PREFERS_DECIMAL",
    "INGEST_PREFER_DATE",
    "INGEST_PRIMITIVES_AS_STRING",
    "INGEST_RECORD_MAX_BYTES",
    "INGEST_SPLIT_BYTES",
    "INGEST_TASK_BYTES",
    "INGEST_TIMESTAMP_FORMAT",
    "INGEST_TIMESTAMP_NTZ_FORMAT",
    "INGEST_VALUE_AS_TEXT",
    "MARKERS_DELETE_PARALLELISM",
    "MARKERS_TYPE",
    "MAX_OPEN_FILES",
    "PARQUET_COMPRESSION",
    "PARTITION_SORT",
    "PREFIX_KEYS",
    "REASON_KEY",
    "ROLL_FORWARD",
    "ROW_GROUP_BYTES",
    "SERVER_HEADER_TIMEOUT_MS",
    "SERVER_HOST",
    "SERVER_INSTANT_CHECK_MS",
    "SERVER_MAX_BODY_BYTES",
    "SERVER_TOKEN_ENV",
    "SOURCE_CHECK_PREFIX",
    "SOURCE_KEY",
    "SOURCE_KEYS",
    "SOURCE_PARTITION_BY",
    "SOURCE_STORAGE_OPTIONS",
    "SOURCE_STORAGE_OPTION_PREFIX",
    "SQL_MEMORY_LIMIT",
    "SQL_TIME_LIMIT_MS",
    "STAGING_DIR",
    "STAGING_MODE",
    "STAGING_SWEEP_GRACE_MS",
    "STORAGE_RETRIES",
    "STORAGE_RETRY_BASE_DELAY_MS",
    "STREAM_QUERY_ID",
    "TABLE_FORMATS",
    "TABLE_RETENTION",
    "TARGET_FILE_SIZE",
    "UPLOAD_PART_SIZE",
    "UUID_REQUIRED",
    "WRITE_UUID",
    "OPTIONS",
    "Settings",
    "canonical_key",
    "canonical_key_any_case",
    "describe",
    "prefixed_key",
    "resolve",
]

# The areas' definitions, joined: the one table every key is resolved against.
_DEFINITIONS: tuple[Option, ...] = (
    *markers.DEFINITIONS,
    *write.DEFINITIONS,
    *storage.DEFINITIONS,
    *server.DEFINITIONS,
    *sql.DEFINITIONS,
    *ingest.DEFINITIONS,
    *values.DEFINITIONS,
    *error_table.DEFINITIONS,
    *formats.DEFINITIONS,
)


def _index(definitions: tuple[Option, ...]) -> tuple[dict[str, Option], dict[str, str]]:
    """Every option by key, and every alias to its key; a key or alias given twice is a
    ConfigError (a mistake in the table above)."""
    options: dict[str, Option] = {}
    aliases: dict[str, str] = {}
    for option in definitions:
        if option.key in options or option.key in aliases:
            raise ConfigError(f"option {option.key} is defined twice")
        options[option.key] = option
        for alias in option.aliases:
            if alias in options or alias in aliases:
                raise ConfigError(f"alias {alias} of {option.key} is defined twice")
            aliases[alias] = option.key
    return options, aliases


# Every option by key and every alias: built once from the table above, never added to.
OPTIONS, _ALIASES = _index(_DEFINITIONS)


_PREFIXES = tuple(key.rpartition("<")[0] for key in PREFIX_KEYS)


def prefixed_key(key: str) -> str | None:
    """`key` spelled as a key of a family (:data:`PREFIX_KEYS`), its prefix matched without
    case; None when it is not one."""
    for prefix in _PREFIXES:
        if key.lower().startswith(prefix) and len(key) > len(prefix):
            return prefix + key[len(prefix):]
    return None


def canonical_key_any_case(key: str) -> str:
    """Like :func:`canonical_key`, for a key whose case was lost (Spark data source
    options arrive lowercased)."""
    lowered = {k.lower(): k for k in (*OPTIONS, *_ALIASES)}
    return canonical_key(lowered.get(key.lower(), key))


# Every key and alias in lower case: option names match without case, as Spark's do.
_LOWERED = {k.lower(): k for k in (*OPTIONS, *_ALIASES)}


def canonical_key(key: str) -> str:
    """The canonical spelling of `key` (itself, or the key it is an alias of), matched
    without case as Spark matches its reader options (``multiline`` is ``multiLine``)."""
    if key in OPTIONS:
        return key
    prefixed = prefixed_key(key)
    if prefixed is not None:
        return prefixed
    if key in _ALIASES:
        return _ALIASES[key]
    spelled = _LOWERED.get(key.lower())
    if spelled is not None:
        return canonical_key(spelled)
    known = list(OPTIONS) + list(_ALIASES)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ConfigError(f"unknown option {key!r}{hint}")


@dataclass(frozen=True)
class Settings(Mapping[str, Any]):
    """Parsed options: every key, user value or default."""

    given: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        key = canonical_key(key)
        if key in self.given:
            return self.given[key]
        return OPTIONS[key].default

    def __iter__(self) -> Iterator[str]:
        return iter(OPTIONS)

    def __len__(self) -> int:
        return len(OPTIONS)

    def explicit(self) -> dict[str, Any]:
        """The options the user set, by canonical key."""
        return dict(self.given)

    def with_options(self, options: Mapping[str, Any] | None) -> Settings:
        merged = dict(self.given)
        merged.update(resolve(options).given)
        return Settings(merged)


def resolve(options: Mapping[str, Any] | Settings | None) -> Settings:
    """Parse a user's options: canonical keys, parsed values; unknown keys are errors."""
    if options is None:
        return Settings({})
    if isinstance(options, Settings):
        return options
    values: dict[str, Any] = {}
    for raw_key, raw_value in options.items():
        key = canonical_key(str(raw_key))
        if key in values and raw_key != key:
            raise ConfigError(f"option {key} is given twice (as {raw_key!r} and another spelling)")
        if key not in OPTIONS:  # a key of a family: text, as the library it names takes
            values[key] = str(raw_value)
            continue
        try:
            values[key] = OPTIONS[key].parse(raw_value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"option {raw_key}: {exc}") from None
    return Settings(values)


def describe() -> list[dict[str, Any]]:
    """Every option with its default, aliases and doc (for docs/CONFIGURATION.md and `--help`)."""
    rows = [{"key": o.key, "default": o.default, "aliases": list(o.aliases), "doc": o.doc}
            for o in OPTIONS.values()]
    rows += [{"key": key, "default": None, "aliases": [], "doc": doc}
             for key, doc in PREFIX_KEYS.items()]
    return sorted(rows, key=lambda row: str(row["key"]))
