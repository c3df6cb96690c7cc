"""The error table (Hudi RFC-20): where it lives, its file format, what a record keeps, the
error budget; the reason column and the failed-records metric more than one package uses."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    choice,
    field_paths,
    folder_name,
    int_min,
    optional_folder_name,
    optional_fraction,
    optional_int_min,
    optional_path,
    parse_bool,
)

ERROR_MAX_FRACTION = "markerstore.write.error.table.max_fraction"
ERROR_MAX_RECORDS = "markerstore.write.error.table.max_records"
ERROR_TABLE_ENABLED = "markerstore.write.error.table.enabled"
ERROR_TABLE_SUFFIX = "markerstore.write.error.table.suffix"
ERROR_TABLE_NAME = "markerstore.write.error.table.name"
ERROR_TABLE_BASE_PATH = "markerstore.write.error.table.base.path"
ERROR_TABLE_FORMAT = "markerstore.write.error.table.format"
ERROR_STACKTRACE_MAX_CHARS = "markerstore.write.error.table.stacktrace.max_chars"
ERROR_PAYLOAD_DROP = "markerstore.write.error.table.payload.drop"
ERROR_PAYLOAD_REDACT = "markerstore.write.error.table.payload.redact"

# Error table defaults (RFC-20): local table ``<table>_errors``; a global one is named so.
ERROR_TABLE_SUFFIX_DEFAULT = "_errors"
ERROR_TABLE_NAME_DEFAULT = "hoodie_errors"
ERROR_TABLE_FORMATS = ("avro", "parquet")
ERROR_TABLE_FORMAT_DEFAULT = "parquet"
ERROR_STACKTRACE_MAX_CHARS_DEFAULT = 4000

# An error record's reason: the key in its context map, and the column a task's error rows
# carry on their way to the error table (the commit protocol counts them by it).
REASON_KEY = "reason"

# Records sent to an error table, by table and reason: errortable counts them, every marker
# server's /metrics and errortable.metrics.prometheus_lines() show them under this one name.
FAILED_RECORDS_METRIC = "markerstore_failed_records_total"
FAILED_RECORDS_HELP = "Records that failed and were written to an error table."

DEFINITIONS: tuple[Option, ...] = (
    Option(ERROR_MAX_FRACTION, None, optional_fraction,
           "Error budget: a write whose error rows are more than this fraction of its rows "
           "in is rolled back, data and error rows alike, and fails (Hudi's "
           "ROLLBACK_COMMIT failure strategy with a threshold). Default: no limit.",
           ()),
    Option(ERROR_MAX_RECORDS, None, optional_int_min(0),
           "Error budget: a write with more error rows than this is rolled back and fails; "
           "0 fails on the first bad row (Spark's FAILFAST). Default: no limit.",
           ()),
    Option(ERROR_TABLE_ENABLED, False, parse_bool,
           "Write records that fail parsing, casting, key/partition extraction or a check "
           "to an error table instead of failing the job.",
           ("hoodie.write.error.table.enabled",)),
    Option(ERROR_TABLE_SUFFIX, ERROR_TABLE_SUFFIX_DEFAULT, folder_name,
           "Local error table: the folder beside the target table, named table + suffix. "
           "Ignored when a name or a base path is set (global table).",
           ("hoodie.write.error.table.suffix",)),
    Option(ERROR_TABLE_NAME, None, optional_folder_name,
           f"Global error table name (default {ERROR_TABLE_NAME_DEFAULT!r}); setting it "
           "selects the global table.",
           ("hoodie.write.error.table.name",)),
    Option(ERROR_TABLE_BASE_PATH, None, optional_path,
           "Global error table base path (default: the folder holding the target table); "
           "setting it selects the global table.",
           ("hoodie.write.error.table.base.path",)),
    Option(ERROR_TABLE_FORMAT, ERROR_TABLE_FORMAT_DEFAULT, choice(*ERROR_TABLE_FORMATS),
           "Error file format: parquet (read by DuckDB's own reader; the RFC-20 Avro schema "
           "is kept in each file's key-value metadata) or avro (fastavro container), both "
           "in the ErrorRecord schema."),
    Option(ERROR_STACKTRACE_MAX_CHARS, ERROR_STACKTRACE_MAX_CHARS_DEFAULT, int_min(0),
           "Characters of stack trace kept in `message` (the innermost frames); 0 keeps none."),
    Option(ERROR_PAYLOAD_DROP, False, parse_bool,
           "PII: store no record payload (`record` is null); messages keep no record data."),
    Option(ERROR_PAYLOAD_REDACT, (), field_paths,
           "PII: field paths (comma-separated, nested with dots) whose values are replaced "
           "by [REDACTED] in the stored record (and anywhere else in the error record); "
           "keys match without case and surrounding whitespace, at any depth."),
)
