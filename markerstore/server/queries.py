"""What the marker server answers about the markers it holds (a part of
:class:`~markerstore.server.service.MarkerService`): names, rows, existence, the data
files created or merged. Read from the segments held in memory, a piece at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from markerstore.markers.base import IOType, MarkerName
from markerstore.markers.segments import dedupe, rows_to_table
from markerstore.server.keys import KeySet, keys_of, names_of
from markerstore.server.state import DirState


class MarkerQueries:
    """The read side of the marker service."""

    if TYPE_CHECKING:
        async def state(self, instant: str, *, write: bool = False, hold: bool = False
                        ) -> DirState: ...

    async def names(self, instant: str) -> list[str]:
        """Every marker name, sorted (a list: for small folders and tests; GET streams)."""
        return sorted(n for chunk in self.name_chunks(await self.state(instant))
                      for n in chunk.to_pylist())

    def name_chunks(self, state: DirState) -> Iterator[pa.Array]:
        """The names of the markers a folder holds, a piece of rows at a time, each once,
        in segment order (not sorted). The segments are those held when this is called;
        a compaction meanwhile replaces the list, not the segments in it."""
        segments = list(state.segments)
        seen = KeySet() if state.overlapping else None
        for segment in segments:
            for rows in segment.batches(["partition", "file", "io_type"]):
                names = names_of(rows)
                if seen is not None:  # a marker in more than one segment: once
                    blob = keys_of(names).astype(">u8").tobytes()
                    fresh = [seen.add(blob[i:i + 16]) for i in range(0, len(blob), 16)]
                    names = names.filter(pa.array(fresh, pa.bool_()))
                yield names

    async def has(self, instant: str, marker: MarkerName) -> bool:
        return marker.name in (await self.state(instant)).names

    async def exists(self, instant: str) -> bool:
        state = await self.state(instant)
        return state.initialized or bool(state.names)

    async def created_and_merged(self, instant: str) -> list[str]:
        paths: set[str] = set()
        for segment in list((await self.state(instant)).segments):
            for rows in segment.batches(["partition", "file", "io_type"]):
                rows = rows.filter(pc.is_in(rows.column("io_type"),
                                            pa.array([IOType.CREATE.value,
                                                      IOType.MERGE.value])))
                joined = pc.binary_join_element_wise(rows.column("partition"),
                                                     rows.column("file"), "/")
                data_paths = pc.if_else(pc.equal(rows.column("partition"), ""),
                                        rows.column("file"), joined)
                paths.update(data_paths.to_pylist())
        return sorted(paths)

    async def rows(self, instant: str) -> pa.Table:
        state = await self.state(instant)
        tables = list(self.row_chunks(state))
        return pa.concat_tables(tables) if tables else rows_to_table([])

    def row_chunks(self, state: DirState) -> Iterator[pa.Table]:
        """The rows of the markers a folder holds (MARKER_COLUMNS, one per marker), a piece
        at a time, in segment order. Segments that overlap (a crash mid-compaction, or
        details updates) are merged as a whole first (dedupe), which needs all their rows
        at once; those this server writes otherwise never overlap."""
        segments = list(state.segments)
        if not segments:
            return
        if state.overlapping:
            yield dedupe(pa.concat_tables([s.rows for s in segments]))
            return
        for segment in segments:
            yield from segment.batches()
