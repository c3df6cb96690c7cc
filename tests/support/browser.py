"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, with
aiohttp's websocket client: no browser is downloaded, nothing leaves the machine.

``Browser.start()`` runs one browser; ``browser.open(url)`` loads a page in a new tab
with every request but the page's own failed and recorded, and returns a :class:`Page`
that evaluates JavaScript, takes screenshots, and says which requests were attempted and
which console errors were logged.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio",
         "--disable-features=Translate,OptimizationHints,MediaRouter",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
         "--window-size=1200,900"]
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")
TIMEOUT = 30.0


def executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Page:
    browser: Browser
    session: str
    url: str
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    loaded: threading.Event = field(default_factory=threading.Event)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, params, self.session)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: str) -> str:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as out:
            out.write(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.session_target})

    session_target: str = ""


class Browser:
    """One Chromium process and one websocket to it, served by a thread's event loop."""

    def __init__(self, process: subprocess.Popen[bytes], url: str, profile: str) -> None:
        self.process, self.profile = process, profile
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future[dict[str, Any]]] = {}
        self._pages: dict[str, Page] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._session: aiohttp.ClientSession | None = None
        asyncio.run_coroutine_threadsafe(self._connect(url), self._loop).result(TIMEOUT)

    @classmethod
    def start(cls) -> Browser:
        binary = executable()
        if binary is None:
            raise FileNotFoundError("chromium")
        profile = tempfile.mkdtemp(prefix="markerstore-chromium-")
        process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}",
                                    "about:blank"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
        assert process.stderr is not None
        deadline = time.monotonic() + TIMEOUT
        seen = []
        while time.monotonic() < deadline:
            line = process.stderr.readline().decode(errors="replace")
            if not line and process.poll() is not None:
                break
            seen.append(line)
            match = _LISTENING.search(line)
            if match:
                threading.Thread(target=process.stderr.read, daemon=True).start()  # drain
                return cls(process, match.group(1), profile)
        process.kill()
        raise RuntimeError("chromium did not start: " + "".join(seen)[-2000:])

    async def _connect(self, url: str) -> None:
        self._session = aiohttp.ClientSession()
        self._ws = await self._session.ws_connect(url, max_msg_size=0)
        self._loop.create_task(self._read())

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data:
                waiting = self._waiting.pop(data["id"], None)
                if waiting is not None:
                    waiting.set_result(data)
            else:
                self._event(data)

    def _send(self, method: str, params: dict[str, Any], session: str | None
              ) -> Future[dict[str, Any]]:
        message_id = next(self._ids)
        future: Future[dict[str, Any]] = Future()
        self._waiting[message_id] = future
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        assert self._ws is not None
        asyncio.run_coroutine_threadsafe(self._ws.send_str(json.dumps(message)), self._loop)
        return future

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        answer = self._send(method, params or {}, session).result(TIMEOUT)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return dict(answer.get("result", {}))

    def _event(self, data: dict[str, Any]) -> None:
        page = self._pages.get(data.get("sessionId", ""))
        if page is None:
            return
        method, params = data["method"], data.get("params", {})
        handlers: dict[str, Callable[[Page, dict[str, Any]], None]] = {
            "Fetch.requestPaused": self._paused, "Page.loadEventFired": _loaded,
            "Network.requestWillBeSent": _request, "Runtime.exceptionThrown": _exception,
            "Runtime.consoleAPICalled": _console, "Log.entryAdded": _log}
        handler = handlers.get(method)
        if handler is not None:
            handler(page, params)

    def _paused(self, page: Page, params: dict[str, Any]) -> None:
        """Only the page itself may load: any other request fails, and is recorded."""
        url = params["request"]["url"]
        if url == page.url:
            self._send("Fetch.continueRequest", {"requestId": params["requestId"]},
                       page.session)
        else:
            page.blocked.append(url)
            self._send("Fetch.failRequest", {"requestId": params["requestId"],
                                             "errorReason": "BlockedByClient"}, page.session)

    def open(self, url: str, *, dark: bool = False, width: int = 1200) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        page = Page(self, session, url, session_target=target)
        self._pages[session] = page
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            page.call(method)
        page.call("Fetch.enable", patterns=[{"urlPattern": "*"}])
        page.call("Network.emulateNetworkConditions", offline=True, latency=0,
                  downloadThroughput=-1, uploadThroughput=-1)
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                  deviceScaleFactor=1, mobile=False)
        page.call("Emulation.setEmulatedMedia", features=[
            {"name": "prefers-color-scheme", "value": "dark" if dark else "light"}])
        page.call("Page.navigate", url=url)
        if not page.loaded.wait(TIMEOUT):
            raise TimeoutError(f"{url} did not load")
        return page

    def close(self) -> None:
        async def shut() -> None:
            if self._ws is not None:
                await self._ws.close()
            if self._session is not None:
                await self._session.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(TIMEOUT)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT)
            self.process.terminate()
            try:
                self.process.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


def _loaded(page: Page, params: dict[str, Any]) -> None:
    page.loaded.set()


def _request(page: Page, params: dict[str, Any]) -> None:
    page.requests.append(params["request"]["url"])


def _exception(page: Page, params: dict[str, Any]) -> None:
    page.errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])


def _console(page: Page, params: dict[str, Any]) -> None:
    if params.get("type") in ("error", "assert"):
        page.errors.append(json.dumps(params.get("args", []))[:500])


def _log(page: Page, params: dict[str, Any]) -> None:
    entry = params.get("entry", {})
    if entry.get("level") == "error":
        page.errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url')}")
