"""`Table`: the Python API over one table's storage, timeline and markers."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.datafiles import ArrowPaths, DataFile, arrow_paths, data_file
from markerstore.errors import (
    CommitConflictError,
    ConfigError,
    HeartbeatAliveError,
    InstantCompletedError,
    MarkerStoreError,
    ReconcileError,
    TimelineError,
)
from markerstore.markers import (
    MARKERS_DIR,
    DirectWriteMarkers,
    ReconcileResult,
    RollbackResult,
    WriteMarkers,
    clean_markers_of,
    read_marker_rows,
    reconcile,
    rollback_from_markers,
)
from markerstore.snapshot import Snapshot
from markerstore.storage import Storage
from markerstore.tablefile import parse_table_file, parse_table_formats
from markerstore.timeline import (
    COMPLETED,
    INFLIGHT,
    META_DIR,
    REQUESTED,
    ROLLEDBACK,
    Heartbeats,
    HeartbeatThread,
    InstantInfo,
    Timeline,
    identity,
    is_instant,
    parse_instant,
)

log = logging.getLogger(__name__)

# The table's identity: its stable id, written by its first write.
TABLE_FILE = f"{META_DIR}/table.json"
REPR_COMMITS = 120  # commits charted in a notebook

# Keys of the commit metadata that markerstore writes; user metadata may not set them.
RESERVED_METADATA = frozenset({
    "instant", "state", "name", "committer", "timestamp", "date", "hostname", "jobId",
    "write_uuid", "filenames", "files", "counts", "metrics", "diagnostics", "operation",
    "partitions",
})

class Table:
    """One table: a base path (any fsspec URL) with its `.markerstore` folder.

    >>> table = Table("memory://warehouse/events")
    >>> instant = table.start_commit()
    >>> markers = table.markers(instant)
    >>> markers.create("day=1", "f1.parquet", "CREATE")
    True
    """

    def __init__(self, path: str, storage_options: Mapping[str, Any] | None = None,
                 options: Mapping[str, Any] | config.Settings | None = None) -> None:
        self.settings = config.resolve(options)
        self.storage = Storage(
            path, storage_options,
            retries=self.settings[config.STORAGE_RETRIES],
            retry_base_delay=self.settings[config.STORAGE_RETRY_BASE_DELAY_MS] / 1000)
        self.path = path
        self._timeline = Timeline(self.storage)
        self.heartbeats = Heartbeats(self.storage,
                                     self.settings[config.HEARTBEAT_INTERVAL_MS],
                                     self.settings[config.HEARTBEAT_TOLERABLE_MISSES],
                                     self.settings[config.HEARTBEAT_MAX_CLOCK_SKEW_MS])
        self._beating: dict[str, HeartbeatThread] = {}
        self._table_id: str | None = None
        self._formats: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Table({self.storage.url()!r})"

    def _repr_html_(self) -> str:
        """The table in a notebook: its instants by state, and the charts of its newest
        commits (rows, error records by reason, error rate, duration, files cleaned)."""
        from markerstore.render import figures
        from markerstore.render.charts import charts_html
        from markerstore.render.html import fields_html

        instants = self.timeline()
        states: dict[str, int] = {}
        for info in instants:
            states[info.state] = states.get(info.state, 0) + 1
        newest = [i.instant for i in instants if i.state == COMPLETED][-REPR_COMMITS:]
        points = [figures.commit_point(i, self.commit_metadata(i)) for i in newest]
        fields = [("path", self.storage.url()),
                  ("instants", ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                   or "none"),
                  ("charts", f"the newest {len(points)} completed commit(s)")]
        return fields_html(fields, caption="markerstore table") + charts_html(
            figures.commit_charts(points), unique=True)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its path, storage options and settings: heartbeat threads stay with
        the process that started them (see :meth:`hand_over_heartbeat`)."""
        return (Table, (self.path, self.storage.storage_options, self.settings))

    @property
    def parallelism(self) -> int:
        return int(self.settings[config.MARKERS_DELETE_PARALLELISM])

    # --- identity -----------------------------------------------------------------------
    def table_id(self, *, create: bool = False) -> str | None:
        """The table's stable id (``.markerstore/table.json``), kept when the table's folder
        is copied or moved; error tables record it to know their owner's rows. None for a
        table that has none yet (created before ids existed, and not written since); with
        `create`, a table without one adopts a new one (the first write does), recording
        the table formats this Table's settings name (``markerstore.table.formats``)."""
        file = self._table_file(create=create)
        return None if file is None else str(file["table_id"])

    def _table_file(self, *, create: bool = False) -> dict[str, Any] | None:
        if self._table_id is None:
            path = self.storage.path(TABLE_FILE)
            try:
                raw = self.storage.get(path)
            except FileNotFoundError:
                if not create:
                    return None
                payload: dict[str, Any] = {
                    "table_id": str(uuid.uuid4()),
                    "created_at": datetime.now(timezone.utc).isoformat()}
                formats = self.settings[config.TABLE_FORMATS]
                if formats:
                    payload["formats"] = list(formats)
                raw = json.dumps(payload).encode()
                if not self.storage.create_if_absent(path, raw):
                    raw = self.storage.get(path)  # another writer created it first
            where = self.storage.url(path)
            self._table_id = parse_table_file(raw, where)
            self._formats = parse_table_formats(raw, where)
        return {"table_id": self._table_id, "formats": self._formats}

    def formats(self, *, create: bool = False) -> tuple[str, ...]:
        """The table formats this table publishes (Delta, Iceberg), as recorded when the
        table was created; () for none. A ConfigError when this Table's settings name
        other formats than the table recorded (formats are set when a table is
        created)."""
        file = self._table_file(create=create)
        recorded: tuple[str, ...] = () if file is None else tuple(file["formats"])
        if config.TABLE_FORMATS in self.settings.explicit():
            given = tuple(self.settings[config.TABLE_FORMATS])
            if file is None:
                return given
            if given != recorded:
                raise ConfigError(
                    f"{config.TABLE_FORMATS}={','.join(given) or 'none'} but table "
                    f"{self.storage.url()} was created with "
                    f"{','.join(recorded) or 'none'}; formats are set when a table is "
                    "created")
        return recorded

    # --- instants ------------------------------------------------------------------------
    def start_commit(self, write_uuid: str | None = None, operation: str = "write",
                     *, rollback_failed: bool = True, heartbeat: bool = True,
                     extra: Mapping[str, Any] | None = None) -> str:
        """Start a write: roll back failed writes (per the failed-writes policy), create a
        new inflight instant and start its heartbeat. Returns the instant id. `extra` is
        recorded with the requested instant (see :meth:`requested_info`)."""
        if rollback_failed:
            self.rollback_failed()
        write_uuid = write_uuid or self.settings[config.WRITE_UUID] or str(uuid.uuid4())
        self.formats(create=True)  # creates the table's identity; refuses other formats
        instant = self._timeline.create(write_uuid, operation, dict(extra or {}))
        if heartbeat:
            self._beating[instant] = self.heartbeats.start(instant)
        log.info("%s: started instant %s (write %s)", self, instant, write_uuid)
        return instant

    def hand_over_heartbeat(self, instant: str) -> None:
        """Stop this process's heartbeat thread of `instant` without deleting the beat:
        another process (one that outlives this one) beats for the instant from now on."""
        thread = self._beating.pop(instant, None)
        if thread is not None:
            thread.stop(delete=False)

    def timeline(self) -> list[InstantInfo]:
        """Every instant with its state, oldest first."""
        return self._timeline.instants()

    def pinned_timeline(self) -> AbstractContextManager[None]:
        """``with table.pinned_timeline():`` lists the timeline once for the whole block:
        every read of this Table sees the same instants (one consistent view for a report
        or an audit, and one LIST instead of one per read). A commit or rollback made
        through this Table inside the block lists afresh."""
        return self._timeline.pinned()

    def state(self, instant: str) -> str:
        return self._timeline.state(instant)

    def requested_info(self, instant: str) -> dict[str, Any]:
        """What start_commit recorded: write_uuid, operation, requested_at and `extra`."""
        return self._timeline.requested_info(instant)

    def write_uuid(self, instant: str) -> str | None:
        value = self._timeline.requested_info(instant).get("write_uuid")
        return str(value) if value else None

    def commit_metadata(self, instant: str) -> dict[str, Any]:
        return self._timeline.commit_metadata(instant)

    def completed(self) -> list[tuple[str, dict[str, Any]]]:
        """Every completed instant with its commit metadata, oldest first."""
        return self._timeline.completed()

    def is_fenced(self, instant: str) -> bool:
        """Whether a rollback of `instant` has begun (no commit of it can complete)."""
        return self._timeline.is_fenced(instant)

    def commit_url(self, instant: str) -> str:
        """The URL of the completed instant's file (names it in errors)."""
        return self._timeline.commit_url(instant)

    # --- markers -------------------------------------------------------------------------
    def markers(self, instant: str, type: str = "direct") -> WriteMarkers:
        """The direct markers of an inflight instant. Batched markers come from the marker
        server: ``markerstore.server.open_markers(table, instant, type="batched", url=...)``
        (or ``MarkerClient(url, instant, table=table)``)."""
        mechanism = config.OPTIONS[config.MARKERS_TYPE].parse(type)
        if mechanism != "direct":
            raise ConfigError(f"Table.markers gives direct markers; {type!r} markers come "
                              "from markerstore.server.open_markers(table, instant, type=..., "
                              "url=...)")
        self.check_inflight(instant, "markers are only created for")
        return DirectWriteMarkers(self.storage, instant)

    def check_inflight(self, instant: str, why: str) -> None:
        """TimelineError unless `instant` is requested or inflight (`why` ends the
        message: "... only <why> an inflight instant")."""
        state = self._timeline.state(instant)
        if state not in (REQUESTED, INFLIGHT):
            raise TimelineError(f"instant {instant} is {state}; {why} an inflight instant")

    def reconcile(self, instant: str,
                  committed_files: Iterable[str | DataFile | Mapping[str, Any]] | ArrowPaths
                  ) -> ReconcileResult:
        """Delete data files of `instant` that have a CREATE/MERGE marker but are not among
        `committed_files` (the winning tasks' files). They may be given as Arrow (an
        array of paths, or a table with a ``path`` column): checked vectorized by the same
        rules, and anti-joined in DuckDB with no Python object per file."""
        if isinstance(committed_files, (pa.Array, pa.ChunkedArray, pa.Table)):
            paths: Iterable[str] | pa.Array = arrow_paths(self.storage, committed_files)
        else:
            paths = [data_file(self.storage, f).path for f in committed_files]
        return reconcile(self.storage, self._timeline, instant, paths,
                         parallelism=self.parallelism)

    # --- commit ---------------------------------------------------------------------------
    def commit(self, instant: str, files: Iterable[str | DataFile | Mapping[str, Any]],
               metadata: Mapping[str, Any] | None = None, *,
               reconciled: ReconcileResult | None = None) -> dict[str, Any]:
        """Complete `instant` with exactly `files`: reconcile, then write the completed
        instant atomically, then delete the markers. Returns the commit metadata.

        `reconciled`: the caller's own reconcile of this instant against exactly `files`,
        made when no marker could be added any more (batched markers sealed by the
        marker server, or an instant whose tasks have all finished); it is not repeated."""
        started = time.time()
        state = self._timeline.state(instant)
        if state not in (REQUESTED, INFLIGHT):
            raise CommitConflictError(f"instant {instant} is {state}; only an inflight instant "
                                      "can be committed")
        extra = dict(metadata or {})
        clash = RESERVED_METADATA & set(extra)
        if clash:
            raise ValueError(f"metadata keys {sorted(clash)} are written by markerstore")
        entries = [data_file(self.storage, f) for f in files]
        try:
            if reconciled is not None and reconciled.instant == instant:
                recon = reconciled
            else:
                recon = self.reconcile(instant, [e.path for e in entries])
            entries = self._fill_sizes(entries)
        except (MarkerStoreError, FileNotFoundError) as exc:
            if self._timeline.is_fenced(instant):
                raise CommitConflictError(
                    f"instant {instant} was rolled back while committing") from exc
            if isinstance(exc, FileNotFoundError):
                raise ReconcileError(f"a committed file of instant {instant} does not exist: "
                                     f"{exc}") from exc
            raise
        requested = self._timeline.requested_info(instant)
        write_uuid = requested.get("write_uuid")
        now = datetime.now(timezone.utc)
        rows = [e.rows for e in entries]
        payload: dict[str, Any] = {
            # Names shared with Hadoop's _SUCCESS JSON:
            "name": "markerstore.commit", "committer": "markerstore",
            "timestamp": int(now.timestamp() * 1000), "date": now.isoformat(),
            "hostname": socket.gethostname(), "jobId": write_uuid,
            "filenames": [e.path for e in entries[:100]],
            "metrics": {"markers": recon.markers, "files_cleaned": recon.files_cleaned,
                        "commit_seconds": None},
            "diagnostics": {"pid": os.getpid()},
            # markerstore's own:
            "write_uuid": write_uuid,
            "operation": requested.get("operation", "write"),
            "files": [{k: v for k, v in asdict(e).items() if v is not None} for e in entries],
            "partitions": sorted({e.partition for e in entries}),
            "counts": {"files": len(entries), "bytes": sum(e.size or 0 for e in entries),
                       "rows": sum(rows) if all(r is not None for r in rows) else None,
                       "files_cleaned": recon.files_cleaned},
            **extra,
        }
        payload["metrics"]["commit_seconds"] = round(time.time() - started, 3)
        self._timeline.complete(instant, payload)
        self.finish(instant)
        return self._timeline.commit_metadata(instant)

    def _fill_sizes(self, entries: list[DataFile]) -> list[DataFile]:
        missing = [e for e in entries if e.size is None]
        if not missing:
            return entries
        with ThreadPoolExecutor(max_workers=min(16, len(missing))) as pool:
            sizes = dict(zip([e.path for e in missing], pool.map(
                lambda e: int(self.storage.info(self.storage.path(e.path))["size"]), missing)))
        return [DataFile(e.path, sizes.get(e.path, e.size), e.rows, e.checksum)
                for e in entries]

    def finish(self, instant: str) -> None:
        """After the terminal state is written: markers and heartbeat go. Failures here are
        logged, not raised: the commit stands, and the next write cleans up."""
        thread = self._beating.pop(instant, None)
        try:
            self.storage.delete_dir(self.storage.path(MARKERS_DIR, instant), self.parallelism)
        except Exception as exc:
            log.warning("instant %s: could not delete its markers (%s); the next write will",
                        instant, exc)
        try:
            if thread is not None:
                thread.stop(delete=True)
            else:
                self.heartbeats.delete(instant)
        except Exception as exc:
            log.warning("instant %s: could not delete its heartbeat: %s", instant, exc)

    # --- rollback -------------------------------------------------------------------------
    def writer_alive(self, instant: str) -> bool:
        """Whether the writer of an inflight instant looks alive: its heartbeat is fresh
        and, when it ran in this boot and PID namespace (not merely on a host of the same
        name), its process still exists (:mod:`markerstore.timeline.identity`)."""
        if instant in self._beating:
            return True
        beat = self.heartbeats.read(instant)
        if beat is None:
            # A writer creates its instant, then beats: a young instant without a beat yet
            # is starting, not dead.
            return self._young(instant)
        if self.heartbeats.expired(beat, instant):
            return False
        return identity.writer_alive(beat) is not False  # None: the beat alone decides

    def _young(self, instant: str) -> bool:
        """Whether the instant was created less than a heartbeat expiry ago (one dated
        further in the future than the allowed clock skew is not: it is suspect)."""
        created = parse_instant(instant)
        age_ms = (datetime.now(timezone.utc) - created).total_seconds() * 1000
        if -age_ms > self.heartbeats.max_clock_skew_ms:
            self.heartbeats.say_future(instant, int(created.timestamp() * 1000), -age_ms,
                                       "the instant id")
            return False
        return age_ms < self.heartbeats.expiry_ms

    def can_roll_back(self, instant: str, *, force: bool = False) -> bool:
        """False for an instant already rolled back (a rollback is then a no-op);
        InstantCompletedError for a completed one; HeartbeatAliveError for an inflight one
        whose writer is alive, unless `force`. True otherwise."""
        state = self._timeline.state(instant)
        if state == ROLLEDBACK:
            return False
        if state == COMPLETED:
            raise InstantCompletedError(
                f"instant {instant} is completed; completed commits are never rolled back")
        if not force and self.writer_alive(instant):
            raise HeartbeatAliveError(
                f"instant {instant} is inflight and its writer is alive (heartbeat within "
                f"{self.heartbeats.expiry_ms} ms); stop it first, or force the rollback")
        return True

    def fence(self, instant: str) -> None:
        """Fence `instant` before anything of it is deleted: no commit of it can complete
        after this. InstantCompletedError if it completed first. Idempotent."""
        self._timeline.claim_rollback(instant)

    def marker_rows(self, instant: str, *, pending_only: bool = False) -> pa.Table | None:
        """The instant's marker rows (MARKER_COLUMNS, any mechanism), or None when it has
        no marker folder; `pending_only`: only those that record a pending upload."""
        return read_marker_rows(self.storage, instant, pending_only=pending_only)

    def rollback(self, instant: str | None = None, *, force: bool = False,
                 cleanup: Mapping[str, Any] | None = None
                 ) -> RollbackResult | list[RollbackResult]:
        """Roll back one failed instant from its markers and the timeline alone: fence it,
        delete every file its markers name, delete the markers, record the rollback. With
        no instant, every failed one (see :meth:`rollback_failed`). Idempotent: a second
        rollback is a no-op. Refuses a completed instant, and an inflight one whose writer
        is alive unless `force`. `cleanup` (what the caller's recovery did first: aborted
        uploads, a linked error instant) is kept in the rollback record.

        This is the core's rollback: nothing else runs. The commit protocol's recovery
        (roll forward, uploads, staging, error tables) is ``markerstore.commit.recover``
        and ``markerstore.commit.rollback``."""
        if instant is None:
            return self.rollback_failed("eager" if force else "lazy")
        if not self.can_roll_back(instant, force=force):
            return RollbackResult(instant, noop=True)
        self.fence(instant)
        result = rollback_from_markers(self.storage, self._timeline, instant,
                                       parallelism=self.parallelism, cleanup=cleanup)
        self.finish(instant)
        log.info("%s: rolled back %s, %d file(s) deleted", self, instant,
                 len(result.deleted))
        return result

    def abort(self, instant: str) -> RollbackResult:
        """Abort this process's own write: roll it back now. Idempotent."""
        result = self.rollback(instant, force=True)
        assert isinstance(result, RollbackResult)
        return result

    def failed_instants(self, policy: str | None = None) -> list[str]:
        """Inflight instants whose writer failed, per the failed-writes policy: eager (the
        writer is not alive: no fresh heartbeat, or its process on this host is gone),
        lazy (the heartbeat expired), never (none)."""
        policy = policy or self.settings[config.FAILED_WRITES_POLICY]
        if policy == "never":
            return []
        result = []
        for info in self._timeline.instants():
            if info.state not in (REQUESTED, INFLIGHT) or info.instant in self._beating:
                continue
            if policy == "lazy":
                beat = self.heartbeats.read(info.instant)
                if (self.heartbeats.expired(beat, info.instant) if beat is not None
                        else not self._young(info.instant)):
                    result.append(info.instant)
            elif policy == "eager":
                if not self.writer_alive(info.instant):
                    result.append(info.instant)
            else:
                raise ValueError(f"unknown failed-writes policy {policy!r}")
        return result

    def rollback_failed(self, policy: str | None = None) -> list[RollbackResult]:
        """Roll back every failed inflight instant (see :meth:`failed_instants`) with the
        core's rollback, and delete the leftover marker folders of terminal instants. A
        table written by the commit protocol is recovered with
        ``markerstore.commit.recover`` instead (it calls this one's parts)."""
        results = []
        for instant in self.failed_instants(policy):
            result = self.rollback(instant, force=True)
            assert isinstance(result, RollbackResult)
            results.append(result)
        self.clean_markers()
        return results

    def clean_markers(self) -> list[str]:
        """Delete marker folders of instants that are no longer inflight (a writer that
        died after completing leaves them), each after the files its markers name that
        no commit references (see :meth:`clean_markers_of`). Never touches an inflight
        instant's markers."""
        folder = self.storage.path(MARKERS_DIR)
        names = [n for n in self.storage.ls(folder) if is_instant(n)]
        if not names:
            return []
        states = {i.instant: i.state for i in self._timeline.instants()}
        done = [n for n in names if states.get(n) in (COMPLETED, ROLLEDBACK)]
        for name in done:
            self.clean_markers_of(name)
        return done

    def clean_markers_of(self, instant: str) -> list[str]:
        """Delete the marker folder a terminal instant left, after the files its markers
        name that no completed commit references (a task that outlived the instant may
        have added a marker and its file): the deletes of its rollback, run again.
        Returns the files deleted."""
        deleted = clean_markers_of(self.storage, self._timeline, instant,
                                   parallelism=self.parallelism)
        return list(deleted.to_pylist())

    # --- queries ---------------------------------------------------------------------------
    def snapshot(self, as_of: str | None = None) -> Snapshot:
        """The committed data files as of the latest completed instant (or `as_of`), from
        the timeline alone: never an inflight write's file, never both sides of a replace.
        ``.paths``/``.urls``, ``.dataset()`` (pyarrow) and ``.duckdb()`` read it."""
        return Snapshot.of(self.storage, self._timeline.completed(), as_of)

    def storage_requests(self) -> dict[str, int]:
        """Storage requests made through this table so far, by kind, with a total."""
        return self.storage.requests()

    def reset_storage_requests(self) -> None:
        self.storage.reset_requests()
