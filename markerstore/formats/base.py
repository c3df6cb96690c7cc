"""The interface between a completed instant and a table format that publishes it.

A publisher turns one completed instant (its files and the files it replaced) into one
version (Delta) or one snapshot (Iceberg) of the same folder, carrying the instant id so
that publishing twice is a no-op. The completed instant is the one source of truth: a
publisher never decides anything, it follows the timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

# The key, in a format version's commit info or snapshot summary, naming its instant.
INSTANT_KEY = "markerstore.instant"
APPEND = "append"
OVERWRITE = "overwrite"


class PublishDeferred(Exception):
    """Raised by :meth:`FormatPublisher.publish` for a commit the format cannot take yet
    (an empty commit before the format's table exists: no schema to create it with);
    :func:`markerstore.formats.publish` tries it again after the later instants."""


@dataclass(frozen=True)
class PublishedFile:
    """A data file of a completed instant, relative to the table folder."""

    path: str
    size: int
    rows: int | None = None
    # Hive-style partition values of the file's folder, unescaped once (``s=50%2525/...``
    # -> {"s": "50%25"}); None for a null partition.
    partition: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CommitToPublish:
    """One completed instant, as a format publishes it."""

    instant: str
    mode: str                              # APPEND, or OVERWRITE for a replace
    added: tuple[PublishedFile, ...]
    removed: tuple[str, ...]               # relative paths a replace replaced
    partition_by: tuple[str, ...]
    schema: pa.Schema                      # the table's columns, partition columns included


class FormatPublisher(Protocol):
    """One table format of one table."""

    name: str

    def published_instants(self) -> set[str]:
        """The instants the format's log already holds (read from the log itself)."""
        ...

    def publish(self, commit: CommitToPublish) -> None:
        """Make `commit` one version/snapshot of the format, atomically; a no-op when the
        format already holds `commit.instant`."""
        ...

    def referenced_paths(self) -> set[str]:
        """Table-relative paths of every file a retained version/snapshot references
        (rollback, expire and repair never delete these)."""
        ...
