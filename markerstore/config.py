"""Every option key, its default, its aliases, in one place (the error table's too).

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

from markerstore.errors import ConfigError
from markerstore.option_values import (
    Option,
    charset,
    choice,
    corrupt_record_column,
    csv_comment,
    csv_escape,
    csv_line_sep,
    csv_quote,
    csv_separator,
    duration,
    field_paths,
    folder_name,
    int_min,
    json_object,
    locale,
    memory_size,
    optional_folder_name,
    optional_fraction,
    optional_int_min,
    optional_path,
    optional_str,
    parse_bool,
    read_mode,
    table_formats,
    text,
)
from markerstore.values.patterns import pattern_option

# --- environment variables ------------------------------------------------------------
# The marker server's bearer token (read by the server, its client and `markerstore
# serve`): the environment or a file keep it out of `ps`, where `--token` shows it.
SERVER_TOKEN_ENV = "MARKERSTORE_SERVER_TOKEN"

# --- keys -------------------------------------------------------------------------------
MARKERS_TYPE = "markerstore.write.markers.type"
BATCH_INTERVAL_MS = "markerstore.markers.batch.interval_ms"
BATCH_NUM_THREADS = "markerstore.markers.batch.num_threads"
MARKERS_DELETE_PARALLELISM = "markerstore.markers.delete.parallelism"
HEARTBEAT_INTERVAL_MS = "markerstore.heartbeat.interval_ms"
HEARTBEAT_TOLERABLE_MISSES = "markerstore.heartbeat.tolerable_misses"
FAILED_WRITES_POLICY = "markerstore.cleaner.policy.failed_writes"
STORAGE_RETRIES = "markerstore.storage.retries"
STORAGE_RETRY_BASE_DELAY_MS = "markerstore.storage.retry.base_delay_ms"
CONFLICT_MODE = "markerstore.write.conflict.mode"
WRITE_UUID = "markerstore.write.uuid"
UPLOAD_PART_SIZE = "markerstore.write.upload.part_size"
COMMIT_THREADS = "markerstore.write.commit.threads"
EARLY_CONFLICT_DETECTION = "markerstore.write.early.conflict.detection.enable"
BATCH_FORMAT = "markerstore.markers.batch.format"
BATCH_MAX_SEGMENTS = "markerstore.markers.batch.max_segments"
BATCHED_FALLBACK_DIRECT = "markerstore.markers.batched.fallback.direct"
SERVER_MAX_BODY_BYTES = "markerstore.markers.server.max_body_bytes"
SERVER_INSTANT_CHECK_MS = "markerstore.markers.server.instant_check_ms"
CLIENT_TIMEOUT_MS = "markerstore.markers.client.timeout_ms"
CLIENT_RETRIES = "markerstore.markers.client.retries"
CLIENT_CONNECT_TIMEOUT_MS = "markerstore.markers.client.connect_timeout_ms"
SERVER_HOST = "markerstore.markers.server.host"
UUID_REQUIRED = "markerstore.write.uuid.required"
STAGING_MODE = "markerstore.write.staging.mode"
STAGING_DIR = "markerstore.write.staging.dir"
STAGING_SWEEP_GRACE_MS = "markerstore.write.staging.sweep_grace_ms"
TARGET_FILE_SIZE = "markerstore.write.target_file_size"
ROW_GROUP_BYTES = "markerstore.write.parquet.row_group_bytes"
PARQUET_COMPRESSION = "markerstore.write.parquet.compression"
MAX_OPEN_FILES = "markerstore.write.max_open_files"
PARTITION_SORT = "markerstore.write.partition.sort"
ROLL_FORWARD = "markerstore.write.recovery.roll_forward"
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
INGEST_TASK_BYTES = "markerstore.ingest.task_bytes"
CONNECT_TIMEOUT_MS = "markerstore.ingest.connect.timeout_ms"
CONNECT_RETRIES = "markerstore.ingest.connect.retries"
INGEST_SPLIT_BYTES = "markerstore.ingest.split_bytes"
SQL_TIME_LIMIT_MS = "markerstore.sql.sandbox.time_limit_ms"
SQL_MEMORY_LIMIT = "markerstore.sql.sandbox.memory_limit"
SERVER_HEADER_TIMEOUT_MS = "markerstore.markers.server.header_timeout_ms"
HEARTBEAT_MAX_CLOCK_SKEW_MS = "markerstore.heartbeat.max_clock_skew_ms"
INGEST_CSV_SEP = "markerstore.ingest.csv.sep"
INGEST_CSV_HEADER = "markerstore.ingest.csv.header"
INGEST_CSV_ESCAPE = "markerstore.ingest.csv.escape"
INGEST_NULL_VALUE = "markerstore.ingest.csv.nullValue"
INGEST_EMPTY_VALUE = "markerstore.ingest.csv.emptyValue"
INGEST_NON_NUMERIC = "markerstore.ingest.json.allowNonNumericNumbers"
INGEST_JSON_MULTILINE = "markerstore.ingest.json.multiLine"
INGEST_VALUE_AS_TEXT = "markerstore.ingest.json.value_as_text"
INGEST_ENCODING_ERRORS = "markerstore.ingest.encoding.errors"
INGEST_DATE_FORMAT = "markerstore.ingest.dateFormat"
INGEST_TIMESTAMP_FORMAT = "markerstore.ingest.timestampFormat"
INGEST_TIMESTAMP_NTZ_FORMAT = "markerstore.ingest.timestampNTZFormat"
INGEST_NAN_VALUE = "markerstore.ingest.csv.nanValue"
INGEST_POSITIVE_INF = "markerstore.ingest.csv.positiveInf"
INGEST_NEGATIVE_INF = "markerstore.ingest.csv.negativeInf"
INGEST_LOCALE = "markerstore.ingest.locale"
INGEST_ENCODING = "markerstore.ingest.encoding"
INGEST_RECORD_MAX_BYTES = "markerstore.ingest.record.max_bytes"
# Spark's schema inference options, and how many records inference reads
INGEST_INFER_SCHEMA = "markerstore.ingest.csv.inferSchema"
INGEST_PREFER_DATE = "markerstore.ingest.csv.preferDate"
INGEST_PREFERS_DECIMAL = "markerstore.ingest.json.prefersDecimal"
INGEST_PRIMITIVES_AS_STRING = "markerstore.ingest.json.primitivesAsString"
INGEST_INFER_RECORDS = "markerstore.ingest.infer.records"
TABLE_FORMATS = "markerstore.table.formats"
DELTA_STORAGE_OPTIONS = "markerstore.table.formats.delta.storage_options"
TABLE_RETENTION = "markerstore.table.replaced_files.retention"
ICEBERG_IDENTIFIER = "markerstore.table.iceberg.identifier"     # namespace.table
ICEBERG_CATALOG_PREFIX = "markerstore.table.iceberg.catalog."   # + a pyiceberg property
# Spark's reader options for the structure of records
INGEST_MODE = "markerstore.ingest.mode"
INGEST_CORRUPT_RECORD = "markerstore.ingest.columnNameOfCorruptRecord"
INGEST_CSV_QUOTE = "markerstore.ingest.csv.quote"
INGEST_CSV_COMMENT = "markerstore.ingest.csv.comment"
INGEST_CSV_LINE_SEP = "markerstore.ingest.csv.lineSep"
INGEST_CSV_IGNORE_LEADING = "markerstore.ingest.csv.ignoreLeadingWhiteSpace"
INGEST_CSV_IGNORE_TRAILING = "markerstore.ingest.csv.ignoreTrailingWhiteSpace"
# options beyond Spark's, with the names and meaning of DuckDB's read_csv
INGEST_CSV_SKIP = "markerstore.ingest.csv.skip"
INGEST_CSV_NULL_PADDING = "markerstore.ingest.csv.null_padding"

# Error table defaults (RFC-20): local table ``<table>_errors``; a global one is named so.
ERROR_TABLE_SUFFIX_DEFAULT = "_errors"
ERROR_TABLE_NAME_DEFAULT = "hoodie_errors"
ERROR_TABLE_FORMATS = ("avro", "parquet")
ERROR_TABLE_FORMAT_DEFAULT = "parquet"
ERROR_STACKTRACE_MAX_CHARS_DEFAULT = 4000

_DEFINITIONS: tuple[Option, ...] = (
    Option(MARKERS_TYPE, "direct",
           choice("direct", "batched", synonyms={"timeline_server_based": "batched"}),
           "Marker mechanism: direct (one empty object per data file) or batched "
           "(marker server in the driver, segment files).",
           ("hoodie.write.markers.type",)),
    Option(BATCH_INTERVAL_MS, 50, int_min(1),
           "Batched markers: how often pending marker requests are flushed as one segment.",
           ("hoodie.markers.timeline_server_based.batch.interval_ms",)),
    Option(BATCH_NUM_THREADS, 20, int_min(1),
           "Batched markers: flushes running in parallel across marker folders.",
           ("hoodie.markers.timeline_server_based.batch.num_threads",)),
    Option(MARKERS_DELETE_PARALLELISM, 100, int_min(1),
           "Threads deleting invalid data files and markers.",
           ("hoodie.markers.delete.parallelism",)),
    Option(HEARTBEAT_INTERVAL_MS, 60000, int_min(10),
           "How often a writer renews the heartbeat of its inflight instant.",
           ("hoodie.client.heartbeat.interval_in_ms",)),
    Option(HEARTBEAT_TOLERABLE_MISSES, 2, int_min(0),
           "Missed heartbeats after which an inflight instant counts as failed.",
           ("hoodie.client.heartbeat.tolerable.misses",)),
    Option(HEARTBEAT_MAX_CLOCK_SKEW_MS, 5 * 60 * 1000, int_min(0),
           "A heartbeat dated further than this in the future is suspect (a wrong clock, or "
           "a forged file): it counts as expired, with a warning naming it.",
           ()),
    Option(FAILED_WRITES_POLICY, "eager", choice("eager", "lazy", "never"),
           "Rollback of failed writes: eager (next write rolls back every failed inflight "
           "instant, one writer), lazy (only instants whose heartbeat expired), never.",
           ("hoodie.cleaner.policy.failed.writes",)),
    Option(STORAGE_RETRIES, 5, int_min(0),
           "Retries of a storage request that failed with throttling (503) or a timeout.",
           ()),
    Option(STORAGE_RETRY_BASE_DELAY_MS, 100, int_min(0),
           "First backoff delay of storage retries; doubles on each retry, with jitter.",
           ()),
    Option(CONFLICT_MODE, "fail", choice("fail", "append", "replace"),
           "What a write does where data already exists: fail, append or replace "
           "(the directory, or each partition that receives data).",
           ("s3.multipart.committer.conflict-mode",)),
    Option(WRITE_UUID, None, optional_str,
           "UUID of the write, put in every file name; generated when not set.",
           ("s3.multipart.committer.uuid", "spark.sql.sources.writeJobUUID")),
    Option(UPLOAD_PART_SIZE, 10 * 1024 * 1024, int_min(5 * 1024 * 1024),
           "S3 staging: multipart upload part size in bytes.",
           ("s3.multipart.committer.upload.size",)),
    Option(COMMIT_THREADS, 8, int_min(1),
           "S3 staging: threads completing uploads at job commit.",
           ("s3.multipart.committer.num-threads",)),
    Option(EARLY_CONFLICT_DETECTION, False, parse_bool,
           "Batched markers: refuse at once a marker for a file id that another inflight "
           "instant is writing in the same partition.",
           ("hoodie.write.concurrency.early.conflict.detection.enable",)),
    Option(BATCH_FORMAT, "parquet", choice("parquet", "avro"),
           "Batched markers: file format of the segment files (parquet or avro).",
           ()),
    Option(BATCH_MAX_SEGMENTS, 20, int_min(4),
           "Batched markers: most segment files one marker folder may hold; compaction "
           "merges segments to stay under it.",
           ()),
    Option(BATCHED_FALLBACK_DIRECT, False, parse_bool,
           "Batched markers: when the marker server cannot be reached, write direct markers "
           "instead (with one warning) rather than fail. Off: an unreachable server fails.",
           ()),
    Option(SERVER_MAX_BODY_BYTES, 1024 * 1024, int_min(1024),
           "Marker server: largest request body accepted; larger ones get 413.",
           ()),
    Option(SERVER_INSTANT_CHECK_MS, 2000, int_min(0),
           "Marker server: how stale its view of the timeline may get before a flush re-reads "
           "it (refuses markers of instants no longer inflight; feeds early conflict "
           "detection). 0 checks only when a marker folder is first loaded.",
           ()),
    Option(SERVER_HEADER_TIMEOUT_MS, 15000, int_min(100),
           "Marker server: time a client has to send a request's headers (counted from the "
           "connection's opening or its last answer; also how long an idle connection is "
           "kept) and its body; slower connections are closed.",
           ()),
    Option(CLIENT_TIMEOUT_MS, 30000, int_min(1),
           "Marker client: timeout of one request to the marker server.",
           ()),
    Option(CLIENT_RETRIES, 3, int_min(0),
           "Marker client: retries of a request that could not reach the server or got 503.",
           ()),
    Option(CLIENT_CONNECT_TIMEOUT_MS, 10000, int_min(1),
           "Marker client: how long a task keeps trying to connect to the marker server, "
           "all tries together, before it fails naming the address (the write then fails "
           "and is rolled back once Spark gives up the task).",
           ()),
    Option(SERVER_HOST, None, optional_str,
           "Batched markers in a Spark write: the host executors reach the driver's marker "
           "server at (default: spark.driver.host). The server binds "
           "spark.driver.bindAddress, or else spark.driver.host, as Spark's driver does.",
           ()),
    Option(UUID_REQUIRED, False, parse_bool,
           "Refuse a write that is not given a write UUID (markerstore.write.uuid).",
           ("fs.s3a.committer.require.uuid",)),
    Option(STAGING_MODE, "auto", choice("auto", "multipart", "rename", "none"),
           "How task output stays invisible until job commit: multipart (S3: uncompleted "
           "multipart uploads), rename (local, memory: staged under .markerstore/staging, "
           "renamed at job commit), none (written in place, visible before commit). auto "
           "is multipart on S3 and rename elsewhere.",
           ()),
    Option(STAGING_DIR, None, optional_str,
           "S3 staging: local folder where tasks write files before uploading them "
           "(default: Spark's local dir of the executor, $SPARK_LOCAL_DIRS, removed when "
           "the application ends; else the system temporary folder).",
           ()),
    Option(STAGING_SWEEP_GRACE_MS, 3600000, int_min(0),
           "S3 staging: a task attempt's local folder left by a killed process (no live "
           "process holds its lock) is removed by the next task on that worker once "
           "nothing in it changed for this long.",
           ()),
    Option(TARGET_FILE_SIZE, 128 * 1024 * 1024, int_min(1),
           "A task starts a new data file once the current one reaches this many bytes.",
           ("hoodie.parquet.max.file.size",)),
    Option(ROW_GROUP_BYTES, 8 * 1024 * 1024, int_min(1),
           "Rows buffered (Arrow bytes in memory) before a Parquet row group is written; "
           "small enough that encoding overlaps with Spark producing the next rows.",
           ("hoodie.parquet.block.size",)),
    Option(PARQUET_COMPRESSION, "snappy",
           choice("snappy", "zstd", "gzip", "lz4", "brotli", "none",
                   synonyms={"uncompressed": "none"}),
           "Parquet compression codec of data files.",
           ("hoodie.parquet.compression.codec",)),
    Option(MAX_OPEN_FILES, 16, int_min(1),
           "Data files a task keeps open at once (one per partition value); the least "
           "recently used is closed beyond this.",
           ()),
    Option(INGEST_TASK_BYTES, 256 * 1024 * 1024, int_min(1),
           "Ingest: source bytes a Spark task reads at most. Source splits are packed into "
           "as few tasks as this allows, one wave per core at least (balanced by bytes).",
           ()),
    Option(CONNECT_TIMEOUT_MS, 10000, int_min(1),
           "Ingest over Spark Connect (--remote): how long to wait for the server to accept "
           "a connection before failing with one line naming its address.",
           ()),
    Option(CONNECT_RETRIES, 3, int_min(0),
           "Ingest over Spark Connect: retries of a Spark Connect call the server did not "
           "answer (pyspark's own default keeps retrying for 10 minutes).",
           ()),
    Option(INGEST_SPLIT_BYTES, 64 * 1024 * 1024, int_min(1),
           "Ingest: a JSON-lines or CSV file larger than this (not compressed) is read in "
           "byte ranges of this size, each by one task; each range reads the records that "
           "start in it. When not given, a source of few large files is cut smaller, into "
           "two ranges per core (16 MiB at least), so that every core stays busy.",
           ()),
    Option(SQL_TIME_LIMIT_MS, 5 * 60 * 1000, int_min(0),
           "SQL sandbox: a query running longer than this is interrupted (0: no limit).",
           ()),
    Option(SQL_MEMORY_LIMIT, "2GB", memory_size,
           "SQL sandbox: DuckDB's memory_limit for the query (a size such as 512MB or 4GiB).",
           ()),
    Option(INGEST_CSV_SEP, ",", csv_separator,
           "Ingest, CSV (Spark's sep): the field separator, one character other than the "
           "quote and a line break (\\t for a tab; any character, as Spark takes it: þ, §).",
           ("sep", "delimiter")),
    Option(INGEST_CSV_ESCAPE, '"', csv_escape,
           "Ingest, CSV (Spark's escape, whose default there is a backslash): what escapes "
           "a quote inside a quoted field. \" (RFC 4180): \"\" is a quote; another "
           "character (\\ as Spark writes): it escapes a quote or itself, and is kept "
           "before any other character.", ("escape",)),
    Option(INGEST_CSV_HEADER, True, parse_bool,
           "Ingest, CSV (Spark's header, whose default there is false): the first record of "
           "each file names the columns; false: every record is data and the columns are "
           "the schema's in order (an inferred schema names them _c0, _c1, ...).",
           ("header",)),
    Option(INGEST_NULL_VALUE, "", text,
           "Ingest, CSV (Spark's nullValue): a field equal to this, quoted or not, is null; "
           "an empty unquoted field is always null.", ("nullValue",)),
    Option(INGEST_EMPTY_VALUE, "", text,
           "Ingest, CSV (Spark's emptyValue): what a quoted empty field (\"\") reads as; null "
           "when it equals nullValue (so by default). nullValue=\\N reads \"\" as an empty "
           "string.", ("emptyValue",)),
    Option(INGEST_NON_NUMERIC, True, parse_bool,
           "Ingest, JSON (Spark's allowNonNumericNumbers): read NaN, Infinity and -Infinity "
           "as doubles; false: such a record is a parse error (RFC 8259 has no such "
           "tokens).", ("allowNonNumericNumbers",)),
    Option(INGEST_JSON_MULTILINE, False, parse_bool,
           "Ingest, JSON (Spark's multiLine): each file is one JSON document, read whole; "
           "its records are the elements of a top-level array (any other document is one "
           "record). The document counts as one record for record.max_bytes.",
           ("multiLine",)),
    Option(INGEST_VALUE_AS_TEXT, True, parse_bool,
           "Ingest, JSON: a STRING column takes a number, boolean, array or object as its "
           "JSON text, as written (as Spark does); false: such a value is a cast error.",
           ()),
    Option(INGEST_ENCODING_ERRORS, "strict", choice("strict", "replace"),
           "Ingest: a record whose bytes are not UTF-8 is an error record of reason "
           "encoding, its bytes kept (strict), or is read with U+FFFD for them (replace).",
           ()),
    Option(INGEST_DATE_FORMAT, None, pattern_option("dateFormat"),
           "Ingest, CSV and JSON (Spark's dateFormat): the pattern of DATE values, in Spark's "
           "datetime pattern letters (the subset in docs/ERROR_TABLE.md, such as dd/MM/yyyy); "
           "a value that does not match is a cast error. Not set: ISO 8601 (yyyy-MM-dd). "
           "Without a schema, a CSV column whose every sampled value matches it (not set: is "
           "an ISO date) is inferred as a DATE (Spark's preferDate).",
           ("dateFormat",)),
    Option(INGEST_TIMESTAMP_FORMAT, None, pattern_option("timestampFormat"),
           "Ingest, CSV and JSON (Spark's timestampFormat): the pattern of TIMESTAMP values "
           "(such as yyyy-MM-dd'T'HH:mm:ss.SSSXXX); a value without an offset is UTC. Not "
           "set: ISO 8601 with an offset. Without a schema, a CSV column whose every sampled "
           "value matches it (not set: is an ISO timestamp), and not dateFormat, is inferred "
           "as a TIMESTAMP.",
           ("timestampFormat",)),
    Option(INGEST_INFER_SCHEMA, True, parse_bool,
           "Ingest, CSV (Spark's inferSchema, whose default there is false): without a "
           "schema, each column's type is inferred from the sampled records (README, "
           "Inferred schema); false: every column is STRING, as Spark reads one by default.",
           ("inferSchema",)),
    Option(INGEST_PREFER_DATE, True, parse_bool,
           "Ingest, CSV (Spark's preferDate): inference may type a column DATE; false: a "
           "column of dates is inferred as a TIMESTAMP where timestampFormat (or ISO 8601) "
           "reads it, else STRING.", ("preferDate",)),
    Option(INGEST_PREFERS_DECIMAL, False, parse_bool,
           "Ingest, JSON (Spark's prefersDecimal): inference types numbers with a fraction "
           "DECIMAL(p,s), wide enough for every sampled value (38 digits at most), not "
           "DOUBLE.", ("prefersDecimal",)),
    Option(INGEST_PRIMITIVES_AS_STRING, False, parse_bool,
           "Ingest, JSON (Spark's primitivesAsString): inference types every number and "
           "boolean STRING, read as its JSON text; a column with one inside its arrays or "
           "structs is STRING as a whole.", ("primitivesAsString",)),
    Option(INGEST_INFER_RECORDS, 2000, int_min(1),
           "Ingest: how many records, from the start of the source, schema inference reads "
           "(Spark reads them all by default: a type that first shows past them is a cast "
           "error for its records).", ()),
    Option(INGEST_TIMESTAMP_NTZ_FORMAT, None, pattern_option("timestampNTZFormat"),
           "Ingest, CSV and JSON (Spark's timestampNTZFormat): the pattern of TIMESTAMP_NTZ "
           "values (no offset letters). Not set: ISO 8601 without an offset.",
           ("timestampNTZFormat",)),
    Option(INGEST_NAN_VALUE, "NaN", text,
           "Ingest, CSV (Spark's nanValue): the text of NaN in a FLOAT or DOUBLE column, "
           "besides NaN in any case.", ("nanValue",)),
    Option(INGEST_POSITIVE_INF, "Inf", text,
           "Ingest, CSV (Spark's positiveInf): the text of +infinity in a FLOAT or DOUBLE "
           "column, besides inf and infinity in any case, with or without +.",
           ("positiveInf",)),
    Option(INGEST_NEGATIVE_INF, "-Inf", text,
           "Ingest, CSV (Spark's negativeInf): the text of -infinity in a FLOAT or DOUBLE "
           "column, besides -inf and -infinity in any case.", ("negativeInf",)),
    Option(INGEST_ENCODING, "utf-8", charset,
           "Ingest, CSV and JSON (Spark's encoding, alias charset): the files' character "
           "encoding: utf-8, iso-8859-1 (latin1), windows-1252 (cp1252), utf-16 (with a "
           "byte order mark), utf-16le, utf-16be. A record it cannot decode is an "
           "encoding error record, its bytes kept. A UTF-16 file is read whole by one task.",
           ("encoding", "charset")),
    Option(INGEST_LOCALE, "en-US", locale,
           "Ingest, CSV and JSON (Spark's locale): a BCP 47 language tag CLDR knows (fr-FR, "
           "de-DE, pt-BR, ...): a DECIMAL's text is read with the locale's decimal and "
           "grouping separators (de-DE: 14.000,00), a grouping separator only between groups "
           "of digits; the names of months, days and AM/PM in a dateFormat or "
           "timestampFormat are the locale's (CLDR's data, through Babel).", ("locale",)),
    Option(INGEST_RECORD_MAX_BYTES, 64 * 1024 * 1024, int_min(1),
           "Ingest: a record (a line, or a CSV record spanning lines) larger than this is "
           "one error record of reason size holding its first 64 KiB; it is never held "
           "whole in memory.", ()),
    # Spark's reader options for the structure of records (docs/ERROR_TABLE.md: differences)
    Option(INGEST_MODE, "PERMISSIVE", read_mode,
           "Ingest (Spark's mode, any case): PERMISSIVE keeps every malformed record as one "
           "error record; FAILFAST allows none: the write fails and is rolled back, data and "
           "error rows alike, in one line naming the reason (error.table.max_records=0). "
           "DROPMALFORMED is refused: the error table keeps malformed records.", ("mode",)),
    Option(INGEST_CORRUPT_RECORD, None, corrupt_record_column,
           "Ingest (Spark's columnNameOfCorruptRecord): refused; a malformed record is never "
           "a row, the error table holds it with its text and reason.",
           ("columnNameOfCorruptRecord",)),
    Option(INGEST_CSV_QUOTE, '"', csv_quote,
           "Ingest, CSV (Spark's quote): the character that opens and closes a quoted field; "
           "doubled inside one it is itself, unless escape names another character.",
           ("quote",)),
    Option(INGEST_CSV_COMMENT, "", csv_comment,
           "Ingest, CSV (Spark's comment): a line that starts with this character (outside a "
           "quoted field) is no record; empty (the default): none is a comment.",
           ("comment",)),
    Option(INGEST_CSV_LINE_SEP, None, csv_line_sep,
           "Ingest, CSV (Spark's lineSep): what ends a record outside a quoted field. Default: "
           "any of LF, CRLF and a lone CR; else one character (\\n, \\r, ...) or \\r\\n.",
           ("lineSep",)),
    Option(INGEST_CSV_IGNORE_LEADING, False, parse_bool,
           "Ingest, CSV (Spark's ignoreLeadingWhiteSpace, false for reading): spaces and tabs "
           "before a value are not part of it (before an opening quote too).",
           ("ignoreLeadingWhiteSpace",)),
    Option(INGEST_CSV_IGNORE_TRAILING, False, parse_bool,
           "Ingest, CSV (Spark's ignoreTrailingWhiteSpace, false for reading): spaces and tabs "
           "after a value are not part of it (after a closing quote too).",
           ("ignoreTrailingWhiteSpace",)),
    Option(INGEST_CSV_SKIP, 0, int_min(0),
           "Ingest, CSV (DuckDB's read_csv skip; Spark has none): the lines at the top of each "
           "file that are not CSV (a title, notes), skipped before the header: each ends at "
           "the first line end, its quotes unread. They count in source_lines.",
           ("skip",)),
    Option(INGEST_CSV_NULL_PADDING, False, parse_bool,
           "Ingest, CSV (DuckDB's read_csv null_padding; Spark has none): a record with fewer "
           "fields than the header reads its missing last columns as null (spreadsheet exports "
           "drop trailing empty fields); false: such a record is a parse error. A record with "
           "more fields stays one.", ("null_padding",)),
    Option(PARTITION_SORT, "python", choice("python", "jvm"),
           "How a DataFrame write with partition columns groups rows: python (each Arrow "
           "batch grouped by the task; no sort in the JVM) or jvm (sortWithinPartitions "
           "first: for tasks that see more partition values than max_open_files).",
           ()),
    Option(ROLL_FORWARD, True, parse_bool,
           "Recovery completes a failed write whose job commit plan was durably written "
           "(every winning file staged) instead of rolling it back.",
           ()),
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
           "version or snapshot references) and expire Iceberg's older snapshots.",
           ()),
    Option(ICEBERG_IDENTIFIER, None, optional_str,
           "Iceberg publishing: the table's identifier (namespace.table) in its catalog "
           "(default: markerstore.<folder name>; its error table: the same namespace and "
           "the error table's folder name).",
           ()),
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


# Keys of a family: a prefix and a name the user picks (another library's own property
# names). resolve() keeps them as text, under the prefix's spelling.
PREFIX_KEYS: dict[str, str] = {
    ICEBERG_CATALOG_PREFIX + "<property>":
        "Iceberg publishing: one property of the catalog, as pyiceberg names it (uri, "
        "type, warehouse, s3.endpoint, ...). Default: a local table's embedded SQLite "
        "catalog (.markerstore/iceberg/catalog.db); a table on S3 must set "
        + ICEBERG_CATALOG_PREFIX + "uri.",
}
_PREFIXES = tuple(key.rpartition("<")[0] for key in PREFIX_KEYS)


def prefixed_key(key: str) -> str | None:
    """`key` spelled as a key of a family (:data:`PREFIX_KEYS`), its prefix matched without
    case; None when it is not one."""
    for prefix in _PREFIXES:
        if key.lower().startswith(prefix) and len(key) > len(prefix):
            return prefix + key[len(prefix):]
    return None


# An error record's reason: the key in its context map, and the column a task's error rows
# carry on their way to the error table (the commit protocol counts them by it).
REASON_KEY = "reason"

# --- metric names that more than one package reports --------------------------------------
# Records sent to an error table, by table and reason: errortable counts them, every marker
# server's /metrics and errortable.metrics.prometheus_lines() show them under this one name.
FAILED_RECORDS_METRIC = "markerstore_failed_records_total"
FAILED_RECORDS_HELP = "Records that failed and were written to an error table."


# --- keys of the Spark data source only ------------------------------------------------
# `df.write.format("markerstore").option(key, value)` takes every option above (any case:
# Spark lowercases option keys) and these, which carry what `markerstore.spark.write`
# takes as arguments. They are not write settings, so resolve() does not accept them.
SOURCE_PARTITION_BY = "markerstore.write.partition_by"
SOURCE_KEY = "markerstore.write.key"
SOURCE_CHECK_PREFIX = "markerstore.write.check."
SOURCE_STORAGE_OPTIONS = "markerstore.storage_options"
SOURCE_STORAGE_OPTION_PREFIX = "markerstore.storage_options."
STREAM_QUERY_ID = "markerstore.stream.query_id"
SOURCE_KEYS: dict[str, str] = {
    SOURCE_PARTITION_BY: "Partition columns, comma separated (Spark refuses .partitionBy "
                         "for Python data sources).",
    SOURCE_KEY: "Record key column: rows with a null key go to the error table.",
    SOURCE_CHECK_PREFIX + "<name>": "A named check (SQL boolean expression over the row); "
                                    "failing rows go to the error table.",
    SOURCE_STORAGE_OPTIONS: "fsspec storage options of the table, as a JSON object.",
    SOURCE_STORAGE_OPTION_PREFIX + "<key>": "One fsspec storage option (a JSON value, or "
                                            "the text as is).",
    STREAM_QUERY_ID: "Streaming: the query's identity recorded with each batch (default: "
                     "derived from the checkpoint location).",
}


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
    """Every option with its default, aliases and doc (for the README table and `--help`)."""
    rows = [{"key": o.key, "default": o.default, "aliases": list(o.aliases), "doc": o.doc}
            for o in OPTIONS.values()]
    rows += [{"key": key, "default": None, "aliases": [], "doc": doc}
             for key, doc in PREFIX_KEYS.items()]
    return sorted(rows, key=lambda row: str(row["key"]))
