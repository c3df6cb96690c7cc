"""The timeline: instants and their states, as files under ``<base>/.markerstore/timeline/``.

    <instant>.commit.requested   JSON: write UUID, operation, when           (state requested)
    <instant>.inflight           JSON: host, pid, when                       (state inflight)
    <instant>.commit             JSON: the commit metadata                   (state completed)
    <instant>.rollback.requested JSON: a rollback is about to fence the instant
    <instant>.rollback           JSON: what the rollback deleted             (state rolledback)

Both terminal states go through one arbiter: ``<instant>.commit`` is created with
create-if-absent. A commit writes its metadata there; a rollback first writes a tombstone
there (``{"state": "rolledback"}``), announced beforehand by ``.rollback.requested``
so that listing alone classifies every other instant, and only then deletes anything. So
of a commit and a rollback of the same instant, or of two commits, exactly one wins. An
instant fenced by a tombstone whose rollback has not written ``.rollback`` yet is still
reported inflight, so recovery finishes its rollback.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from markerstore.errors import (
    CommitConflictError,
    CorruptTableError,
    InstantCompletedError,
    InstantNotFoundError,
    TimelineError,
)
from markerstore.paths import META_SEGMENT
from markerstore.storage import Storage
from markerstore.timeline.checks import (
    COMPLETED_STATE,
    TOMBSTONE_STATE,
    check_commit,
    check_rollback_record,
)
from markerstore.timeline.identity import writer_identity

META_DIR = META_SEGMENT
TIMELINE_DIR = f"{META_DIR}/timeline"

REQUESTED = "requested"
INFLIGHT = "inflight"
COMPLETED = COMPLETED_STATE
ROLLEDBACK = TOMBSTONE_STATE  # a rolled-back instant's record is its tombstone
STATES = (REQUESTED, INFLIGHT, COMPLETED, ROLLEDBACK)

_SUFFIX_STATE = {
    ".commit.requested": REQUESTED,
    ".inflight": INFLIGHT,
    ".commit": COMPLETED,
    ".rollback": ROLLEDBACK,
}
_FENCE = ".rollback.requested"
_ORDER = {REQUESTED: 0, INFLIGHT: 1, COMPLETED: 2, ROLLEDBACK: 3}
INSTANT_LENGTH = 17

_instant_lock = threading.Lock()
_last_instant = ""


def format_instant(when: datetime) -> str:
    """`yyyyMMddHHmmssSSS` in UTC."""
    when = when.astimezone(timezone.utc)
    return when.strftime("%Y%m%d%H%M%S") + f"{when.microsecond // 1000:03d}"


def parse_instant(instant: str) -> datetime:
    """The UTC time of an instant id; ValueError if it is not one."""
    if not is_instant(instant):
        raise ValueError(f"not an instant id (yyyyMMddHHmmssSSS): {instant!r}")
    base = datetime.strptime(instant[:14], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    return base.replace(microsecond=int(instant[14:]) * 1000)


@functools.lru_cache(maxsize=1 << 16)  # every listing of the timeline asks it of every name
def is_instant(text: str) -> bool:
    """Whether `text` is an instant id: 17 ASCII digits that make a date and time (a name
    such as 99999999999999999 is a stray file, not an instant)."""
    if len(text) != INSTANT_LENGTH or not (text.isascii() and text.isdigit()):
        return False
    try:
        datetime(int(text[:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]),
                 int(text[10:12]), int(text[12:14]))
    except ValueError:
        return False
    return True


def _bump(instant: str) -> str:
    return format_instant(parse_instant(instant) + timedelta(milliseconds=1))


def next_instant_candidate() -> str:
    """A new instant id, strictly greater than any this process handed out before."""
    global _last_instant
    with _instant_lock:
        candidate = format_instant(datetime.now(timezone.utc))
        if candidate <= _last_instant:
            candidate = _bump(_last_instant)
        _last_instant = candidate
        return candidate


@dataclass(frozen=True)
class InstantInfo:
    """One instant on the timeline and its current state."""

    instant: str
    state: str
    files: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"instant": self.instant, "state": self.state,
                "time": parse_instant(self.instant).isoformat()}


def _dumps(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, indent=1, sort_keys=True, default=str).encode()


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class Timeline:
    """The instants of one table."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.folder = storage.path(TIMELINE_DIR)
        self._metadata_cache: dict[str, dict[str, Any]] = {}
        self._pin = _Pin()  # per thread: another thread's reads are never pinned by it
        self._listing = _Listing()

    def _file(self, instant: str, suffix: str) -> str:
        return f"{self.folder}/{instant}{suffix}"

    # --- reading -----------------------------------------------------------------------
    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Within the block the timeline is listed once: every read through this object
        sees the same instants (a report's one consistent view, and one LIST instead of
        one per view). A transition made through this object lists afresh. The pin is
        the calling thread's: other threads list as they would."""
        pin = self._pin
        pin.pins += 1
        try:
            yield
        finally:
            pin.pins -= 1
            if not pin.pins:
                pin.pinned = None

    def instants(self) -> list[InstantInfo]:
        """Every instant and its state, oldest first (one LIST, plus one GET per completed
        instant not seen before; none within :meth:`pinned` after the first)."""
        pin = self._pin
        if pin.pinned is not None:
            return list(pin.pinned)
        result = self._list_instants()
        if pin.pins:
            pin.pinned = result
        return list(result)

    def _list_instants(self) -> list[InstantInfo]:
        return self._listing.parse(self.storage.ls(self.folder), self._is_tombstone)

    def state(self, instant: str) -> str:
        """The state of one instant; InstantNotFoundError if the timeline has no such one."""
        if not is_instant(instant):
            raise InstantNotFoundError(
                f"{instant!r} is not an instant id (17 digits, yyyyMMddHHmmssSSS)")
        for info in self.instants():
            if info.instant == instant:
                return info.state
        raise InstantNotFoundError(f"no instant {instant} on the timeline of {self.storage.url()}")

    def _read_commit_file(self, instant: str) -> dict[str, Any] | None:
        cached = self._metadata_cache.get(instant)
        if cached is not None:
            return cached
        try:
            raw = self.storage.get(self._file(instant, ".commit"))
        except FileNotFoundError:
            return None
        where = self.storage.url(self._file(instant, ".commit"))
        try:
            decoded = json.loads(raw)
        except ValueError as exc:  # UnicodeDecodeError and RecursionError too
            raise CorruptTableError(where, f"the commit metadata is not JSON: {exc}") from None
        except RecursionError:
            raise CorruptTableError(where, "the commit metadata is nested too deeply") from None
        payload = check_commit(decoded, instant, where)
        self._metadata_cache[instant] = payload  # completed files never change
        return payload

    def _is_tombstone(self, instant: str) -> bool:
        try:
            payload = self._read_commit_file(instant)
        except CorruptTableError:
            return False  # listed as completed; reading its metadata says it is corrupt
        return payload is not None and payload.get("state") == TOMBSTONE_STATE

    def is_fenced(self, instant: str) -> bool:
        """Whether a rollback has fenced the instant (read fresh from storage)."""
        cached = self._metadata_cache.get(instant)
        if cached is not None and cached.get("state") != TOMBSTONE_STATE:
            return False
        self._metadata_cache.pop(instant, None)
        return self._is_tombstone(instant)

    def commit_url(self, instant: str) -> str:
        """Where the metadata of `instant` lives (to name it in an error)."""
        return self.storage.url(self._file(instant, ".commit"))

    def commit_metadata(self, instant: str) -> dict[str, Any]:
        """The metadata of a completed instant."""
        payload = self._read_commit_file(instant)
        if payload is None or payload.get("state") == TOMBSTONE_STATE:
            raise InstantNotFoundError(f"instant {instant} is not a completed commit")
        return payload

    def completed(self) -> list[tuple[str, dict[str, Any]]]:
        """(instant, metadata) of every completed commit, oldest first."""
        return [(i.instant, self.commit_metadata(i.instant))
                for i in self.instants() if i.state == COMPLETED]

    def requested_info(self, instant: str) -> dict[str, Any]:
        """What start_commit recorded (write UUID, operation, ...); {} if unreadable."""
        try:
            payload = json.loads(self.storage.get(self._file(instant, ".commit.requested")))
        except (FileNotFoundError, ValueError, RecursionError):
            return {}
        return payload if isinstance(payload, dict) else {}

    # --- transitions -------------------------------------------------------------------
    def create(self, write_uuid: str, operation: str = "write",
               extra: dict[str, Any] | None = None) -> str:
        """A new instant, requested then inflight. Unique: the requested file is created
        with create-if-absent, and a taken id moves on by a millisecond. `extra` is kept
        in the requested file (see :meth:`requested_info`)."""
        self._pin.pinned = None
        candidate = next_instant_candidate()
        for _ in range(1000):
            requested = {"instant": candidate, "write_uuid": write_uuid,
                         "operation": operation, "requested_at": _now_iso(), **(extra or {})}
            if self.storage.create_if_absent(self._file(candidate, ".commit.requested"),
                                             _dumps(requested)):
                inflight = {"instant": candidate, "write_uuid": write_uuid,
                            **writer_identity(), "started_at": _now_iso()}
                self.storage.put(self._file(candidate, ".inflight"), _dumps(inflight))
                return candidate
            candidate = next_instant_candidate()
        raise TimelineError("could not allocate a unique instant id after 1000 tries")

    def complete(self, instant: str, metadata: dict[str, Any]) -> None:
        """Write the completed instant atomically; CommitConflictError if another writer
        completed or rolled it back first, ValueError (nothing written) for metadata that
        readers would call corrupt. Within :meth:`pinned`, the pinned instants then hold
        this one as completed (the rest as they were listed)."""
        pinned, self._pin.pinned = self._pin.pinned, None
        payload = {**metadata, "instant": instant, "state": COMPLETED}
        try:  # what readers check, checked before it is written: never an unreadable commit
            check_commit(payload, instant, self.commit_url(instant))
        except CorruptTableError as exc:
            raise ValueError(f"commit metadata of instant {instant}: {exc.entry}") from None
        body = _dumps(payload)
        if self.storage.create_if_absent(self._file(instant, ".commit"), body):
            self._metadata_cache[instant] = json.loads(body)
            if pinned is not None:
                self._pin.pinned = _with_completed(pinned, instant)
            return
        self._metadata_cache.pop(instant, None)
        existing = self._read_commit_file(instant) or {}
        if existing.get("state") == TOMBSTONE_STATE:
            raise CommitConflictError(f"instant {instant} was rolled back; it cannot complete")
        raise CommitConflictError(f"instant {instant} was already completed by another writer "
                                  f"(write {existing.get('write_uuid', '?')})")

    def claim_rollback(self, instant: str) -> None:
        """Fence the instant before a rollback deletes anything: after this, no commit of
        it can complete. InstantCompletedError if it completed first."""
        self._pin.pinned = None
        tombstone = {"instant": instant, "state": TOMBSTONE_STATE, "claimed_at": _now_iso(),
                     **writer_identity()}
        self.storage.put(self._file(instant, _FENCE), _dumps(tombstone))
        if self.storage.create_if_absent(self._file(instant, ".commit"), _dumps(tombstone)):
            self._metadata_cache[instant] = tombstone
            return
        self._metadata_cache.pop(instant, None)
        existing = self._read_commit_file(instant) or {}
        if existing.get("state") != TOMBSTONE_STATE:
            raise InstantCompletedError(
                f"instant {instant} is completed; completed commits are never rolled back")

    def finish_rollback(self, instant: str, info: dict[str, Any]) -> None:
        self._pin.pinned = None
        payload = {**info, "instant": instant, "state": ROLLEDBACK, "rolled_back_at": _now_iso()}
        self.storage.put(self._file(instant, ".rollback"), _dumps(payload))

    def rollback_info(self, instant: str) -> dict[str, Any] | None:
        where = self.storage.url(self._file(instant, ".rollback"))
        try:
            raw = self.storage.get(self._file(instant, ".rollback"))
        except FileNotFoundError:
            return None
        try:
            payload = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise CorruptTableError(where, f"the rollback record is not JSON: {exc}") from None
        return check_rollback_record(payload, where)


def _with_completed(listed: list[InstantInfo], instant: str) -> list[InstantInfo]:
    """`listed` with `instant` completed (its ``.commit`` written)."""
    files = next((i.files for i in listed if i.instant == instant), ())
    info = InstantInfo(instant, COMPLETED, tuple(sorted({*files, ".commit"})))
    return sorted([*(i for i in listed if i.instant != instant), info],
                  key=lambda i: i.instant)


class _Pin(threading.local):
    """A thread's pin of the timeline (:meth:`Timeline.pinned`)."""

    def __init__(self) -> None:
        self.pins = 0
        self.pinned: list[InstantInfo] | None = None


class _Listing:
    """The timeline's last listing, parsed: the next one parses only the names that
    changed since (a timeline of thousands of instants is listed several times a write)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._suffixes: dict[str, set[str]] = {}      # instant -> its files' suffixes
        self._infos: dict[str, InstantInfo | None] = {}  # None: no state file
        self._order: list[str] = []                     # the instants, oldest first
        self._result: list[InstantInfo] = []            # what the last listing parsed to
        self._fenced = False  # whether an instant has a rollback's fence (read each time)

    def parse(self, names: list[str], is_tombstone: Any) -> list[InstantInfo]:
        """Every instant and its state from a listing of the timeline's folder
        (`is_tombstone(instant)`: whether a completed instant a rollback announced itself
        on is that rollback's tombstone)."""
        with self._lock:
            listed = set(names)
            noted = [self._note(name, add=True) for name in listed - self._names]
            noted += [self._note(name, add=False) for name in self._names - listed]
            changed = {instant for instant in noted if instant is not None}
            self._names = listed
            for instant in changed:
                self._infos[instant] = self._info(instant, is_tombstone)
                if not self._suffixes.get(instant):
                    self._suffixes.pop(instant, None)
                    self._infos.pop(instant, None)
            if not changed and not self._fenced:
                return list(self._result)
            if changed:
                self._order = sorted(self._infos)
            result = []
            self._fenced = False
            for instant in self._order:
                info = self._infos[instant]
                if info is not None and _FENCE in info.files:
                    info = self._info(instant, is_tombstone)  # read again: it may change
                    self._fenced = True
                if info is not None:
                    result.append(info)
            self._result = result
            return list(result)

    def _note(self, name: str, *, add: bool) -> str | None:
        """The instant whose files `name` is one of, noted as listed or gone (None: not an
        instant's file)."""
        instant, _, rest = name.partition(".")
        suffix = "." + rest
        if not (suffix in _SUFFIX_STATE or suffix == _FENCE) or not is_instant(instant):
            return None
        if add:
            self._suffixes.setdefault(instant, set()).add(suffix)
        else:
            self._suffixes.get(instant, set()).discard(suffix)
        return instant

    def _info(self, instant: str, is_tombstone: Any) -> InstantInfo | None:
        suffixes = self._suffixes.get(instant, set())
        states = [_SUFFIX_STATE[s] for s in suffixes if s in _SUFFIX_STATE]
        if not states:
            return None
        state = max(states, key=_ORDER.__getitem__)
        # Only a rollback that announced itself can have left a tombstone, so a plain
        # completed instant is classified from the listing alone.
        if state == COMPLETED and _FENCE in suffixes and is_tombstone(instant):
            state = INFLIGHT  # fenced by a rollback that has not finished yet
        return InstantInfo(instant, state, tuple(sorted(suffixes)))
