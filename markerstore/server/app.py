"""The marker server over HTTP (aiohttp): routes, auth, limits, and the embedded mode.

Routes are documented in docs/HTTP_API.md. The server serves ONE table: every route
names an instant, which must be an instant id, and maps to
``<base>/.markerstore/markers/<instant>/`` and nowhere else; partitions and file names are
validated like direct markers' (no absolute path, no ``..``, no separator in a file name),
and every other field is checked before a request is queued (validate.py), so one
client's bad request is its own 400 and never fails another's flush.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from aiohttp import web

from markerstore import config, metrics
from markerstore.errors import ConfigError, InvalidMarkerError, MarkerServerError
from markerstore.server import validate
from markerstore.server.memory import trim
from markerstore.server.protocol import API, TOKEN_ENV
from markerstore.server.service import MarkerService, ServiceError

if TYPE_CHECKING:
    from markerstore.table import Table

log = logging.getLogger(__name__)

JSON_TYPE = "application/json; charset=utf-8"
_PUBLIC = frozenset({"/health"})
_METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "HEAD", "OPTIONS", "PATCH"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def _names_json(names: pa.Array) -> str:
    """A piece of a JSON array of names, without its brackets ('' for none)."""
    return json.dumps(names.to_pylist())[1:-1]


def _rows_json(rows: pa.Table) -> str:
    """A piece of the JSON array of rows of ``?details=true`` (``created_at`` in
    milliseconds since the epoch), without its brackets."""
    index = rows.schema.get_field_index("created_at")
    rows = rows.set_column(index, "created_at", pc.cast(rows.column("created_at"), pa.int64()))
    return json.dumps(rows.to_pylist())[1:-1]


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


class _Routes:
    """Request handlers of one server."""

    def __init__(self, server: MarkerServer) -> None:
        self.server = server
        self.service = server.service

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "table": self.server.table_url,
                                  "markers_held": sum(len(s.names) for s in
                                                      self.service.states.values())})

    async def metrics(self, request: web.Request) -> web.Response:
        text = self.server.registry.render() + metrics.REGISTRY.render()
        return web.Response(body=text.encode("utf-8"), headers={
            "Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def create(self, request: web.Request) -> web.Response:
        return await self._create(request, update=False)

    async def details(self, request: web.Request) -> web.Response:
        return await self._create(request, update=True)

    async def _create(self, request: web.Request, update: bool) -> web.Response:
        instant = request.match_info["instant"]
        try:
            body = await asyncio.wait_for(request.read(), self.server.header_timeout)
        except asyncio.TimeoutError:
            late = _error(
                HTTPStatus.REQUEST_TIMEOUT, "request_timeout",
                f"the request body did not arrive within {self.server.header_timeout:g} s")
            late.force_close()  # what is left of the body is never read
            return late
        raw, batch = validate.markers_of(validate.loads(body))
        items = []
        for index, obj in enumerate(raw):
            try:
                items.append(validate.parse_marker(obj))
            except InvalidMarkerError as exc:
                where = f"marker {index}: " if batch else ""
                raise InvalidMarkerError(f"{where}{exc}") from None
        request_id = validate.request_id(request.headers.get("X-Request-Id"))
        created = await self.service.create(instant, items, request_id, update=update)
        names = [marker.name for marker, _ in items]
        seen: set[str] = set()
        for i, name in enumerate(names):  # a marker twice in one request: created once
            if name in seen:
                created[i] = False
            seen.add(name)
        if batch:
            return web.json_response({"created": created, "markers": names})
        return web.json_response({"created": created[0], "marker": names[0]})

    async def all(self, request: web.Request) -> web.StreamResponse:
        """Every marker (or, with ``?details=true``, every row), streamed: the answer is
        the documented JSON object, written a piece of rows at a time, so the server never
        holds all the names (or rows) of a large folder at once."""
        instant = request.match_info["instant"]
        details = request.query.get("details", "").lower() in ("1", "true", "yes")
        state = await self.service.state(instant)  # errors are answered before streaming
        if request.method == "HEAD":  # the headers only: a streamed body must not follow
            return web.Response(headers={"Content-Type": JSON_TYPE})
        if details:
            chunks: Iterator[str] = map(_rows_json, self.service.row_chunks(state))
        else:
            chunks = map(_names_json, self.service.name_chunks(state))
        response = web.StreamResponse(headers={"Content-Type": JSON_TYPE})
        response.enable_chunked_encoding()
        await response.prepare(request)
        field = "rows" if details else "markers"
        await response.write(f'{{"instant": {json.dumps(instant)}, "{field}": ['.encode())
        loop = asyncio.get_running_loop()
        first = True
        try:
            while True:  # each piece is decoded and encoded in a worker thread
                text = await loop.run_in_executor(self.service._io_pool, next, chunks, None)
                if text is None:
                    break
                if text:
                    await response.write((text if first else "," + text).encode("utf-8"))
                    first = False
        except Exception:
            # The status is sent: cut the connection, so that the client sees a broken
            # answer (and retries or fails) rather than a short list.
            log.exception("marker server: streaming the markers of %s failed", instant)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write(b"]}")
        await response.write_eof()
        await loop.run_in_executor(self.service._io_pool, trim)  # the pieces it decoded
        return response

    async def exists(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"exists": await self.service.exists(request.match_info["instant"])})

    async def has(self, request: web.Request) -> web.Response:
        query = request.query
        if "file" not in query:
            raise InvalidMarkerError("query parameter 'file' is required")
        marker = validate.marker(query.get("partition", ""), query["file"],
                                 query.get("io_type", "CREATE"))
        return web.json_response(
            {"exists": await self.service.has(request.match_info["instant"], marker)})

    async def created_and_merged(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"paths": await self.service.created_and_merged(request.match_info["instant"])})

    async def open(self, request: web.Request) -> web.Response:
        held = await self.service.open(request.match_info["instant"])
        return web.json_response({"open": True, "markers": held})

    async def seal(self, request: web.Request) -> web.Response:
        held = await self.service.seal(request.match_info["instant"])
        return web.json_response({"sealed": True, "markers": held})

    async def delete(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"deleted": await self.service.delete_all(request.match_info["instant"])})


class ConnectionLog:
    """The logger aiohttp gets for what happens below the routes (a malformed request, a
    connection that broke): one line per event, at most `burst` lines per `period`
    seconds (then one line saying how many were left out), and never an exception's text
    or traceback: aiohttp's message for a malformed request quotes the raw header line,
    a bearer token with it, and any client can send one."""

    def __init__(self, target: logging.Logger, burst: int = 10, period: float = 10.0) -> None:
        self.target = target
        self.burst = burst
        self.period = period
        self._window_start = 0.0
        self._in_window = 0
        self._left_out = 0

    def _line(self, level: int, exc_info: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        now = time.monotonic()
        if now - self._window_start >= self.period:
            if self._left_out:
                self.target.warning("marker server: %d more bad request(s) or broken "
                                    "connection(s) not logged", self._left_out)
            self._window_start, self._in_window, self._left_out = now, 0, 0
        if self._in_window >= self.burst:
            self._left_out += 1
            return
        self._in_window += 1
        status = getattr(exc, "code", None) or getattr(exc, "status", None)
        what = f"{type(exc).__name__}" + (f", {status}" if isinstance(status, int) else "") \
            if exc is not None else "no details"
        self.target.log(level, "marker server: bad request or broken connection (%s)", what)

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **_: Any) -> None:
        self._line(logging.WARNING, exc_info)

    def error(self, msg: object, *args: Any, exc_info: Any = None, **_: Any) -> None:
        self._line(logging.WARNING, exc_info)

    def warning(self, msg: object, *args: Any, exc_info: Any = None, **_: Any) -> None:
        self._line(logging.WARNING, exc_info)

    def debug(self, msg: object, *args: Any, exc_info: Any = None, **_: Any) -> None:
        if self.target.isEnabledFor(logging.DEBUG):
            self._line(logging.DEBUG, exc_info)

    info = debug


def _endpoint(request: web.Request) -> str:
    route = request.match_info.route
    resource = route.resource
    return resource.canonical if resource is not None else "unmatched"


class MarkerServer:
    """The marker server of one table.

    Embedded (the Spark driver)::

        with MarkerServer(table) as server:      # or server.start() ... server.stop()
            client = MarkerClient(server.url, instant)

    `options` override the table's (batch interval, threads, format, ...). Binding to an
    address that is not loopback requires a `token` (or ``$MARKERSTORE_SERVER_TOKEN``);
    clients send it as ``Authorization: Bearer <token>``. `advertise` is the host clients
    reach it at, in its URL (default: the address it binds), as Spark's
    ``spark.driver.host`` is to ``spark.driver.bindAddress``.
    """

    def __init__(self, table: Table, host: str = "127.0.0.1", port: int = 0,
                 options: Mapping[str, Any] | None = None, token: str | None = None,
                 advertise: str | None = None) -> None:
        self.table = table
        self.settings = table.settings.with_options(options)
        self.host = host
        self.port = port
        self.advertise = advertise.strip() if advertise and advertise.strip() else None
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        if token is not None and not token.strip():
            raise ConfigError("the marker server token is empty")
        if token is not None and not all("!" <= c <= "~" for c in token):
            raise ConfigError("the marker server token must be printable ASCII without "
                              "spaces (it travels in an HTTP header)")
        if not is_loopback(host) and not token:
            raise ConfigError(
                f"binding the marker server to {host} (not loopback) requires a token: pass "
                f"token= / --token, or set ${TOKEN_ENV}")
        self.token = token
        self.max_body = int(self.settings[config.SERVER_MAX_BODY_BYTES])
        self.header_timeout = self.settings[config.SERVER_HEADER_TIMEOUT_MS] / 1000
        self.registry = metrics.Registry()
        self._request_counters: dict[tuple[str, str, int], metrics.Counter] = {}
        self.service = MarkerService(table.storage, self.settings, self.registry)
        self.table_url = table.storage.url()
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"MarkerServer({self.table_url!r}, url={self.url!r})"

    # --- the aiohttp application -----------------------------------------------------------
    def _app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body,
                              middlewares=[self._guard])
        routes = _Routes(self)
        app.router.add_get("/health", routes.health)
        app.router.add_get("/metrics", routes.metrics)
        app.router.add_post(API + "/{instant}/create", routes.create)
        app.router.add_post(API + "/{instant}/details", routes.details)
        app.router.add_get(API + "/{instant}", routes.all)
        app.router.add_get(API + "/{instant}/exists", routes.exists)
        app.router.add_get(API + "/{instant}/has", routes.has)
        app.router.add_get(API + "/{instant}/created-and-merged", routes.created_and_merged)
        app.router.add_post(API + "/{instant}/open", routes.open)
        app.router.add_post(API + "/{instant}/seal", routes.seal)
        app.router.add_delete(API + "/{instant}", routes.delete)
        return app

    def _refuse(self, request: web.Request) -> web.Response | None:
        """401 without the right bearer token, 413 for a declared body over the limit."""
        if self.token is not None and request.path not in _PUBLIC:
            header = request.headers.get("Authorization", "")
            scheme, _, given = header.partition(" ")
            try:
                offered = given.strip().encode("utf-8")
            except UnicodeEncodeError:  # bytes that are not UTF-8: never the token
                offered = b""
            if scheme.lower() != "bearer" or not offered or not hmac.compare_digest(
                    offered, self.token.encode("utf-8")):
                response = _error(HTTPStatus.UNAUTHORIZED, "unauthorized",
                                  "missing or wrong bearer token (Authorization: Bearer ...)")
                response.headers["WWW-Authenticate"] = 'Bearer realm="markerstore"'
                return response
        length = request.content_length
        if length is not None and length > self.max_body:
            return _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                          f"request body of {length} bytes exceeds the limit of "
                          f"{self.max_body} bytes")
        return None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Auth and limits first; every error as a JSON answer; every request counted."""
        try:
            response = self._refuse(request) or await handler(request)
        except ServiceError as exc:
            response = _error(exc.status, exc.code, exc.message)
        except InvalidMarkerError as exc:
            response = _error(HTTPStatus.BAD_REQUEST, "invalid_marker", str(exc))
        except web.HTTPRequestEntityTooLarge:
            response = _error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "body_too_large",
                              f"request body exceeds the limit of {self.max_body} bytes")
        except web.HTTPException as exc:
            response = _error(exc.status, exc.reason.lower().replace(" ", "_"),
                              exc.text or exc.reason)
        except Exception as exc:
            log.exception("marker server: %s %s failed", request.method, request.path)
            response = _error(
                HTTPStatus.INTERNAL_SERVER_ERROR, "internal", f"{type(exc).__name__}: {exc}")
        method = request.method if request.method in _METHODS else "other"
        key = (_endpoint(request), method, response.status)
        counter = self._request_counters.get(key)
        if counter is None:
            counter = self._request_counters[key] = self.registry.counter(
                "markerstore_marker_requests_total",
                {"endpoint": key[0], "method": key[1], "status": key[2]},
                "HTTP requests served, by endpoint and status.")
        counter.inc()
        return response

    # --- running in an existing event loop (the CLI) -------------------------------------------
    async def start_async(self) -> str:
        """Start serving on the running event loop; returns the URL."""
        await self.service.start()
        # keepalive_timeout bounds the headers too: aiohttp closes a connection still
        # waiting for a whole request that long after it opened or last answered.
        runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=30,
                               keepalive_timeout=self.header_timeout,
                               logger=ConnectionLog(log))
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=1024)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            await self.service.stop()
            raise MarkerServerError(f"cannot bind the marker server to "
                                    f"{self.host}:{self.port}: {exc}") from exc
        self._runner = runner
        host, port = runner.addresses[0][:2]
        host = self.advertise or host
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        self.url = f"http://{host}:{port}"
        log.info("marker server for %s at %s", self.table_url, self.url)
        return self.url

    async def stop_async(self) -> None:
        """Stop taking requests, answer those in progress (flushing what is queued), stop."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.service.stop()

    # --- embedded: its own event loop in a thread ----------------------------------------------
    def start(self) -> str:
        """Serve from a background thread; returns the URL once it accepts connections."""
        if self._thread is not None:
            return self.url
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="markerstore-server",
                                  daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start_async(), loop).result(timeout=60)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
            raise
        self._loop, self._thread = loop, thread
        return self.url

    def stop(self) -> None:
        """Stop the background server (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.stop_async(), loop).result(timeout=120)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=30)
            loop.close()
            self._loop = self._thread = None

    def seal(self, instant: str) -> int:
        """Refuse every later marker of `instant` and wait for its running flush; call it
        before committing or rolling back the instant (see MarkerService.seal)."""
        loop = self._loop
        if loop is None:
            raise MarkerServerError("the marker server is not running in the background")
        future = asyncio.run_coroutine_threadsafe(self.service.seal(instant), loop)
        try:
            return future.result(timeout=120)
        except ServiceError as exc:
            raise MarkerServerError(exc.message) from exc

    def __enter__(self) -> MarkerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
