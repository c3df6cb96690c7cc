"""What publishing needs of a Delta log, read as the Delta protocol lays the log out, and
kept by this thread from one publish to the next.

A publish needs the log's latest version, its table metadata and protocol, the app
transactions it holds (one per published instant) and the latest version's commit info
(its settled mark): none of the files. Loading the table with delta-rs reads every live
file's ``add`` (and parses its statistics), a cost that grows with the table, and
delta-rs's incremental update rebuilds that state too. So the log is replayed here for
those four only: the last checkpoint's ``metaData``, ``protocol`` and ``txn`` columns
(a classic or multi-part checkpoint), then each later version's JSON file.

A thread keeps the state it read (:data:`KEPT_TABLES` tables) and, the next time, reads
only the versions after it: while the log file of its version is still the one it read
(the same size and modification time, or ETag). A log deleted, rebuilt or rewritten under
it is read afresh. A checkpoint this replay does not read (a V2 checkpoint, with
sidecars) is a :class:`~markerstore.errors.TableFormatError`: the publish reports it.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from markerstore.errors import TableFormatError
from markerstore.storage import Storage

LOG_FOLDER = "_delta_log"
KEPT_TABLES = 16  # tables a thread keeps the state of, the least recently used dropped
_JSON = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_V2_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[^.]+\.(?:json|parquet)$")

_local = threading.local()


@dataclass(frozen=True)
class Metadata:
    """A ``metaData`` action, with the attribute names of delta-rs's ``Metadata``."""

    id: str
    name: str | None
    description: str | None
    schema_string: str
    partition_columns: list[str]
    created_time: int | None
    configuration: dict[str, str]

    @classmethod
    def of(cls, action: Mapping[str, Any]) -> Metadata:
        return cls(str(action["id"]), action.get("name"), action.get("description"),
                   str(action["schemaString"]), list(action.get("partitionColumns") or []),
                   action.get("createdTime"), _mapping(action.get("configuration")))


@dataclass(frozen=True)
class Protocol:
    """A ``protocol`` action, with the attribute names of delta-rs's ``ProtocolVersions``."""

    min_reader_version: int
    min_writer_version: int
    reader_features: list[str] | None
    writer_features: list[str] | None

    @classmethod
    def of(cls, action: Mapping[str, Any]) -> Protocol:
        return cls(int(action["minReaderVersion"]), int(action["minWriterVersion"]),
                   action.get("readerFeatures"), action.get("writerFeatures"))


@dataclass
class LogState:
    """The log as of `version`: what a publish reads of it."""

    version: int
    metadata: Metadata | None = None
    protocol: Protocol | None = None
    txns: dict[str, int] = field(default_factory=dict)  # app id -> its version
    info: dict[str, Any] = field(default_factory=dict)  # `version`'s commit info
    identity: Any = None  # of `version`'s log file (None: not known)
    # the paths (as the log writes them) of the live files, once asked for (None: not)
    files: set[str] | None = None

    def apply(self, version: int, actions: Iterable[Mapping[str, Any]]) -> None:
        """The state after `version`, whose log file holds `actions`."""
        self.info = {}
        for action in actions:
            if "metaData" in action:
                self.metadata = Metadata.of(action["metaData"])
            elif "protocol" in action:
                self.protocol = Protocol.of(action["protocol"])
            elif "txn" in action:
                self.txns[str(action["txn"]["appId"])] = int(action["txn"]["version"])
            elif "commitInfo" in action:
                self.info = dict(action["commitInfo"] or {})
            elif self.files is not None and "add" in action:
                self.files.add(str(action["add"]["path"]))
            elif self.files is not None and "remove" in action:
                self.files.discard(str(action["remove"]["path"]))
        self.version = version

    def schema(self) -> dict[str, Any]:
        """The table's schema (its JSON form)."""
        if self.metadata is None:
            raise TableFormatError(f"the Delta log has no metaData action at version "
                                   f"{self.version}")
        result: dict[str, Any] = json.loads(self.metadata.schema_string)
        return result


def _mapping(value: Any) -> dict[str, str]:
    """A Delta map as JSON holds it (an object) or a checkpoint (key-value pairs)."""
    if not value:
        return {}
    pairs = value.items() if isinstance(value, Mapping) else value
    return {str(k): str(v) for k, v in pairs}


def _kept() -> OrderedDict[str, LogState]:
    kept = getattr(_local, "tables", None)
    if kept is None:
        kept = _local.tables = OrderedDict()
    return kept


def version_file(storage: Storage, version: int) -> str:
    return storage.path(f"{LOG_FOLDER}/{version:020d}.json")


def _identity(storage: Storage, version: int) -> Any:
    """What tells the log file of `version` from another written under the same name
    (None: there is none)."""
    try:
        info = storage.info(version_file(storage, version))
    except FileNotFoundError:
        return None
    stamp = info.get("ETag") or info.get("mtime") or info.get("LastModified")
    return info.get("size"), str(stamp)


def read_version(storage: Storage, version: int) -> list[dict[str, Any]] | None:
    """The actions of one version's log file (None: it does not exist)."""
    path = version_file(storage, version)
    try:
        raw = storage.get(path)
    except FileNotFoundError:
        return None
    try:
        return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    except ValueError as exc:
        raise TableFormatError(f"the Delta log file {storage.url(path)} is not JSON "
                               f"lines: {exc}") from None


def read(storage: Storage) -> LogState | None:
    """The log of the table on `storage` as it is now (None: it has no Delta log): the
    state this thread kept, with the later versions applied, while its version's log file
    is unchanged; else read afresh (and kept)."""
    key = storage.url()
    state = _kept().pop(key, None)
    if state is None or state.identity is None or \
            _identity(storage, state.version) != state.identity:
        state = _fresh(storage)
        if state is None:
            return None
    while (actions := read_version(storage, state.version + 1)) is not None:
        state.apply(state.version + 1, actions)
        state.identity = None
    return remember(storage, state)


def remember(storage: Storage, state: LogState) -> LogState:
    """Keep `state` as this thread's state of the log on `storage`; returns it."""
    if state.identity is None:
        state.identity = _identity(storage, state.version)
    kept = _kept()
    kept[storage.url()] = state
    kept.move_to_end(storage.url())
    while len(kept) > KEPT_TABLES:
        kept.popitem(last=False)
    return state


def forget(storage: Storage) -> None:
    """Drop the state this thread kept of the log on `storage`."""
    _kept().pop(storage.url(), None)


def _fresh(storage: Storage) -> LogState | None:
    """The log read from its last checkpoint on (None: no log)."""
    return _replay(storage)


def _replay(storage: Storage, upto: int | None = None, *, files: bool = False
            ) -> LogState | None:
    """The log replayed from its last checkpoint on, to its latest version or to `upto`
    (None: no log); with `files`, the live files too."""
    names = storage.ls(storage.path(LOG_FOLDER))
    versions = sorted(int(m.group(1)) for n in names if (m := _JSON.match(n))
                      and (upto is None or int(m.group(1)) <= upto))
    checkpoint = _last_checkpoint(names, upto)
    if checkpoint is None and not versions:
        return None
    state = LogState(-1 if checkpoint is None else checkpoint[0],
                     files=set() if files else None)
    if checkpoint is not None:
        _read_checkpoint(storage, state, checkpoint[1])
        if state.version in versions and max(versions) == state.version:
            state.info = _commit_info(read_version(storage, state.version) or [])
    for version in (v for v in versions if v > state.version):
        actions = read_version(storage, version)
        if actions is None or version != state.version + 1:
            raise TableFormatError(f"the Delta log {storage.url(storage.path(LOG_FOLDER))} "
                                   f"lacks version {state.version + 1}")
        state.apply(version, actions)
    return state


def _commit_info(actions: list[dict[str, Any]]) -> dict[str, Any]:
    """The commit info among a version's actions (its settled mark: the latest version's
    is read even where a checkpoint holds the rest of its state)."""
    return next((dict(a["commitInfo"] or {}) for a in actions if "commitInfo" in a), {})


def _last_checkpoint(names: list[str], latest: int | None = None
                     ) -> tuple[int, list[str]] | None:
    """The latest complete checkpoint (its version and part files), at or before
    `latest` where given; None without one."""
    parts: dict[int, dict[int, str]] = {}
    counts: dict[int, int] = {}
    v2 = []
    for name in names:
        if m := _CHECKPOINT.match(name):
            version = int(m.group(1))
            part, count = (int(m.group(2)), int(m.group(3))) if m.group(2) else (1, 1)
            parts.setdefault(version, {})[part] = name
            counts[version] = count
        elif m := _V2_CHECKPOINT.match(name):
            v2.append(int(m.group(1)))
    complete = [v for v, found in parts.items() if len(found) == counts[v]
                and (latest is None or v <= latest)]
    best = max(complete, default=None)
    if v2 and (best is None or max(v2) > best):
        raise TableFormatError(f"the Delta log's checkpoint of version {max(v2)} is a V2 "
                               "checkpoint, which markerstore does not read")
    if best is None:
        return None
    return best, [parts[best][p] for p in sorted(parts[best])]


def _read_checkpoint(storage: Storage, state: LogState, files: list[str]) -> None:
    """The ``metaData``, ``protocol`` and ``txn`` of a checkpoint's part files (and the
    ``add`` where `state` tracks the live files)."""
    import pyarrow.parquet as pq

    for name in files:
        with storage.open_read(storage.path(LOG_FOLDER, name)) as handle:
            parquet = pq.ParquetFile(handle)
            columns = ("metaData", "protocol", "txn", *(("add",) if state.files is not None
                                                         else ()))
            wanted = [c for c in columns if c in parquet.schema_arrow.names]
            rows = parquet.read(columns=wanted).to_pylist()
        for row in rows:
            state.apply(state.version, [{k: v} for k, v in row.items() if v is not None])
    state.info = {}


def live_files(storage: Storage) -> set[str] | None:
    """The paths (as the log writes them) of the files the log's latest version holds
    (None: no Delta log). Read once from the last checkpoint's ``add`` column and the
    versions after it; kept with the state from then on."""
    state = read(storage)
    if state is None:
        return None
    if state.files is None:
        replayed = _replay(storage, state.version, files=True)
        state.files = set() if replayed is None or replayed.files is None else replayed.files
    return set(state.files)

