"""Heartbeats of inflight instants: ``<base>/.markerstore/heartbeats/<instant>``.

A writer renews its heartbeat every interval while its instant is inflight. An instant
whose last beat is older than ``interval * (tolerable_misses + 1)`` belongs to a writer
that died; recovery may roll it back. The beat time is written in the file (not read from
the file's modification time, which object stores do not all keep).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import datetime, timezone
from typing import Any

from markerstore.storage import Storage
from markerstore.timeline.checks import check_heartbeat
from markerstore.timeline.identity import writer_identity
from markerstore.timeline.timeline import META_DIR

HEARTBEAT_DIR = f"{META_DIR}/heartbeats"
log = logging.getLogger(__name__)


class Heartbeats:
    """Heartbeat files of one table."""

    def __init__(self, storage: Storage, interval_ms: int = 60000, tolerable_misses: int = 2,
                 max_clock_skew_ms: int = 5 * 60 * 1000):
        self.storage = storage
        self.folder = storage.path(HEARTBEAT_DIR)
        self.interval_ms = interval_ms
        self.tolerable_misses = tolerable_misses
        self.max_clock_skew_ms = max_clock_skew_ms
        self._said: set[str] = set()

    def _file(self, instant: str) -> str:
        return f"{self.folder}/{instant}"

    def beat(self, instant: str) -> None:
        payload = {"instant": instant, "ts_ms": int(time.time() * 1000),
                   **writer_identity()}
        self.storage.put(self._file(instant), json.dumps(payload).encode())

    def read(self, instant: str) -> dict[str, Any] | None:
        """The last beat (ts_ms, and its writer: host, pid, boot_id, pid_ns, pid_start),
        or None if there is none or it is corrupt."""
        try:
            raw = self.storage.get(self._file(instant))
        except FileNotFoundError:
            return None
        except (IsADirectoryError, NotADirectoryError) as exc:  # no beat a writer wrote
            log.warning("heartbeat of %s is unreadable (%s); treating it as expired",
                        instant, exc.strerror)
            return None
        try:
            return dict(check_heartbeat(json.loads(raw), self.storage.url(self._file(instant))))
        except (ValueError, RecursionError) as exc:  # CorruptTableError is a ValueError
            log.warning("heartbeat of %s is unreadable (%s); treating it as expired",
                        instant, exc)
            return None

    @property
    def expiry_ms(self) -> int:
        return self.interval_ms * (self.tolerable_misses + 1)

    def expired(self, beat: dict[str, Any], instant: str | None = None) -> bool:
        """Whether a beat is older than the expiry, or suspect: dated further in the
        future than the allowed clock skew (a wrong clock or a forged file would otherwise
        keep its instant alive for ever); a suspect beat is said once, as a warning."""
        now_ms = time.time() * 1000
        ahead_ms = int(beat["ts_ms"]) - now_ms
        if ahead_ms > self.max_clock_skew_ms:
            self.say_future(instant or str(beat.get("instant") or "?"), int(beat["ts_ms"]),
                            ahead_ms, "heartbeat")
            return True
        return now_ms - int(beat["ts_ms"]) > self.expiry_ms

    def say_future(self, instant: str, at_ms: int, ahead_ms: float, what: str) -> None:
        """Warn (once per instant) that `what` of `instant` is dated `ahead_ms` ahead."""
        if instant in self._said:
            return
        self._said.add(instant)
        when = datetime.fromtimestamp(at_ms / 1000, timezone.utc).isoformat(timespec="seconds")
        log.warning("%s of instant %s is dated %s, %s ahead of this clock (more than "
                    "markerstore.heartbeat.max_clock_skew_ms=%d): a wrong clock or a forged "
                    "file; treating it as expired", what, instant, when,
                    _duration(ahead_ms), self.max_clock_skew_ms)

    def is_expired(self, instant: str) -> bool:
        beat = self.read(instant)
        return beat is None or self.expired(beat, instant)

    def delete(self, instant: str) -> None:
        self.storage.delete(self._file(instant))

    def start(self, instant: str) -> HeartbeatThread:
        thread = HeartbeatThread(self, instant)
        thread.start()
        return thread


def _duration(ms: float) -> str:
    """A duration as a person reads it: '3 days', '10.0 years', '42 s'."""
    seconds = ms / 1000
    for size, unit in ((365.25 * 86400, "years"), (86400, "days"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


class HeartbeatThread(threading.Thread):
    """Renews one instant's heartbeat until stopped."""

    def __init__(self, heartbeats: Heartbeats, instant: str) -> None:
        super().__init__(name=f"markerstore-heartbeat-{instant}", daemon=True)
        self.heartbeats = heartbeats
        self.instant = instant
        self._stop_event = threading.Event()
        self.heartbeats.beat(instant)  # the first beat is synchronous

    def run(self) -> None:
        interval = self.heartbeats.interval_ms / 1000
        while not self._stop_event.wait(interval):
            try:
                self.heartbeats.beat(self.instant)
            except Exception as exc:  # a missed beat is logged; the writer goes on
                log.warning("heartbeat of %s failed: %s", self.instant, exc)

    def stop(self, delete: bool = True) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=30)
        if delete:
            self.heartbeats.delete(self.instant)
