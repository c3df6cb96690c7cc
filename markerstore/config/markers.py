"""The marker mechanisms: direct or batched (the marker server's segments), and their threads."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    choice,
    int_min,
    parse_bool,
)

MARKERS_TYPE = "markerstore.write.markers.type"
BATCH_INTERVAL_MS = "markerstore.markers.batch.interval_ms"
BATCH_NUM_THREADS = "markerstore.markers.batch.num_threads"
MARKERS_DELETE_PARALLELISM = "markerstore.markers.delete.parallelism"
EARLY_CONFLICT_DETECTION = "markerstore.write.early.conflict.detection.enable"
BATCH_FORMAT = "markerstore.markers.batch.format"
BATCH_MAX_SEGMENTS = "markerstore.markers.batch.max_segments"
BATCHED_FALLBACK_DIRECT = "markerstore.markers.batched.fallback.direct"

DEFINITIONS: tuple[Option, ...] = (
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
)
