"""Source files for ingest: list them through fsspec and cut them into tasks (which
:mod:`markerstore.ingest.blocks` reads).

Spark cannot reach every fsspec URL (s3:// needs hadoop-aws), so executors read sources
through fsspec themselves. A task is a whole file, or for a large JSON-lines or CSV file
a byte range; a range starts with the first record that starts at or after its start
(unless it is 0) and ends with the record that crosses its end, so every record is read
exactly once (:mod:`~markerstore.ingest.blocks`, :mod:`~markerstore.ingest.csvranges`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import fsspec

from markerstore.errors import SourceError

FORMATS = ("json", "csv", "parquet")
_EXTENSIONS = {".json": "json", ".jsonl": "json", ".ndjson": "json", ".csv": "csv",
               ".tsv": "csv", ".tab": "csv", ".parquet": "parquet", ".pq": "parquet"}
_TAB_SEPARATED = (".tsv", ".tab")
_COMPRESSED = (".gz", ".bz2", ".zst")
DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class SourceTask:
    """One unit of reading: a file, or a byte range of a line-oriented file. A CSV file read
    with ``skip`` is read from byte `base` on (after its first `base_line` lines): `start`,
    `end` and `size` count from there, and so do the offsets the readers see."""

    url: str
    format: str
    start: int = 0
    end: int | None = None  # None: to the end of the file
    size: int = 0  # bytes to read (stored size for a compressed file): the packing weight
    splittable: bool = False  # whether the file may be read in byte ranges
    base: int = 0  # where the file's text starts (after the lines `skip` names)
    base_line: int = 0  # the lines before `base`
    # A CSV range: whether its first line start lies inside a quoted field, as the driver
    # found it (markerstore.ingest.quotestates); None: the range finds it itself.
    quoted: bool | None = None

    @property
    def whole_file(self) -> bool:
        return self.start == 0 and self.end is None


def _stem(path: str) -> str:
    """`path` in lower case without a compression suffix."""
    lower = path.lower()
    for suffix in _COMPRESSED:
        if lower.endswith(suffix):
            return lower[: -len(suffix)]
    return lower


def detect_format(path: str) -> str | None:
    lower = _stem(path)
    for extension, fmt in _EXTENSIONS.items():
        if lower.endswith(extension):
            return fmt
    return None


def list_tasks(source: str, storage_options: dict[str, Any] | None = None,
               fmt: str | None = None, split_bytes: int = DEFAULT_SPLIT_BYTES,
               json_documents: bool = False, whole_files: bool = False
               ) -> list[SourceTask]:
    """The read tasks of a source: a file, a folder (recursively), or a glob. With
    `json_documents` (Spark's multiLine) a JSON file is one document, read whole; with
    `whole_files` (a UTF-16 source) every file is read whole."""
    if fmt is not None and fmt not in FORMATS:
        raise SourceError(f"unknown source format {fmt!r}; expected one of {', '.join(FORMATS)}")
    fs, root = fsspec.core.url_to_fs(source, **(storage_options or {}))
    # The listing carries each file's size: no lookup per file, whatever the filesystem's
    # listing cache does.
    if any(ch in root for ch in "*?["):
        found = fs.glob(root, detail=True)
        infos = [found[p] for p in sorted(found)]
    elif not fs.exists(root):
        raise SourceError(f"source {source} does not exist")
    elif fs.isdir(root):
        found = fs.find(root, detail=True)
        infos = [found[p] for p in sorted(found)]
    else:
        infos = [fs.info(root)]
    tasks = []
    for info in infos:
        path = info["name"]
        name = path.rsplit("/", 1)[-1]
        if name.startswith((".", "_")) or info.get("type") == "directory":
            continue  # hidden files, _SUCCESS, folders
        file_format = fmt or detect_format(path)
        if file_format is None:
            continue
        url = fs.unstrip_protocol(path)
        size = int(info.get("size") or 0)
        compressed = path.lower().endswith(_COMPRESSED)
        # A CSV range finds its first record by looking back (ingest.csvranges).
        whole = (file_format == "parquet" or (json_documents and file_format == "json")
                 or whole_files)
        if whole or compressed:
            tasks.append(SourceTask(url, file_format, size=size))
        elif size <= split_bytes:
            tasks.append(SourceTask(url, file_format, size=size, splittable=True))
        else:
            tasks += _ranges(SourceTask(url, file_format, splittable=True), size, split_bytes)
    if not tasks:
        raise SourceError(f"source {source} holds no JSON, CSV or Parquet file"
                          + ("" if fmt else " (pass the format if the names have no extension)"))
    return tasks


def _ranges(file: SourceTask, size: int, split_bytes: int, least: int = 0
            ) -> list[SourceTask]:
    """The byte ranges of `file` (`size` bytes): of `split_bytes` each, the last one to the
    file's end; with `least`, as many ranges of equal size as make them at most
    `split_bytes` and at least `least` (one, for a file under `least`)."""
    count = -(-size // split_bytes)
    if least:
        count = max(1, min(count, size // least))
        split_bytes = -(-size // count)
    ranges = []
    for start in range(0, size, max(1, split_bytes)):
        end = min(start + split_bytes, size)
        ranges.append(replace(file, start=start, end=None if end == size else end,
                              size=end - start))
    return ranges or [replace(file, size=0)]


def recut(tasks: Sequence[SourceTask], split_bytes: int, least: int = 0
          ) -> list[SourceTask]:
    """`tasks` with each file that may be read in byte ranges (a JSON-lines or CSV file,
    not compressed) cut into ranges of `split_bytes` instead (with `least`, ranges of
    equal size no smaller than it, :func:`_ranges`); other files kept whole, in the same
    order."""
    sizes: dict[str, int] = {}
    for task in tasks:
        if task.splittable:
            sizes[task.url] = sizes.get(task.url, 0) + task.size
    out: list[SourceTask] = []
    for task in tasks:
        if not task.splittable:
            out.append(task)
        elif task.start == 0:
            out += _ranges(replace(task, start=0, end=None), sizes[task.url], split_bytes,
                           least)
    return out


def implied_separator(tasks: Sequence[SourceTask]) -> str | None:
    """The CSV separator the file names imply: a tab when every CSV file is named .tsv or
    .tab, none when none is; a source that mixes both cannot say (SourceError)."""
    names = [_stem(t.url) for t in tasks if t.format == "csv"]
    tabbed = [n.endswith(_TAB_SEPARATED) for n in names]
    if any(tabbed) and not all(tabbed):
        raise SourceError("the source mixes tab-separated (.tsv, .tab) and other CSV files: "
                          "ingest them apart, or give the separator (--option sep=...)")
    return "\t" if names and all(tabbed) else None


def pack(tasks: Sequence[SourceTask], cores: int, task_bytes: int) -> list[list[int]]:
    """The source splits (indices into `tasks`) of each Spark task: as few tasks as
    `task_bytes` allows, in whole waves of `cores` tasks, at most one per split; splits go
    largest first to the task holding the fewest bytes, and each task reads its splits in
    listing order. A task costs a fixed ~0.1 s (a Python worker's round trip, its files'
    close), so 8 small files on 2 cores run as 2 tasks, not 8."""
    total = sum(t.size for t in tasks)
    waves = max(1, -(-total // max(1, cores * task_bytes)))
    count = max(1, min(len(tasks), max(1, cores) * waves))
    bins: list[list[int]] = [[] for _ in range(count)]
    # A heap of (bytes, splits, task): the fewest splits break a tie, so no task is empty.
    loads = [(0, 0, b) for b in range(count)]
    for i in sorted(range(len(tasks)), key=lambda i: -tasks[i].size):
        load, held, least = heapq.heappop(loads)
        bins[least].append(i)
        heapq.heappush(loads, (load + tasks[i].size, held + 1, least))
    return [sorted(b) for b in bins]
