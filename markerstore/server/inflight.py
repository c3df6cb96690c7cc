"""Which instants are inflight, as the marker server sees the timeline (a part of
:class:`~markerstore.server.service.MarkerService`).

Creates are accepted only for an inflight instant. The server lists the timeline folder
and keeps the answer as a :class:`TimelineView`; requests that need a fresher one at the
same time share one listing. With early conflict detection on, the view also holds the
file ids other inflight instants (not written through this server) have markers for.
An instant that is no longer inflight has its queued creates refused and its state
dropped (:meth:`InflightWatch._mark_gone`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus

import duckdb

from markerstore.errors import MarkerStoreError
from markerstore.markers.reconcile import read_markers
from markerstore.server.state import DirState, file_id
from markerstore.server.writer import SegmentWriter, ServiceError
from markerstore.timeline import is_instant
from markerstore.timeline.timeline import TIMELINE_DIR

log = logging.getLogger("markerstore.server.service")


@dataclass(frozen=True)
class TimelineView:
    """Which instants were inflight when the timeline was listed, and (for early conflict
    detection) the file ids that inflight instants not written here have markers for."""

    started: float
    inflight: frozenset[str]
    foreign: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)


class InflightWatch(SegmentWriter):
    """The timeline as the marker server sees it: the latest view, a listing under way."""

    states: dict[str, DirState]
    instant_check: float
    _view: TimelineView | None
    _refresh: tuple[float, asyncio.Task[TimelineView]] | None

    async def _require_inflight(self, instant: str) -> float:
        """Raise 409 unless the timeline says `instant` is inflight; returns when the
        listing that said so started."""
        asked = time.monotonic()
        view = self._view
        if (view is None or instant not in view.inflight) and self._refresh is not None:
            # a listing is under way: it may well show the instant
            with contextlib.suppress(ServiceError):
                view = await asyncio.shield(self._refresh[1])
        if view is None or instant not in view.inflight:
            view = await self._fresh_view(asked)
        if instant not in view.inflight:
            raise ServiceError(HTTPStatus.CONFLICT, "instant_not_inflight",
                               f"instant {instant} is not inflight on the timeline (never "
                               "started, completed or rolled back)")
        return view.started

    async def _fresh_view(self, not_before: float) -> TimelineView:
        """A listing of the timeline that started at `not_before` or later. Requests that
        need one at the same time share it: a listing that started too early is waited
        for, and the first waiter then starts the next one, which the others join."""
        while True:
            running = self._refresh
            if running is None:
                running = self._start_refresh()
            if running[0] >= not_before:
                return await asyncio.shield(running[1])
            with contextlib.suppress(ServiceError):
                await asyncio.shield(running[1])
            view = self._view
            if view is not None and view.started >= not_before:
                return view
            if self._refresh is running:  # it failed without clearing itself: start anew
                self._refresh = None

    def _start_refresh(self) -> tuple[float, asyncio.Task[TimelineView]]:
        started = time.monotonic()
        written = {i for i, s in self.states.items() if s.written_here or s.pending}
        task = asyncio.get_running_loop().create_task(
            self._run_refresh(started, frozenset(written)))
        self._refresh = (started, task)
        return self._refresh

    async def _run_refresh(self, started: float, written: frozenset[str]) -> TimelineView:
        try:
            view = await self._run(self._io_pool, self._read_view, started, written)
        except Exception as exc:
            log.warning("marker server: reading the timeline failed: %s", exc)
            raise ServiceError(HTTPStatus.SERVICE_UNAVAILABLE, "storage_error",
                               f"reading the timeline failed: {exc}") from exc
        finally:
            if self._refresh is not None and self._refresh[0] == started:
                self._refresh = None
        if self._view is None or view.started >= self._view.started:
            self._view = view
            self._mark_gone(view)
        return view

    def _read_view(self, started: float, written: frozenset[str]) -> TimelineView:
        suffixes: dict[str, set[str]] = {}
        for name in self.storage.ls(self.storage.path(TIMELINE_DIR)):
            instant, _, rest = name.partition(".")
            if is_instant(instant):
                suffixes.setdefault(instant, set()).add(rest)
        inflight = frozenset(i for i, s in suffixes.items()
                             if s & {"commit.requested", "inflight"}
                             and not s & {"commit", "rollback", "rollback.requested"})
        foreign: dict[tuple[str, str], set[str]] = {}
        if self.conflict_detection:
            con = duckdb.connect()
            for instant in sorted(inflight - written):
                try:
                    relation = read_markers(self.storage, instant, con)
                except MarkerStoreError as exc:  # a corrupt or unreadable neighbour: skipped
                    log.warning("early conflict detection cannot read the markers of %s: %s",
                                instant, exc)
                    continue
                if relation is None:
                    continue
                pairs = relation.query("m", "SELECT DISTINCT partition, file FROM m")
                assert pairs is not None
                for partition, file_name in pairs.fetchall():
                    foreign.setdefault((partition, file_id(file_name)), set()).add(instant)
        return TimelineView(started, inflight,
                            {k: frozenset(v) for k, v in foreign.items()})

    def _mark_gone(self, view: TimelineView) -> None:
        for instant, state in list(self.states.items()):
            if (state.inflight_checked and not state.gone and instant not in view.inflight
                    and view.started > state.checked_at):
                state.gone = (f"instant {instant} is no longer inflight (completed or rolled "
                              "back); its markers are closed")
                self._fail(state, state.pending, ServiceError(
                    HTTPStatus.CONFLICT, "instant_not_inflight",
                    state.gone))
                state.pending = []
            idle = not state.busy and not state.pending
            finished = instant not in view.inflight
            if idle and ((state.gone and (not state.sealed or finished))
                         or (not state.inflight_checked and finished)):
                del self.states[instant]  # a later request loads it again from storage

    async def _inflight_now(self, instant: str) -> bool:
        """Whether a listing of the timeline started now shows the instant inflight."""
        view = await self._fresh_view(time.monotonic())
        return instant in view.inflight
