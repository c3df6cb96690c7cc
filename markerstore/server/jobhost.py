"""The job host: one small process that keeps a data-source write's driver side alive.

With ``df.write.format("markerstore")`` Spark calls the source's ``writer()`` in one Python
worker on the driver, and ``commit()`` / ``abort()`` in another; Spark may kill an idle
worker at any time. The write's heartbeat (and, for batched markers, the marker server)
must live from the job's start to its commit, so ``writer()`` launches this process
(``python -m markerstore.server.jobhost``) in its own session:

1. it reads a JSON line (table, options, whether to serve markers, the pid to watch),
   starts the marker server if asked, and answers ``{"pid", "url", "token"}``;
2. it reads a second line naming the instants to beat for (the write's and its error
   instant), starts their heartbeats, answers ``{"ok": true}``;
3. it runs until SIGTERM (the commit or abort is done: stop, delete the beats), until
   its main instant is no longer inflight (someone else finished it), or until the
   watched process (the Spark driver's Python daemon) is gone (the driver died: stop
   without deleting the beats, so recovery sees the write as dead).

:class:`JobHost` is the picklable handle the writer carries to executors and commit.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markerstore import config
from markerstore.errors import MarkerStoreError
from markerstore.table import Table
from markerstore.timeline import INFLIGHT, REQUESTED

log = logging.getLogger(__name__)
STATE_CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class JobHost:
    """A running job host: its pid, and the marker server's URL and token (batched)."""

    pid: int
    url: str | None = None
    token: str | None = None

    @classmethod
    def launch(cls, table: Table, *, serve_markers: bool, bind_host: str = "127.0.0.1",
               token: str | None = None) -> subprocess.Popen[str]:
        """Start the host process and send it its request; :meth:`ready` waits for its
        answer (the process starts while the caller does other work)."""
        request = {"table": table.storage.url(), "storage_options":
                   dict(table.storage.storage_options),
                   "options": table.settings.explicit(), "serve_markers": serve_markers,
                   "bind_host": bind_host, "token": token, "watch_pid": os.getppid()}
        proc = subprocess.Popen([sys.executable, "-m", "markerstore.server.jobhost"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        # Reap it whenever it ends (this worker may live on long after the write).
        threading.Thread(target=proc.wait, name="markerstore-jobhost-reaper",
                         daemon=True).start()
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        return proc

    @classmethod
    def ready(cls, proc: subprocess.Popen[str]) -> JobHost:
        """The started host's handle (its marker server is listening)."""
        answer = _exchange(proc, None)
        return cls(int(answer["pid"]), answer.get("url"), answer.get("token"))

    def beat(self, proc: subprocess.Popen[str],
             instants: Sequence[tuple[Table, str]]) -> None:
        """Hand the heartbeats of `instants` to the host (then stop beating them here)."""
        _exchange(proc, {"beat": [[t.storage.url(), dict(t.storage.storage_options),
                                   t.settings.explicit(), i] for t, i in instants]})
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def seal(self, instant: str) -> None:
        """Refuse every later marker of `instant` (batched markers)."""
        if self.url is None:
            return
        from markerstore.server.client import MarkerClient

        MarkerClient(self.url, instant, initialize=False, token=self.token).seal()

    def stop(self, timeout: float = 0.0) -> None:
        """Stop the host: it stops the marker server and deletes its beats as it ends.
        With `timeout`, wait up to that long until it has ended."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _running(self.pid):
            time.sleep(0.02)


def _exchange(proc: subprocess.Popen[str], message: dict[str, Any] | None
              ) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    if message is not None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise MarkerStoreError(f"the job host (pid {proc.pid}) ended before answering")
    answer: dict[str, Any] = json.loads(line)
    if "error" in answer:
        raise MarkerStoreError(f"the job host failed: {answer['error']}")
    return answer


def _running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


# --- the host process ------------------------------------------------------------------------
class _Host:
    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.table = Table(request["table"], request["storage_options"], request["options"])
        self.server: Any = None
        self.beats: list[Any] = []
        self.main: tuple[Table, str] | None = None
        self.stopping = threading.Event()

    def serve(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"pid": os.getpid()}
        if self.request["serve_markers"]:
            from markerstore.server import MarkerServer

            self.server = MarkerServer(self.table, self.request["bind_host"], 0,
                                       self.table.settings, token=self.request["token"])
            answer["url"] = str(self.server.start())
            answer["token"] = self.request["token"]
        return answer

    def beat(self, entries: list[list[Any]]) -> None:
        for url, storage_options, options, instant in entries:
            table = Table(url, storage_options,
                          {k: v for k, v in options.items() if k in config.OPTIONS})
            self.beats.append(table.heartbeats.start(instant))
            if self.main is None:
                self.main = (table, instant)

    def run(self) -> None:
        watch = int(self.request["watch_pid"])
        checked = time.monotonic()
        delete = True
        while not self.stopping.wait(0.5):
            if not _running(watch):
                log.warning("job host: the Spark driver (pid %d) is gone", watch)
                delete = False
                break
            if self.main is not None and time.monotonic() - checked > STATE_CHECK_SECONDS:
                checked = time.monotonic()
                table, instant = self.main
                try:
                    if table.state(instant) not in (REQUESTED, INFLIGHT):
                        break
                except Exception as exc:  # a storage hiccup: check again later
                    log.warning("job host: reading the state of %s failed: %s", instant, exc)
        self.close(delete)

    def close(self, delete: bool) -> None:
        if self.server is not None:
            try:
                self.server.stop()
            except Exception as exc:
                log.warning("job host: stopping the marker server failed: %s", exc)
        for thread in self.beats:
            try:
                thread.stop(delete=delete)
            except Exception as exc:
                log.warning("job host: stopping a heartbeat failed: %s", exc)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    request = json.loads(sys.stdin.readline())
    # The host needs the core's settings only (heartbeats, storage, marker server).
    request["options"] = {k: v for k, v in request["options"].items() if k in config.OPTIONS}
    host = _Host(request)
    signal.signal(signal.SIGTERM, lambda *_: host.stopping.set())
    try:
        print(json.dumps(host.serve()), flush=True)
        line = sys.stdin.readline()
        if not line:  # the writer gave up before starting the instant
            host.close(True)
            return
        host.beat(json.loads(line)["beat"])
        print(json.dumps({"ok": True}), flush=True)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        host.close(True)
        raise SystemExit(1) from exc
    host.run()


if __name__ == "__main__":
    main()
