"""`MarkerClient`: the batched markers of one instant, through the marker server.

It implements :class:`~markerstore.markers.base.WriteMarkers`, so a writer does not care
which mechanism it has. Connections are pooled and kept alive (urllib3, thread-safe); a
client pickles into a few strings and builds its pool again where it lands (a Spark
executor).

Retries: every call is idempotent, so every call is retried on a connection failure or
a 503 (a failed flush: nothing of it was acknowledged). A create is create-if-absent: a
retry of a create whose answer was lost finds the marker there; the client sends the same
``X-Request-Id`` on each try, so the server still answers "created" to the try that made
it (until the server restarts; after that the answer is "already existed").

Connecting is bounded as a whole: a request that cannot connect is tried again (up to
``markerstore.markers.client.retries`` times) only while
``markerstore.markers.client.connect_timeout_ms`` is not spent, then fails with one line
naming the address and the settings that decide it: a task on a host that cannot reach
the driver fails in bounded time instead of hanging.

An unreachable server fails loudly (:class:`MarkerServerError`). Only when
``markerstore.markers.batched.fallback.direct`` is on does the client write direct
markers instead, and it logs one warning (per process, server and instant) when it does.
An error the server answered (400, 401, 409, a failed flush) is never a reason to fall
back: that is how fallbacks hid I/O errors elsewhere.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import urllib3

from markerstore import config
from markerstore.backoff import backoff
from markerstore.errors import (
    InvalidMarkerError,
    MarkerConflictError,
    MarkerServerError,
    MarkerServerUnreachableError,
    MarkerTypeError,
)
from markerstore.markers.base import BATCHED, IOType, MarkerName, WriteMarkers, marker_items
from markerstore.markers.direct import DirectWriteMarkers
from markerstore.markers.segments import DETAIL_KEYS, rows_to_table
from markerstore.server.protocol import API, TOKEN_ENV

if TYPE_CHECKING:
    from markerstore.table import Table

log = logging.getLogger(__name__)

_BACKOFF_S, _BACKOFF_CAP_S = 0.05, 2.0  # a retry's first pause, and the longest
CHUNK = 2000  # markers per request in create_many (stays under the default body limit)

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_fallback(url: str, instant: str, reason: BaseException) -> None:
    with _warned_lock:
        if (url, instant) in _warned:
            return
        _warned.add((url, instant))
    log.warning("marker server %s cannot be reached (%s); instant %s writes DIRECT markers "
                "instead, as markerstore.markers.batched.fallback.direct asks", url, reason,
                instant)


def _reason(exc: BaseException) -> str:
    """The end of a connection error's text ("[Errno 111] Connection refused",
    "Connection to host timed out. (connect timeout=1.0)"), without the object reprs."""
    text = str(exc).strip().rstrip(")").strip("'\"")
    return text.rsplit(": ", 1)[-1].rsplit(", '", 1)[-1][:120] or type(exc).__name__


class MarkerClient(WriteMarkers):
    """Markers of one instant, kept by a marker server.

    ``MarkerClient(url, instant)``, or with keywords: `table` (gives the settings and the
    storage for the configured fallback), `token` (default ``$MARKERSTORE_SERVER_TOKEN``),
    `timeout` in seconds (of a request), `connect_timeout` in seconds (of connecting, all
    tries of a request together), `retries`, `fallback` (overrides the table's option),
    `initialize` (open the folder now, as the driver does; executors pass False).
    """

    mechanism = BATCHED

    def __init__(self, url: str | None = None, instant: str | None = None, *,
                 table: Table | None = None, token: str | None = None,
                 timeout: float | None = None, retries: int | None = None,
                 fallback: bool | None = None, initialize: bool = True,
                 pool_size: int = 64, connect_timeout: float | None = None) -> None:
        if instant is None:
            raise TypeError("MarkerClient needs the instant")
        super().__init__(instant)
        if not url or not isinstance(url, str):
            raise MarkerServerError("batched markers need the URL of the marker server "
                                    "(url=...)")
        settings = table.settings if table is not None else config.resolve(None)
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.timeout = float(timeout if timeout is not None
                             else settings[config.CLIENT_TIMEOUT_MS] / 1000)
        self.retries = int(retries if retries is not None else settings[config.CLIENT_RETRIES])
        self.connect_timeout = float(
            connect_timeout if connect_timeout is not None
            else settings[config.CLIENT_CONNECT_TIMEOUT_MS] / 1000)
        self.fallback = bool(fallback if fallback is not None
                             else settings[config.BATCHED_FALLBACK_DIRECT])
        self.pool_size = pool_size
        self._table = table
        self._table_spec: tuple[str, dict[str, Any], dict[str, Any]] | None = None
        self._pool: urllib3.PoolManager | None = None
        self._direct: DirectWriteMarkers | None = None
        self._lock = threading.Lock()
        if initialize:
            self.open()

    def __repr__(self) -> str:
        mode = " (direct fallback)" if self._direct is not None else ""
        return f"MarkerClient({self.url!r}, {self.instant!r}){mode}"

    # --- pickling: strings travel, the pool and the table are built again --------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        table = state.pop("_table")
        if table is not None:
            state["_table_spec"] = (table.path, dict(table.storage.storage_options),
                                    dict(table.settings.explicit()))
        for key in ("_pool", "_direct", "_lock"):
            state.pop(key)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._table = None
        self._pool = None
        self._direct = None
        self._lock = threading.Lock()

    def _get_table(self) -> Table | None:
        if self._table is None and self._table_spec is not None:
            from markerstore.table import Table

            path, storage_options, options = self._table_spec
            self._table = Table(path, storage_options, options)
        return self._table

    # --- HTTP ----------------------------------------------------------------------------------
    def _http(self) -> urllib3.PoolManager:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = urllib3.PoolManager(
                        num_pools=4, maxsize=self.pool_size, block=False, retries=False,
                        timeout=urllib3.Timeout(connect=min(self.timeout, 10.0),
                                                read=self.timeout))
        return self._pool

    def _request(self, method: str, path: str = "", *, body: Any = None,
                 fields: Mapping[str, str] | None = None, request_id: str | None = None
                 ) -> dict[str, Any]:
        url = f"{self.url}{API}/{self.instant}{path}"
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if request_id:
            headers["X-Request-Id"] = request_id
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        attempt = 0
        connecting = 0.0  # seconds spent on tries that could not connect, and their pauses
        while True:
            left = self.connect_timeout - connecting
            started = time.monotonic()
            try:
                response = self._http().request(
                    method, url, body=data, fields=fields, headers=headers,
                    timeout=urllib3.Timeout(connect=max(0.001, left), read=self.timeout))
            except urllib3.exceptions.ConnectTimeoutError as exc:  # refused ones too
                connecting += time.monotonic() - started
                if attempt >= self.retries or connecting >= self.connect_timeout:
                    raise MarkerServerUnreachableError(
                        f"marker server {self.url} cannot be reached ({attempt + 1} tries in "
                        f"{connecting:.1f} s: {_reason(exc)}); executors must reach it there: "
                        f"set spark.driver.host (or {config.SERVER_HOST}) to an address they "
                        f"reach, or raise {config.CLIENT_CONNECT_TIMEOUT_MS}") from exc
                pause = min(backoff(attempt, _BACKOFF_S, _BACKOFF_CAP_S), left)
                time.sleep(max(0.0, pause))
                connecting += max(0.0, pause)
                attempt += 1
                continue
            except urllib3.exceptions.HTTPError as exc:
                if attempt >= self.retries:
                    raise MarkerServerUnreachableError(
                        f"marker server {self.url} cannot be reached ({method} {path or '/'}, "
                        f"{attempt + 1} tries): {type(exc).__name__}: {exc}") from exc
            else:
                if response.status != HTTPStatus.SERVICE_UNAVAILABLE or attempt >= self.retries:
                    return self._answer(response, method, path)
            time.sleep(backoff(attempt, _BACKOFF_S, _BACKOFF_CAP_S))
            attempt += 1

    def _answer(self, response: urllib3.BaseHTTPResponse, method: str, path: str
                ) -> dict[str, Any]:
        try:
            payload = json.loads(response.data or b"{}")
        except ValueError:
            payload = {"message": response.data[:200].decode("utf-8", "replace")}
        if not isinstance(payload, dict):
            payload = {"message": str(payload)[:200]}
        if response.status == HTTPStatus.OK:
            return payload
        message = payload.get("message") or f"HTTP {response.status}"
        where = f"marker server {self.url}: {method} {path or '/'} of instant {self.instant}"
        if response.status == HTTPStatus.BAD_REQUEST:
            raise InvalidMarkerError(f"{where}: {message}")
        if response.status == HTTPStatus.CONFLICT and payload.get("error") == "conflict":
            raise MarkerConflictError(f"{where}: {message}")
        raise MarkerServerError(f"{where} failed ({response.status}): {message}")

    def _call(self, method: str, path: str = "", **kwargs: Any) -> dict[str, Any] | None:
        """A request to the server, or None when this client fell back to direct markers."""
        if self._direct is not None:
            return None
        try:
            return self._request(method, path, **kwargs)
        except MarkerServerUnreachableError as exc:
            if not self.fallback:
                raise
            self._switch_to_direct(exc)
            return None

    def _switch_to_direct(self, reason: MarkerServerUnreachableError) -> None:
        with self._lock:
            if self._direct is not None:
                return
            table = self._get_table()
            if table is None:
                raise MarkerServerError(f"{reason}; the fallback to direct markers is on but "
                                        "the client has no table (pass table=)") from reason
            try:
                # Through the table: an instant that is no longer inflight (rolled back
                # while its driver was unreachable) gets no marker folder again.
                markers = table.markers(self.instant)
                assert isinstance(markers, DirectWriteMarkers)
                self._direct = markers
            except MarkerTypeError as exc:
                raise MarkerServerError(
                    f"{reason}; instant {self.instant} already has batched markers, so it "
                    f"cannot fall back to direct markers ({exc})") from reason
        _warn_fallback(self.url, self.instant, reason)

    @property
    def direct(self) -> DirectWriteMarkers | None:
        """The direct markers this client fell back to, if it did."""
        return self._direct

    # --- WriteMarkers --------------------------------------------------------------------------
    @staticmethod
    def _body(partition: str, file_name: str, io_type: IOType | str,
              details: Mapping[str, Any]) -> dict[str, Any]:
        unknown = set(details) - set(DETAIL_KEYS)
        if unknown:
            raise TypeError(f"unknown marker detail(s) {sorted(unknown)}; batched markers "
                            f"keep {', '.join(DETAIL_KEYS)}")
        marker = MarkerName.build(partition, file_name, io_type)
        body = {"partition": marker.partition, "file": marker.file_name,
                "io_type": marker.io_type.value}
        body.update({k: v for k, v in details.items() if v is not None})
        return body

    def create(self, partition: str, file_name: str, io_type: IOType | str = IOType.CREATE,
               **details: Any) -> bool:
        body = self._body(partition, file_name, io_type, details)
        answer = self._call("POST", "/create", body=body, request_id=uuid.uuid4().hex)
        if answer is None:
            assert self._direct is not None
            return self._direct.create(partition, file_name, io_type, **details)
        return bool(answer["created"])

    def create_many(self, markers: Iterable[Mapping[str, Any] | Sequence[Any]]) -> list[bool]:
        """Create several markers in one request (or a few: :data:`CHUNK` each), all in
        the same segment flush; one answer per marker, in order. Each item is a dict
        (partition, file, io_type and details) or a tuple (partition, file[, io_type])."""
        bodies = [self._body(*args, details) for args, details in marker_items(markers)]
        results: list[bool] = []
        for start in range(0, len(bodies), CHUNK):
            chunk = bodies[start:start + CHUNK]
            answer = self._call("POST", "/create", body={"markers": chunk},
                                request_id=uuid.uuid4().hex)
            if answer is None:
                assert self._direct is not None
                results.extend(self._direct.create_many(chunk))
            else:
                results.extend(bool(c) for c in answer["created"])
        return results

    def update(self, partition: str, file_name: str, io_type: IOType | str = IOType.CREATE,
               **details: Any) -> None:
        """Record details (size, checksum, pending upload) of a marker, durably: the
        server writes them as a new row of the marker, which readers merge with its
        first. Creates the marker if it does not exist."""
        body = self._body(partition, file_name, io_type, details)
        answer = self._call("POST", "/details", body=body, request_id=uuid.uuid4().hex)
        if answer is None:
            assert self._direct is not None
            self._direct.update(partition, file_name, io_type, **details)

    def all(self) -> list[str]:
        answer = self._call("GET")
        if answer is None:
            assert self._direct is not None
            return self._direct.all()
        return sorted(answer["markers"])

    def exists(self) -> bool:
        answer = self._call("GET", "/exists")
        if answer is None:
            assert self._direct is not None
            return self._direct.exists()
        return bool(answer["exists"])

    def has(self, partition: str, file_name: str, io_type: IOType | str) -> bool:
        marker = MarkerName.build(partition, file_name, io_type)
        answer = self._call("GET", "/has", fields={
            "partition": marker.partition, "file": marker.file_name,
            "io_type": marker.io_type.value})
        if answer is None:
            assert self._direct is not None
            return self._direct.has(partition, file_name, io_type)
        return bool(answer["exists"])

    def delete_all(self) -> bool:
        """Delete the instant's markers on the server. While the instant is inflight the
        server refuses (409) unless it is sealed first (:meth:`seal`)."""
        answer = self._call("DELETE")
        if answer is None:
            assert self._direct is not None
            return self._direct.delete_all()
        return bool(answer["deleted"])

    def open(self) -> int:
        """Ready the instant's folder on the server (the constructor does it unless
        `initialize=False`): the instant must be inflight; MARKERS.type is written now.
        The driver opens; executors get the pickled client, which does not open again.
        Returns the number of markers held."""
        answer = self._call("POST", "/open")
        if answer is None:
            return len(self.all())
        return int(answer["markers"])

    def seal(self) -> int:
        """Ask the server to refuse every later marker of this instant (a straggling task
        then gets an error instead of adding to a folder being committed); returns the
        number of markers held. Call it before committing or rolling back."""
        answer = self._call("POST", "/seal")
        if answer is None:
            return len(self.all())
        return int(answer["markers"])

    def created_and_merged_paths(self) -> set[str]:
        answer = self._call("GET", "/created-and-merged")
        if answer is None:
            assert self._direct is not None
            return self._direct.created_and_merged_paths()
        return set(answer["paths"])

    def to_arrow(self) -> pa.Table:
        """Every marker with its details, as MARKER_COLUMNS rows."""
        answer = self._call("GET", fields={"details": "true"})
        if answer is None:
            assert self._direct is not None
            return self._direct.to_arrow(with_details=True)
        return rows_to_table(answer["rows"])

    def close(self) -> None:
        """Close pooled connections (they also close when the client is collected)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.clear()


def open_markers(table: Table, instant: str, type: str = "direct", **kwargs: Any
                 ) -> WriteMarkers:
    """The markers of an inflight instant of `table`: direct ones from the core
    (:meth:`Table.markers`), or, for ``type="batched"`` (Hudi's name
    ``timeline_server_based`` too), a :class:`MarkerClient` of the server at `url=`."""
    mechanism = config.OPTIONS[config.MARKERS_TYPE].parse(type)
    if mechanism == "direct":
        if kwargs:
            raise TypeError(f"direct markers take no options, got {sorted(kwargs)}")
        return table.markers(instant)
    table.check_inflight(instant, "markers are only created for")
    return MarkerClient(instant=instant, table=table, **kwargs)
