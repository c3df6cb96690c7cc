"""Every option key, its default, its aliases, in one place.

Keys are Spark-style strings. Hudi's spellings (``hoodie.*``) and the s3committer's
(``s3.multipart.committer.*``) are accepted as aliases. ``resolve()`` maps a user's dict
to canonical keys, rejects unknown keys with the closest matches, parses each value,
and returns a frozen :class:`Settings`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from markerstore.errors import ConfigError

Parser = Callable[[Any], Any]


@dataclass(frozen=True)
class Option:
    key: str
    default: Any
    parse: Parser
    doc: str
    aliases: tuple[str, ...] = ()


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _int_min(minimum: int) -> Parser:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"expected an integer, got {value!r}")
        number = int(str(value).strip())
        if number < minimum:
            raise ValueError(f"expected an integer >= {minimum}, got {number}")
        return number

    return parse


def _choice(*choices: str, synonyms: Mapping[str, str] | None = None) -> Parser:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        text = (synonyms or {}).get(text, text)
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return text

    return parse


def _str(value: Any) -> str:
    return str(value)


def _optional_str(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


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
UUID_REQUIRED = "markerstore.write.uuid.required"
STAGING_MODE = "markerstore.write.staging.mode"
STAGING_DIR = "markerstore.write.staging.dir"
TARGET_FILE_SIZE = "markerstore.write.target_file_size"
ROW_GROUP_BYTES = "markerstore.write.parquet.row_group_bytes"
PARQUET_COMPRESSION = "markerstore.write.parquet.compression"
MAX_OPEN_FILES = "markerstore.write.max_open_files"
PARTITION_SORT = "markerstore.write.partition.sort"
ROLL_FORWARD = "markerstore.write.recovery.roll_forward"

OPTIONS: dict[str, Option] = {}


def register(option: Option) -> Option:
    """Add an option (other packages, such as errortable, register theirs at import)."""
    existing = OPTIONS.get(option.key)
    if existing is not None and existing != option:
        raise ConfigError(f"option {option.key} is registered twice with different definitions")
    OPTIONS[option.key] = option
    for alias in option.aliases:
        _ALIASES[alias] = option.key
    return option


_ALIASES: dict[str, str] = {}

for _opt in (
    Option(MARKERS_TYPE, "direct",
           _choice("direct", "batched", synonyms={"timeline_server_based": "batched"}),
           "Marker mechanism: direct (one empty object per data file) or batched "
           "(marker server in the driver, segment files).",
           ("hoodie.write.markers.type",)),
    Option(BATCH_INTERVAL_MS, 50, _int_min(1),
           "Batched markers: how often pending marker requests are flushed as one segment.",
           ("hoodie.markers.timeline_server_based.batch.interval_ms",)),
    Option(BATCH_NUM_THREADS, 20, _int_min(1),
           "Batched markers: flushes running in parallel across marker folders.",
           ("hoodie.markers.timeline_server_based.batch.num_threads",)),
    Option(MARKERS_DELETE_PARALLELISM, 100, _int_min(1),
           "Threads deleting invalid data files and markers.",
           ("hoodie.markers.delete.parallelism",)),
    Option(HEARTBEAT_INTERVAL_MS, 60000, _int_min(10),
           "How often a writer renews the heartbeat of its inflight instant.",
           ("hoodie.client.heartbeat.interval_in_ms",)),
    Option(HEARTBEAT_TOLERABLE_MISSES, 2, _int_min(0),
           "Missed heartbeats after which an inflight instant counts as failed.",
           ("hoodie.client.heartbeat.tolerable.misses",)),
    Option(FAILED_WRITES_POLICY, "eager", _choice("eager", "lazy", "never"),
           "Rollback of failed writes: eager (next write rolls back every failed inflight "
           "instant, one writer), lazy (only instants whose heartbeat expired), never.",
           ("hoodie.cleaner.policy.failed.writes",)),
    Option(STORAGE_RETRIES, 5, _int_min(0),
           "Retries of a storage request that failed with throttling (503) or a timeout.",
           ()),
    Option(STORAGE_RETRY_BASE_DELAY_MS, 100, _int_min(0),
           "First backoff delay of storage retries; doubles on each retry, with jitter.",
           ()),
    Option(CONFLICT_MODE, "fail", _choice("fail", "append", "replace"),
           "What a write does where data already exists: fail, append or replace "
           "(the directory, or each partition that receives data).",
           ("s3.multipart.committer.conflict-mode",)),
    Option(WRITE_UUID, None, _optional_str,
           "UUID of the write, put in every file name; generated when not set.",
           ("s3.multipart.committer.uuid", "spark.sql.sources.writeJobUUID")),
    Option(UPLOAD_PART_SIZE, 10 * 1024 * 1024, _int_min(5 * 1024 * 1024),
           "S3 staging: multipart upload part size in bytes.",
           ("s3.multipart.committer.upload.size",)),
    Option(COMMIT_THREADS, 8, _int_min(1),
           "S3 staging: threads completing uploads at job commit.",
           ("s3.multipart.committer.num-threads",)),
    Option(EARLY_CONFLICT_DETECTION, False, _bool,
           "Batched markers: refuse at once a marker for a file id that another inflight "
           "instant is writing in the same partition.",
           ("hoodie.write.concurrency.early.conflict.detection.enable",)),
    Option(BATCH_FORMAT, "parquet", _choice("parquet", "avro"),
           "Batched markers: file format of the segment files (parquet or avro).",
           ()),
    Option(BATCH_MAX_SEGMENTS, 20, _int_min(4),
           "Batched markers: most segment files one marker folder may hold; compaction "
           "merges segments to stay under it.",
           ()),
    Option(BATCHED_FALLBACK_DIRECT, False, _bool,
           "Batched markers: when the marker server cannot be reached, write direct markers "
           "instead (with one warning) rather than fail. Off: an unreachable server fails.",
           ()),
    Option(SERVER_MAX_BODY_BYTES, 1024 * 1024, _int_min(1024),
           "Marker server: largest request body accepted; larger ones get 413.",
           ()),
    Option(SERVER_INSTANT_CHECK_MS, 2000, _int_min(0),
           "Marker server: how stale its view of the timeline may get before a flush re-reads "
           "it (refuses markers of instants no longer inflight; feeds early conflict "
           "detection). 0 checks only when a marker folder is first loaded.",
           ()),
    Option(CLIENT_TIMEOUT_MS, 30000, _int_min(1),
           "Marker client: timeout of one request to the marker server.",
           ()),
    Option(CLIENT_RETRIES, 3, _int_min(0),
           "Marker client: retries of a request that could not reach the server or got 503.",
           ()),
    Option(UUID_REQUIRED, False, _bool,
           "Refuse a write that is not given a write UUID (markerstore.write.uuid).",
           ("fs.s3a.committer.require.uuid",)),
    Option(STAGING_MODE, "auto", _choice("auto", "multipart", "rename", "none"),
           "How task output stays invisible until job commit: multipart (S3: uncompleted "
           "multipart uploads), rename (local, memory: staged under .markerstore/staging, "
           "renamed at job commit), none (written in place, visible before commit). auto "
           "is multipart on S3 and rename elsewhere.",
           ()),
    Option(STAGING_DIR, None, _optional_str,
           "S3 staging: local folder where tasks write files before uploading them "
           "(default: the system temporary folder).",
           ()),
    Option(TARGET_FILE_SIZE, 128 * 1024 * 1024, _int_min(1),
           "A task starts a new data file once the current one reaches this many bytes.",
           ("hoodie.parquet.max.file.size",)),
    Option(ROW_GROUP_BYTES, 8 * 1024 * 1024, _int_min(1),
           "Rows buffered (Arrow bytes in memory) before a Parquet row group is written; "
           "small enough that encoding overlaps with Spark producing the next rows.",
           ("hoodie.parquet.block.size",)),
    Option(PARQUET_COMPRESSION, "snappy",
           _choice("snappy", "zstd", "gzip", "lz4", "brotli", "none",
                   synonyms={"uncompressed": "none"}),
           "Parquet compression codec of data files.",
           ("hoodie.parquet.compression.codec",)),
    Option(MAX_OPEN_FILES, 16, _int_min(1),
           "Data files a task keeps open at once (one per partition value); the least "
           "recently used is closed beyond this.",
           ()),
    Option(PARTITION_SORT, "python", _choice("python", "jvm"),
           "How a DataFrame write with partition columns groups rows: python (each Arrow "
           "batch grouped by the task; no sort in the JVM) or jvm (sortWithinPartitions "
           "first: for tasks that see more partition values than max_open_files).",
           ()),
    Option(ROLL_FORWARD, True, _bool,
           "Recovery completes a failed write whose job commit plan was durably written "
           "(every winning file staged) instead of rolling it back.",
           ()),
):
    register(_opt)


def canonical_key(key: str) -> str:
    """The canonical spelling of `key` (itself, or the key it is an alias of)."""
    if key in OPTIONS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    known = list(OPTIONS) + list(_ALIASES)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ConfigError(f"unknown option {key!r}{hint}")


@dataclass(frozen=True)
class Settings(Mapping[str, Any]):
    """Parsed options: every registered key, user value or default."""

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
        try:
            values[key] = OPTIONS[key].parse(raw_value)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"option {raw_key}: {exc}") from None
    return Settings(values)


def describe() -> list[dict[str, Any]]:
    """Every option with its default, aliases and doc (for the README table and `--help`)."""
    return [
        {"key": o.key, "default": o.default, "aliases": list(o.aliases), "doc": o.doc}
        for o in sorted(OPTIONS.values(), key=lambda o: o.key)
    ]
