"""The job host: one small process that keeps a data-source write's driver side alive.

With ``df.write.format("markerstore")`` Spark calls the source's ``writer()`` in one Python
worker on the driver, and ``commit()`` / ``abort()`` in another; Spark may kill an idle
worker at any time. The write's heartbeat (and, for batched markers, the marker server)
must live from the job's start to its commit, so ``writer()`` launches this process (this
file run as ``__main__``, without importing the ``markerstore.spark`` package and pyspark
with it) in its own session:

1. it reads a JSON line (table, options, whether to serve markers, the pid to watch),
   starts the marker server if asked, and answers ``{"pid", "url", "token"}``;
2. it reads a second line naming the instants to beat for (the write's and its error
   instant), starts their heartbeats, answers ``{"ok": true}``;
3. it runs until SIGTERM (the commit or abort is done: stop, delete the beats), until
   its main instant is no longer inflight (someone else finished it), or until the
   watched process (the Spark driver's Python daemon) is gone (the driver died: stop
   without deleting the beats, so recovery sees the write as dead).

A streaming query's host lives for the query (:func:`attach_query_host`): the first
micro-batch launches it with a per-query folder (``markerstore-query-<digest>`` in the
system temp dir); the host then listens on a Unix socket there and records itself in
``host.json``. Each batch hands its instants' heartbeats over that socket (``beat``) and
releases them after its commit or abort (``release``); the marker server serves every
batch's instant. The host ends when the watched driver process is gone, on SIGTERM, or
after :data:`QUERY_IDLE_SECONDS` without a batch. A batch that finds no live host (no
file, a dead pid, a socket that does not answer, another driver's host) launches a new one.

:class:`JobHost` is the picklable handle the writer carries to executors and commit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markerstore import config
from markerstore.errors import MarkerStoreError
from markerstore.table import Table
from markerstore.timeline import INFLIGHT, REQUESTED
from markerstore.timeline.identity import pid_alive as process_alive
from markerstore.timeline.identity import writer_identity

log = logging.getLogger(__name__)
STATE_CHECK_SECONDS = 5.0
QUERY_IDLE_SECONDS = 300.0  # a query's host ends after this long without a batch
HOST_FILE = "host.json"
# How the host process is started: this module's file run as __main__ (``python -m`` would
# import the markerstore.spark package first, and pyspark with it: seconds and 50 MB).
_RUN_THIS_FILE = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


@dataclass(frozen=True)
class JobHost:
    """A running job host: its pid, and the marker server's URL and token (batched)."""

    pid: int
    url: str | None = None
    token: str | None = None
    control: str | None = None  # a query host's Unix socket (None: a host of one write)

    @classmethod
    def launch(cls, table: Table, *, serve_markers: bool, bind_host: str = "127.0.0.1",
               token: str | None = None, query_dir: str | None = None,
               advertise: str | None = None) -> subprocess.Popen[str]:
        """Start the host process and send it its request; :meth:`ready` waits for its
        answer (the process starts while the caller does other work). With `query_dir`,
        a query host (it logs to ``host.log`` there). Its marker server binds `bind_host`
        and its URL names `advertise` (default: the bound address)."""
        request = {"table": table.storage.url(), "storage_options":
                   dict(table.storage.storage_options),
                   "options": table.settings.explicit(), "serve_markers": serve_markers,
                   "bind_host": bind_host, "advertise": advertise, "token": token,
                   "watch_pid": os.getppid(),
                   "query_dir": query_dir, "idle_seconds": QUERY_IDLE_SECONDS}
        stderr = None if query_dir is None else open(  # noqa: SIM115 (the child keeps it)
            os.path.join(query_dir, "host.log"), "a")
        try:
            proc = subprocess.Popen([sys.executable, "-c", _RUN_THIS_FILE, __file__],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    stderr=stderr, start_new_session=True)
        finally:
            if stderr is not None:
                stderr.close()
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
        return cls(int(answer["pid"]), answer.get("url"), answer.get("token"),
                   answer.get("control"))

    def beat(self, proc: subprocess.Popen[str] | None,
             instants: Sequence[tuple[Table, str]]) -> None:
        """Hand the heartbeats of `instants` to the host (then stop beating them here)."""
        entries = [[t.storage.url(), dict(t.storage.storage_options),
                    t.settings.explicit(), i] for t, i in instants]
        if self.control is not None:
            _call(self.control, {"op": "beat", "beat": entries})
            return
        assert proc is not None
        _exchange(proc, {"beat": entries})
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def seal(self, instant: str) -> int | None:
        """Refuse every later marker of `instant` (batched markers); the number of markers
        held, or None when there is no marker server (nothing sealed)."""
        if self.url is None:
            return None
        from markerstore.server.client import MarkerClient

        return MarkerClient(self.url, instant, initialize=False, token=self.token).seal()

    def release(self, instants: Sequence[str]) -> None:
        """The write of `instants` is over: a query host stops and deletes their beats
        (and lives on for the next batch); a host of one write stops."""
        if self.control is None:
            self.stop()
            return
        try:
            _call(self.control, {"op": "release", "instants": list(instants)})
        except (OSError, ValueError, MarkerStoreError) as exc:
            # A dead host beats nothing; the next batch replaces it.
            log.warning("the query's job host (pid %d) did not release %s: %s", self.pid,
                        list(instants), exc)

    def stop(self, timeout: float = 0.0) -> None:
        """Stop the host: it stops the marker server and deletes its beats as it ends.
        With `timeout`, wait up to that long until it has ended."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and process_alive(self.pid):
            time.sleep(0.02)


def _answer(line: str, where: str) -> dict[str, Any]:
    """A job host's one-line JSON answer; an error it reports, or none, raises."""
    if not line:
        raise MarkerStoreError(f"the job host {where} before answering")
    answer: dict[str, Any] = json.loads(line)
    if "error" in answer:
        raise MarkerStoreError(f"the job host failed: {answer['error']}")
    return answer


def _exchange(proc: subprocess.Popen[str], message: dict[str, Any] | None
              ) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    if message is not None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
    return _answer(proc.stdout.readline(), f"(pid {proc.pid}) ended")


# --- a query's host: found through its folder, or launched --------------------------------------
def query_dir(query_id: str) -> str:
    """The folder of a streaming query's host (in the system temp dir)."""
    digest = hashlib.sha256(query_id.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"markerstore-query-{digest}")


def attach_query_host(table: Table, query_id: str, *, serve_markers: bool,
                      bind_host: str = "127.0.0.1", token: str | None = None,
                      advertise: str | None = None) -> JobHost:
    """The live job host of the query, or a new one if there is none (no host file, a
    dead or unanswering host, or one of another driver or with other settings)."""
    folder = query_dir(query_id)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.stat(folder)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        # Its host file names the marker server the tasks use: only this user may write it.
        raise MarkerStoreError(f"the query's job host folder {folder} is not this user's "
                               f"alone (owner {info.st_uid}, mode {info.st_mode & 0o777:o})")
    with open(os.path.join(folder, "lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        want = {"table": table.storage.url(), "serve_markers": serve_markers,
                "bind_host": bind_host, "advertise": advertise, "watch_pid": os.getppid(),
                "namespace": _namespace()}
        host = live_query_host(folder, want)
        if host is not None:
            return host
        proc = JobHost.launch(table, serve_markers=serve_markers, bind_host=bind_host,
                              token=token, query_dir=folder, advertise=advertise)
        try:
            host = JobHost.ready(proc)
        except BaseException:
            proc.kill()
            raise
        finally:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        return host


def live_query_host(folder: str, want: dict[str, Any] | None = None) -> JobHost | None:
    """The host recorded in `folder` if it is alive, answers, and matches `want`."""
    try:
        with open(os.path.join(folder, HOST_FILE)) as handle:
            record = json.load(handle)
        pid, control = int(record["pid"]), str(record["control"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if any(record.get(k) != v for k, v in (want or {}).items()) or not process_alive(pid):
        return None
    try:
        if int(_call(control, {"op": "ping"}, timeout=5.0)["pid"]) != pid:
            return None
    except (OSError, ValueError, KeyError, MarkerStoreError) as exc:
        log.info("the query's job host (pid %d) does not answer: %s", pid, exc)
        return None
    return JobHost(pid, record.get("url"), record.get("token"), control)


def _namespace() -> list[Any]:
    """This boot and PID namespace: a host file written in another (a /tmp shared between
    containers) names a PID that means nothing here."""
    identity = writer_identity()
    return [identity.get("boot_id"), identity.get("pid_ns")]


def _call(control: str, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """One request to a query host over its Unix socket, and its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(control)
        sock.sendall((json.dumps(message) + "\n").encode())
        with sock.makefile("r") as reader:
            line = reader.readline()
    return _answer(line, f"at {control} closed")


# --- the host process ------------------------------------------------------------------------
def _start_beats(entries: list[list[Any]]) -> tuple[list[Any], tuple[Table, str] | None]:
    """Start a heartbeat for each (table URL, storage options, options, instant); returns
    the heartbeats and the first (table, instant), the write's main instant."""
    beats, main = [], None
    for url, storage_options, options, instant in entries:
        table = Table(url, storage_options,
                      {k: v for k, v in options.items() if k in config.OPTIONS})
        beats.append(table.heartbeats.start(instant))
        main = main or (table, instant)
    return beats, main


def _over(table: Table, instant: str) -> bool | None:
    """Whether `instant` is completed or rolled back; None when its state cannot be read
    now (a storage hiccup: check again later)."""
    try:
        return table.state(instant) not in (REQUESTED, INFLIGHT)
    except Exception as exc:
        log.warning("job host: reading the state of %s failed: %s", instant, exc)
        return None


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
                                       self.table.settings, token=self.request["token"],
                                       advertise=self.request.get("advertise"))
            answer["url"] = str(self.server.start())
            answer["token"] = self.request["token"]
        return answer

    def beat(self, entries: list[list[Any]]) -> None:
        beats, main = _start_beats(entries)
        self.beats += beats
        self.main = self.main or main

    def run(self) -> None:
        """Until stopped or done: watch the Spark driver (once it is gone, stop and keep
        the heartbeat files, so that its instants look failed), and every
        STATE_CHECK_SECONDS check what this host beats for (:meth:`_finished`)."""
        watch = int(self.request["watch_pid"])
        checked = time.monotonic()
        delete = True
        while not self.stopping.wait(0.5):
            if not process_alive(watch):
                log.warning("job host: the Spark driver (pid %d) is gone", watch)
                delete = False
                break
            if self._idle():
                break
            if time.monotonic() - checked > STATE_CHECK_SECONDS:
                checked = time.monotonic()
                if self._finished():
                    break
        self.close(delete)

    def _idle(self) -> bool:
        """Whether the host has nothing left to do (a job's host never idles)."""
        return False

    def _finished(self) -> bool:
        """Whether the job's instant is over (completed or rolled back)."""
        if self.main is None:
            return False
        table, instant = self.main
        return _over(table, instant) is True

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


class _QueryHost(_Host):
    """The host of a streaming query: beats for each batch's instants until released."""

    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__(request)
        self.folder = str(request["query_dir"])
        self.idle = float(request.get("idle_seconds") or QUERY_IDLE_SECONDS)
        self.control = os.path.join(self.folder, f"host-{os.getpid()}.sock")
        self.lock = threading.Lock()
        self.batches: dict[str, tuple[Table, list[Any]]] = {}
        self.last_active = time.monotonic()
        self.listener: socketserver.ThreadingUnixStreamServer | None = None

    def serve(self) -> dict[str, Any]:
        answer = super().serve()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.control)
        host = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    reply = host.handle(json.loads(self.rfile.readline()))
                except Exception as exc:
                    reply = {"error": f"{type(exc).__name__}: {exc}"}
                self.wfile.write((json.dumps(reply) + "\n").encode())

        self.listener = socketserver.ThreadingUnixStreamServer(self.control, Handler)
        self.listener.daemon_threads = True
        threading.Thread(target=self.listener.serve_forever, daemon=True,
                         name="markerstore-jobhost-control").start()
        answer["control"] = self.control
        record = {**answer, **{k: self.request[k] for k in
                               ("table", "serve_markers", "bind_host", "advertise",
                                "watch_pid")}, "namespace": _namespace()}
        path = os.path.join(self.folder, HOST_FILE)
        with open(os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
                  "w") as out:
            json.dump(record, out)
        os.replace(path + ".tmp", path)
        return answer

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        with self.lock:
            self.last_active = time.monotonic()
            if op == "ping":
                return {"pid": os.getpid()}
            if op == "beat":
                beats, main = _start_beats(message["beat"])
                if main is not None:
                    self.batches[main[1]] = (main[0], beats)
                return {"ok": True}
            if op == "release":
                for instant in message["instants"]:
                    self._release(instant, delete=True)
                return {"ok": True}
        raise MarkerStoreError(f"unknown request {op!r}")

    def _release(self, instant: str, delete: bool) -> None:
        """Stop the beats of the batch whose main instant is `instant` (lock held)."""
        table_beats = self.batches.pop(instant, None)
        for thread in table_beats[1] if table_beats else []:
            try:
                thread.stop(delete=delete)
            except Exception as exc:
                log.warning("job host: stopping a heartbeat of %s failed: %s", instant, exc)
        self.last_active = time.monotonic()

    def _release_finished(self) -> None:
        """Stop beating for batches someone else finished (never released here)."""
        with self.lock:
            batches = list(self.batches.items())
        for instant, (table, _) in batches:
            if _over(table, instant):
                with self.lock:
                    self._release(instant, delete=True)

    def _idle(self) -> bool:
        """No batch to beat for, and no request for `idle` seconds."""
        with self.lock:
            return not self.batches and time.monotonic() - self.last_active > self.idle

    def _finished(self) -> bool:
        """A query's host lives on: it releases the batches that are over."""
        self._release_finished()
        return False

    def close(self, delete: bool) -> None:
        path = os.path.join(self.folder, HOST_FILE)
        try:  # forget the host file first (if it still names this host)
            with open(path) as handle:
                if int(json.load(handle).get("pid", -1)) == os.getpid():
                    os.unlink(path)
        except (OSError, ValueError, AttributeError):
            pass
        if self.listener is not None:
            self.listener.shutdown()
            self.listener.server_close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.control)
        with self.lock:
            for instant in list(self.batches):
                self._release(instant, delete)
        super().close(delete)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    request = json.loads(sys.stdin.readline())
    # The host needs the core's settings only (heartbeats, storage, marker server).
    request["options"] = {k: v for k, v in request["options"].items() if k in config.OPTIONS}
    if request.get("query_dir"):
        query_main(_QueryHost(request))
        return
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


def query_main(host: _QueryHost) -> None:
    signal.signal(signal.SIGTERM, lambda *_: host.stopping.set())
    try:
        answer = host.serve()
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        host.close(True)
        raise SystemExit(1) from exc
    print(json.dumps(answer), flush=True)
    host.run()


if __name__ == "__main__":
    main()
