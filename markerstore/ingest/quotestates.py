"""The first pass over a CSV file read in byte ranges: the quote state at each range's
first line start, found on the driver before the tasks run and given to each range
(``SourceTask.quoted``), so that no task looks back at all.

For each range after a file's first (:mod:`~markerstore.ingest.csvranges`): its first line
start, and a look-back of at most ``LOOK_BACK_MAX`` before it, not past the previous
range's start (ordinary CSV: one 64 KiB read). Where that does not decide, the map of the
lines from the previous range's first line start to where the look-back began
(identity, flip or constant; read once, a block at a time), then the look-back's map, is
applied to the state there: a prefix over the ranges, from the file's start (outside a
quoted field). Every range's lines are read about once, so the pass is linear in the
file, and it holds about two blocks of :data:`PASS_BYTES` per thread. The reads run on a
few threads (fsspec's reads and numpy's scans release the GIL), one file handle each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from markerstore.ingest.blocks import ReadOptions, open_task
from markerstore.ingest.csvranges import Map, first_line_start, look_back, segment_map
from markerstore.ingest.skip import Skipped
from markerstore.ingest.sources import SourceTask

PASS_BYTES = 4 * 1024 * 1024  # what one thread of the pass reads at a time
THREADS = 8
Look = tuple[int, int, Map]  # a range's first line start, where its look back began, its map


def quote_states(tasks: Sequence[SourceTask], storage_options: Mapping[str, Any] | None,
                 options: ReadOptions, threads: int = THREADS) -> list[SourceTask]:
    """`tasks`, each CSV byte range after its file's first with `quoted`: whether its
    first line start lies inside a quoted field."""
    ranges: dict[str, list[int]] = {}  # a file's ranges after its first, by start
    for i, task in enumerate(tasks):
        if task.format == "csv" and task.start > 0:
            ranges.setdefault(task.url, []).append(i)
    out = list(tasks)
    if not ranges:
        return out
    storage = dict(storage_options or {})
    files = {url: replace(tasks[found[0]], start=0, end=None) for url, found in ranges.items()}
    with ThreadPoolExecutor(max(1, threads)) as pool:
        looks = {url: [pool.submit(_look, files[url], before, tasks[i].start, storage, options)
                       for before, i in _after(tasks, found)]
                 for url, found in ranges.items()}
        for url, found in ranges.items():
            order = [i for _, i in _after(tasks, found)]
            for i, state in zip(order, _prefix(pool, files[url], looks[url], storage, options),
                                strict=True):
                out[i] = replace(tasks[i], quoted=state)
    return out


def _prefix(pool: ThreadPoolExecutor, file: SourceTask, looks: list[Future[Look]],
            storage: dict[str, Any], options: ReadOptions) -> list[bool]:
    """The states at a file's ranges' first line starts (in order), from their looks back
    and, where those do not decide, the maps of the lines between them: from the previous
    range's first line start to where the look back began, then the look back's."""
    starts = [0] + [look.result()[0] for look in looks]
    maps: dict[int, Future[Map]] = {
        k: pool.submit(_segment, file, starts[k], look.result()[1], storage, options)
        for k, look in enumerate(looks) if not _decided(look.result())}
    states, state = [], False  # the file's start: outside a quoted field
    for k, look in enumerate(looks):
        read = look.result()[2]
        if not _decided(look.result()):
            state = maps[k].result()[state]
        state = read[state]
        states.append(state)
    return states


def _decided(look: Look) -> bool:
    """Whether a look back tells the state by itself (its map is constant, or it reached
    the file's start)."""
    _, began, read = look
    return began == 0 or read[0] == read[1]


def _after(tasks: Sequence[SourceTask], found: list[int]) -> list[tuple[int, int]]:
    """(the previous range's start, the range) of a file's ranges, in order."""
    order = sorted(found, key=lambda i: tasks[i].start)
    return list(zip([0] + [tasks[i].start for i in order[:-1]], order, strict=True))


def _look(file: SourceTask, before: int, start: int, storage: dict[str, Any],
          options: ReadOptions) -> Look:
    """(the first line start at or after `start`, where the look back from it began, its
    map), the look reaching no further than the previous range's start, `before`."""
    with open_task(file, storage) as raw:
        handle = _from_base(raw, file)
        at = first_line_start(handle, start, PASS_BYTES, options.dialect)
        return (at, *look_back(handle, at, options.dialect, before))


def _segment(file: SourceTask, lo: int, hi: int, storage: dict[str, Any],
             options: ReadOptions) -> Map:
    with open_task(file, storage) as raw:
        return segment_map(_from_base(raw, file), lo, hi, PASS_BYTES, options.dialect)


def _from_base(handle: Any, file: SourceTask) -> Any:
    """`handle` read as the tasks read `file`: from after the lines `skip` names."""
    return Skipped(handle, file.base) if file.base else handle
