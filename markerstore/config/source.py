"""Keys of the Spark data source only.

`df.write.format("markerstore").option(key, value)` takes every option of
`markerstore.config` (any case: Spark lowercases option keys) and these, which carry
what `markerstore.spark.write` takes as arguments. They are not write settings, so
resolve() does not accept them.
"""

from __future__ import annotations

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
