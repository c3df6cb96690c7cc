"""The interface between a completed instant and a table format that publishes it.

A publisher turns one completed instant (its files and the files it replaced) into one
version (Delta) or one snapshot (Iceberg) of the same folder, carrying the instant id so
that publishing twice is a no-op. The completed instant is the one source of truth: a
publisher never decides anything, it follows the timeline.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from markerstore.timeline import COMPLETED, ROLLEDBACK, format_instant, parse_instant

if TYPE_CHECKING:
    import pyarrow as pa

    from markerstore.timeline import InstantInfo

# The key, in a format version's commit info or snapshot summary, naming its instant.
INSTANT_KEY = "markerstore.instant"
# The keys, beside it, of what the timeline looked like when the version was written
# (:class:`Settled`).
SETTLED_BEFORE_KEY = "markerstore.settled-before"
SETTLED_COUNT_KEY = "markerstore.settled-count"
APPEND = "append"
OVERWRITE = "overwrite"


class PublishDeferred(Exception):
    """Raised by :meth:`FormatPublisher.publish` for a commit the format cannot take yet
    (an empty commit before the format's table exists: no schema to create it with);
    :func:`markerstore.formats.publish` tries it again after the later instants."""


@dataclass(frozen=True)
class Settled:
    """What a format's version says of the timeline it was published from: every instant
    before `before` was terminal there, and each completed one was held by the format;
    `count` instants were before it. So later the instants before `before` need no look:
    unless the timeline now has more of them (a writer whose clock is behind started an
    instant with an older id since), and then each is looked at again."""

    before: str
    count: int

    def to_summary(self) -> dict[str, str]:
        return {SETTLED_BEFORE_KEY: self.before, SETTLED_COUNT_KEY: str(self.count)}

    @classmethod
    def from_summary(cls, summary: Mapping[str, object] | None) -> Settled | None:
        """The settled mark a version's commit info or a snapshot's summary holds, or None
        (a version written before marks were kept, or by another tool)."""
        before = (summary or {}).get(SETTLED_BEFORE_KEY)
        count = (summary or {}).get(SETTLED_COUNT_KEY)
        try:
            return cls(str(before), int(str(count))) if before and count is not None else None
        except ValueError:
            return None


@dataclass(frozen=True)
class TimelineView:
    """One listing of a table's timeline, as the formats' publishing reads it: every
    instant id (any state), and the completed ones, oldest first."""

    instants: tuple[str, ...]
    completed: tuple[str, ...]
    open: tuple[str, ...] = ()          # requested or inflight: they may still complete

    @classmethod
    def of(cls, infos: Iterable[InstantInfo]) -> TimelineView:
        listed = list(infos)
        instants = [i.instant for i in listed]
        if any(map(operator.ge, instants, instants[1:])):  # a timeline lists them sorted
            listed.sort(key=operator.attrgetter("instant"))
            instants = [i.instant for i in listed]
        return cls(tuple(instants),
                   tuple(i.instant for i in listed if i.state == COMPLETED),
                   tuple(i.instant for i in listed if i.state not in (COMPLETED, ROLLEDBACK)))

    def count_before(self, instant: str) -> int:
        return bisect.bisect_left(self.instants, instant)

    def still_settled(self, mark: Settled | None) -> bool:
        """Whether the timeline has exactly the instants before `mark` it had then."""
        return mark is not None and self.count_before(mark.before) == mark.count

    def settled(self, unpublished: Sequence[str] = ()) -> Settled:
        """The mark a version published now carries: before the oldest instant still open
        or still to publish (`unpublished`), else just after the newest instant."""
        waiting = [*self.open, *unpublished]
        if waiting:
            before = min(waiting)
        elif self.instants:
            before = format_instant(parse_instant(self.instants[-1]) + timedelta(milliseconds=1))
        else:
            before = "0"
        return Settled(before, self.count_before(before))

    def candidates(self, mark: Settled | None) -> list[str]:
        """The completed instants a format with `mark` may not hold: those from its mark on
        while the timeline before it is unchanged, else every one."""
        if not self.still_settled(mark):
            return list(self.completed)
        assert mark is not None
        return [i for i in self.completed if i >= mark.before]


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
    settled: Settled | None = None         # what the timeline said when it was published


class FormatPublisher(Protocol):
    """One table format of one table."""

    name: str

    def published_instants(self) -> set[str]:
        """The instants the format's log already holds (read from the log itself)."""
        ...

    def unpublished(self, view: TimelineView) -> list[str]:
        """The completed instants of `view` the format does not hold, oldest first: the
        format's state read once (its latest version's :class:`Settled` mark says which
        instants need a look)."""
        ...

    def publish(self, commit: CommitToPublish) -> None:
        """Make `commit` one version/snapshot of the format, atomically; a no-op when the
        format already holds `commit.instant`."""
        ...

    def referenced_paths(self) -> set[str]:
        """Table-relative paths of every file a retained version/snapshot references
        (rollback, expire and repair never delete these)."""
        ...
