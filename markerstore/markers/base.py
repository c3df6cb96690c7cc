"""Marker names, IO types, the WriteMarkers interface, and MARKERS.type.

A marker records that an instant is about to create (or merge into, or append to) one
data file. Its name is Hudi's: ``<partition>/<data file>.marker.<CREATE|MERGE|APPEND>``,
under ``<base>/.markerstore/markers/<instant>/``. Every marker folder holds a
``MARKERS.type`` file naming the mechanism that wrote it and a format version; readers
never guess it.
"""

from __future__ import annotations

import enum
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from markerstore.errors import CorruptTableError, InvalidMarkerError, MarkerTypeError
from markerstore.paths import CONTROL, path_problem
from markerstore.storage import Storage
from markerstore.storage.contain import shown
from markerstore.storage.fs import MAX_LIST_DEPTH
from markerstore.timeline.timeline import META_DIR, is_instant

MARKERS_DIR = f"{META_DIR}/markers"
MARKER_TYPE_FILE = "MARKERS.type"
MARKER_FORMAT_VERSION = 1
MARKER_INFIX = ".marker."

DIRECT = "DIRECT"
BATCHED = "BATCHED"
SEGMENT_RE = re.compile(r"^segment-(\d{1,20})\.(parquet|avro)$")  # a batched segment file
MECHANISMS = (DIRECT, BATCHED)


class IOType(str, enum.Enum):
    """What the write does to the data file: CREATE a new one, MERGE into a new version, or
    APPEND to one that may already hold committed data."""

    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"

    @classmethod
    def of(cls, value: IOType | str) -> IOType:
        if isinstance(value, IOType):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                pass
        raise InvalidMarkerError(
            f"unknown IO type {value!r}; expected one of {', '.join(t.value for t in cls)}")




def validate_partition(partition: str) -> str:
    """A partition path relative to the table: '' or 'a=1/b=2' (the rules of
    :func:`markerstore.paths.path_problem`: never absolute, no '..', ...), at most
    :data:`~markerstore.storage.fs.MAX_LIST_DEPTH` folders deep."""
    if not isinstance(partition, str):
        raise InvalidMarkerError(f"partition must be a string, got {type(partition).__name__}")
    if partition in ("", "."):
        return ""
    cleaned = partition.rstrip("/") if partition.rstrip("/") else partition
    problem = path_problem(cleaned)
    if problem is not None:
        raise InvalidMarkerError(f"partition {partition!r} {problem}")
    levels = cleaned.count("/") + 1
    if levels > MAX_LIST_DEPTH:  # no listing reads it back: refused before any request
        raise InvalidMarkerError(f"partition {shown(cleaned)} is {levels} folders deep; a "
                                 f"table's listings read {MAX_LIST_DEPTH} at most")
    return cleaned


def validate_file_name(file_name: str) -> str:
    """A data file name: one path segment, not '.'/'..', no separator or control character."""
    if not isinstance(file_name, str) or not file_name:
        raise InvalidMarkerError(f"file name must be a non-empty string, got {file_name!r}")
    if "/" in file_name or "\\" in file_name:
        raise InvalidMarkerError(f"file name {file_name!r} contains a path separator; pass the "
                                 "folder as the partition")
    if file_name in (".", "..") or CONTROL.search(file_name):
        raise InvalidMarkerError(f"file name {file_name!r} is '.', '..' or has a control "
                                 "character")
    problem = path_problem(file_name)
    if problem is not None:
        raise InvalidMarkerError(f"file name {file_name!r} {problem}")
    if MARKER_INFIX in file_name:
        raise InvalidMarkerError(f"file name {file_name!r} contains {MARKER_INFIX!r}, "
                                 "which marks marker names")
    if file_name == MARKER_TYPE_FILE:
        raise InvalidMarkerError(f"file name {file_name!r} is reserved")
    return file_name


@dataclass(frozen=True)
class MarkerName:
    """A parsed marker: partition, data file name, IO type."""

    partition: str
    file_name: str
    io_type: IOType

    @classmethod
    def build(cls, partition: str, file_name: str, io_type: IOType | str) -> MarkerName:
        return cls(validate_partition(partition), validate_file_name(file_name),
                   IOType.of(io_type))

    @classmethod
    def parse(cls, name: str) -> MarkerName:
        """Parse ``<partition>/<file>.marker.<IOTYPE>``."""
        head, sep, io = name.rpartition(MARKER_INFIX)
        if not sep:
            raise InvalidMarkerError(f"{name!r} is not a marker name (no {MARKER_INFIX!r})")
        partition, _, file_name = head.rpartition("/")
        return cls.build(partition, file_name, io)

    @cached_property
    def data_path(self) -> str:
        """The data file, relative to the table."""
        return f"{self.partition}/{self.file_name}" if self.partition else self.file_name

    @cached_property
    def name(self) -> str:
        return f"{self.data_path}{MARKER_INFIX}{self.io_type.value}"


# Columns of a marker table, whichever mechanism wrote the markers (see
# schemas/marker_segment.avsc for the batched segment files that hold the same rows).
MARKER_COLUMNS = pa.schema([
    ("partition", pa.string()),
    ("file", pa.string()),
    ("io_type", pa.string()),
    ("task_attempt", pa.string()),
    ("size", pa.int64()),
    ("checksum", pa.string()),
    ("pending_upload", pa.string()),
    ("created_at", pa.timestamp("ms", tz="UTC")),
])


def markers_to_arrow(names: list[MarkerName], details: list[dict[str, Any]] | None = None
                     ) -> pa.Table:
    details = details or [{} for _ in names]
    columns: dict[str, list[Any]] = {field.name: [] for field in MARKER_COLUMNS}
    for marker, extra in zip(names, details):
        columns["partition"].append(marker.partition)
        columns["file"].append(marker.file_name)
        columns["io_type"].append(marker.io_type.value)
        for key in ("task_attempt", "size", "checksum", "created_at"):
            columns[key].append(extra.get(key))
        pending = extra.get("pending_upload")
        columns["pending_upload"].append(
            json.dumps(pending, sort_keys=True) if isinstance(pending, dict) else pending)
    return pa.table(columns, schema=MARKER_COLUMNS)


def marker_items(markers: Iterable[Mapping[str, Any] | Sequence[Any]]
                 ) -> list[tuple[tuple[str, str, IOType | str], dict[str, Any]]]:
    """The items of a ``create_many`` call as ((partition, file, io_type), details)."""
    items: list[tuple[tuple[str, str, IOType | str], dict[str, Any]]] = []
    for item in markers:
        if isinstance(item, Mapping):
            fields = dict(item)
            if "file" not in fields:
                raise InvalidMarkerError(f"a marker needs a 'file': {item!r}")
            args = (fields.pop("partition", ""), fields.pop("file"),
                    fields.pop("io_type", IOType.CREATE))
            items.append((args, fields))
        else:
            if not 2 <= len(item) <= 3:
                raise InvalidMarkerError(f"a marker is (partition, file[, io_type]), got "
                                         f"{item!r}")
            io_type = item[2] if len(item) == 3 else IOType.CREATE
            items.append(((item[0], item[1], io_type), {}))
    return items


class WriteMarkers(ABC):
    """The markers of one instant. Direct and batched markers implement the same calls."""

    mechanism: str = ""

    def __init__(self, instant: str) -> None:
        if not is_instant(instant):
            raise InvalidMarkerError(f"{instant!r} is not an instant id")
        self.instant = instant

    @abstractmethod
    def create(self, partition: str, file_name: str, io_type: IOType | str = IOType.CREATE,
               **details: Any) -> bool:
        """Record the marker; True if it is new, False if it already existed. Returns only
        once the marker is durable. `details` (task_attempt, size, checksum,
        pending_upload) are kept where the mechanism can keep them."""

    def create_many(self, markers: Iterable[Mapping[str, Any] | Sequence[Any]]
                    ) -> list[bool]:
        """Create several markers; one answer per marker, in order, each as :meth:`create`
        would give it. Each item is a dict (partition, file, io_type and details) or a
        tuple (partition, file[, io_type]). A writer that opens several files at once (a
        batch whose rows go to several partitions) asks for all their markers in one
        call; mechanisms make that cheaper than one call each."""
        return [self.create(*args, **details) for args, details in marker_items(markers)]

    def create_if_not_exists(self, partition: str, file_name: str,
                             io_type: IOType | str = IOType.CREATE, **details: Any) -> bool:
        """Same as :meth:`create`: creation is always create-if-absent here."""
        return self.create(partition, file_name, io_type, **details)

    @abstractmethod
    def all(self) -> list[str]:
        """Every marker, as ``<partition>/<file>.marker.<IOTYPE>``, sorted."""

    @abstractmethod
    def exists(self) -> bool:
        """Whether the instant's marker folder exists."""

    @abstractmethod
    def has(self, partition: str, file_name: str, io_type: IOType | str) -> bool:
        """Whether this one marker exists."""

    @abstractmethod
    def delete_all(self) -> bool:
        """Delete every marker of the instant (the whole folder); True if there were any."""

    def created_and_merged_paths(self) -> set[str]:
        """Data files (relative to the table) with a CREATE or MERGE marker."""
        result = set()
        for name in self.all():
            marker = MarkerName.parse(name)
            if marker.io_type in (IOType.CREATE, IOType.MERGE):
                result.add(marker.data_path)
        return result

    def to_arrow(self) -> pa.Table:
        """The markers as an Arrow table with :data:`MARKER_COLUMNS`."""
        return markers_to_arrow([MarkerName.parse(n) for n in self.all()])


def marker_folder(storage: Storage, instant: str) -> str:
    return storage.path(MARKERS_DIR, instant)


def marker_type_payload(mechanism: str) -> bytes:
    return json.dumps({"type": mechanism, "version": MARKER_FORMAT_VERSION}).encode()


def ensure_marker_type(storage: Storage, instant: str, mechanism: str) -> None:
    """Write MARKERS.type for a new marker folder, or check the one that is there."""
    path = f"{marker_folder(storage, instant)}/{MARKER_TYPE_FILE}"
    if storage.create_if_absent(path, marker_type_payload(mechanism)):
        return
    existing = read_marker_type(storage, instant)
    if existing != mechanism:
        raise MarkerTypeError(f"the markers of instant {instant} are {existing}, "
                              f"not {mechanism}; one instant uses one mechanism")


def parse_marker_type(raw: bytes, where: str) -> str:
    """The mechanism named by a MARKERS.type file: JSON ``{"type": ..., "version": n}``
    (a string and an integer from 1 to MARKER_FORMAT_VERSION), or Hudi's bare name."""
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        raise MarkerTypeError(f"{where} is empty; the marker mechanism is unknown, so the "
                              "markers cannot be read safely")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        mechanism, version = payload.get("type"), payload.get("version", 1)
        if not isinstance(mechanism, str):
            raise CorruptTableError(where, f"'type' must be a string, got {mechanism!r:.80}")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise CorruptTableError(where, f"'version' must be a positive integer, got "
                                           f"{version!r:.80}")
        mechanism = mechanism.upper()
    elif payload is None or isinstance(payload, str):
        # Hudi writes the bare name; accept it.
        mechanism, version = text.upper(), 1
        if mechanism == "TIMELINE_SERVER_BASED":
            mechanism = BATCHED
    else:
        raise CorruptTableError(where, f"expected a JSON object or a mechanism name, got "
                                       f"{text[:80]!r}")
    if mechanism not in MECHANISMS:
        raise MarkerTypeError(f"{where} names an unknown marker mechanism {text[:80]!r}; "
                              f"expected one of {', '.join(MECHANISMS)}")
    if version > MARKER_FORMAT_VERSION:
        raise MarkerTypeError(f"{where} has format version {version}; this markerstore reads "
                              f"up to {MARKER_FORMAT_VERSION}")
    return mechanism


def read_marker_type(storage: Storage, instant: str, files: list[str] | None = None, *,
                     untyped: str | None = None) -> str | None:
    """The mechanism of an instant's markers; None when the instant has no marker folder.

    A folder that holds markers but no MARKERS.type, or an empty one, is an error (never a
    guess: guessing is how rollbacks became silent no-ops elsewhere), unless the caller
    knows what such a folder holds (`untyped`: a terminal instant's leftover folder got
    its files after its MARKERS.type went: direct markers of a task that outlived the
    instant, or segments a marker server appended while the instant ended; a folder of
    segments alone reads as batched, any other as `untyped`).
    """
    folder = marker_folder(storage, instant)
    path = f"{folder}/{MARKER_TYPE_FILE}"
    try:
        raw = storage.get(path)
    except FileNotFoundError:
        if files is None:
            files = storage.find(folder)
        if not files:
            return None
        if untyped is not None:
            return _untyped_mechanism(files, untyped)
        raise MarkerTypeError(
            f"{storage.url(path)} is missing but the folder holds {len(files)} file(s); "
            "the marker mechanism is unknown, so the markers cannot be read safely") from None
    except (IsADirectoryError, NotADirectoryError) as exc:  # a folder, or a file above it
        raise MarkerTypeError(f"{storage.url(path)} cannot be read ({exc.strerror}): the "
                              "marker mechanism is unknown") from None
    return parse_marker_type(raw, storage.url(path))


def _untyped_mechanism(files: list[str], untyped: str) -> str:
    names = [f.rsplit("/", 1)[-1] for f in files]
    names = [n for n in names if not n.startswith(".")]
    if names and all(SEGMENT_RE.match(n) for n in names):
        return BATCHED
    return untyped
