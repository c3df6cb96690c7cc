"""Table formats a markerstore table also publishes (Delta Lake, Apache Iceberg).

Each completed instant becomes exactly one version or snapshot of each format the table
names in ``.markerstore/table.json`` (option ``markerstore.table.formats``, set when the
table is created), in the instants' order. The commit protocol calls :func:`publish`;
each format is one module behind the small interface of :mod:`markerstore.formats.base`
(``delta``, ``iceberg``), imported lazily by :func:`open_publisher`, with an install
hint where its package is missing (``pip install 'markerstore[delta]'`` /
``'markerstore[iceberg]'``).
"""

from markerstore.formats.base import (
    APPEND,
    OVERWRITE,
    CommitToPublish,
    FormatPublisher,
    PublishDeferred,
    PublishedFile,
)
from markerstore.formats.commits import commit_to_publish, hive_partition
from markerstore.formats.publish import (
    FORMATS,
    FormatOutcome,
    Published,
    check_write,
    drift,
    open_publisher,
    publish,
    publishers_of,
    referenced_paths,
    status,
)

__all__ = [
    "APPEND", "FORMATS", "OVERWRITE", "CommitToPublish", "FormatOutcome", "FormatPublisher",
    "PublishDeferred", "Published", "PublishedFile",
    "check_write", "commit_to_publish", "drift", "hive_partition", "open_publisher",
    "publish", "publishers_of", "referenced_paths", "status",
]
