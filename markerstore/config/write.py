"""A write and its commit: conflict mode, write UUID, staging, data files, heartbeats and
the rollback of failed writes."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    choice,
    int_min,
    optional_str,
    parse_bool,
)

HEARTBEAT_INTERVAL_MS = "markerstore.heartbeat.interval_ms"
HEARTBEAT_TOLERABLE_MISSES = "markerstore.heartbeat.tolerable_misses"
FAILED_WRITES_POLICY = "markerstore.cleaner.policy.failed_writes"
CONFLICT_MODE = "markerstore.write.conflict.mode"
WRITE_UUID = "markerstore.write.uuid"
UPLOAD_PART_SIZE = "markerstore.write.upload.part_size"
COMMIT_THREADS = "markerstore.write.commit.threads"
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
HEARTBEAT_MAX_CLOCK_SKEW_MS = "markerstore.heartbeat.max_clock_skew_ms"

DEFINITIONS: tuple[Option, ...] = (
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
    Option(PARTITION_SORT, "python", choice("python", "jvm"),
           "How a DataFrame write with partition columns groups rows: python (each Arrow "
           "batch grouped by the task; no sort in the JVM) or jvm (sortWithinPartitions "
           "first: for tasks that see more partition values than max_open_files).",
           ()),
    Option(ROLL_FORWARD, True, parse_bool,
           "Recovery completes a failed write whose job commit plan was durably written "
           "(every winning file staged) instead of rolling it back.",
           ()),
)
