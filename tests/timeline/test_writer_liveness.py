"""Whether an inflight instant's writer is alive, across hosts and containers: a PID is
looked up only when the heartbeat comes from this boot and this PID namespace (not merely
a host of the same name); otherwise, and for older heartbeats without those fields, the
heartbeat alone decides."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from markerstore import Table
from markerstore.errors import HeartbeatAliveError
from markerstore.timeline import identity

SLOW_BEATS = {"markerstore.heartbeat.interval_ms": "600000"}  # a beat stays fresh

# In a PID namespace of its own: make the next PID `k`, fork a writer there that beats
# for the instant, print its PID (as seen inside) and stay alive.
FOREIGN_WRITER = """
import os, sys, time
with open("/proc/sys/kernel/ns_last_pid", "w") as last:
    last.write(str(int(sys.argv[3]) - 1))
child = os.fork()
if child == 0:
    from markerstore import Table
    Table(sys.argv[1], options={"markerstore.heartbeat.interval_ms": "600000"}
          ).heartbeats.beat(sys.argv[2])
    print(os.getpid(), flush=True)
    time.sleep(600)
    os._exit(0)
os.waitpid(child, 0)
"""


def _free_pid() -> int:
    """A PID no process has in this namespace (nor is likely to get during the test)."""
    with open("/proc/sys/kernel/pid_max") as handle:
        pid_max = int(handle.read())
    return next(p for p in range(pid_max - 2, pid_max // 2, -7)
                if not os.path.exists(f"/proc/{p}"))


@pytest.fixture
def foreign_writer(tmp_path: Path) -> Iterator[tuple[Table, str, int, subprocess.Popen[str]]]:
    """A live writer of an instant, in a PID namespace of its own on this host (same host
    name), whose PID there names no process here."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        pytest.skip("needs Linux and unshare(1) to make a PID namespace")
    if os.geteuid() != 0:
        pytest.skip("unshare --pid needs root here (CI runs as root)")
    table = Table(str(tmp_path / "t"), options=SLOW_BEATS)
    instant = table.start_commit(heartbeat=False)
    pid = _free_pid()
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", FOREIGN_WRITER,
         table.path, instant, str(pid)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line:
        proc.wait(timeout=30)
        assert proc.stderr is not None
        pytest.skip(f"unshare --pid was refused here: {proc.stderr.read().strip()[:200]}")
    assert int(line) == pid and not os.path.exists(f"/proc/{pid}")
    try:
        yield table, instant, pid, proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: unshare and the namespace
        proc.wait(timeout=30)


def test_a_live_writer_in_another_pid_namespace_is_alive(
        foreign_writer: tuple[Table, str, int, subprocess.Popen[str]]) -> None:
    """Same host name, a PID that means nothing here: the heartbeat decides, so the next
    writer does not roll back a live write."""
    table, instant, pid, _ = foreign_writer
    beat = table.heartbeats.read(instant)
    assert beat is not None and beat["host"] == socket.gethostname() and beat["pid"] == pid
    assert table.writer_alive(instant)
    with pytest.raises(HeartbeatAliveError):
        table.can_roll_back(instant)
    assert beat["pid_ns"] != os.stat("/proc/self/ns/pid").st_ino


def test_a_dead_writer_in_this_namespace_is_dead_a_live_one_alive(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"), options=SLOW_BEATS)
    instant = table.start_commit(heartbeat=False)
    script = ("import sys, time\nfrom markerstore import Table\n"
              "Table(sys.argv[1], options={'markerstore.heartbeat.interval_ms': '600000'})"
              ".heartbeats.beat(sys.argv[2])\nprint('beat', flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, table.path, instant],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "beat"
        assert table.writer_alive(instant)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert not table.writer_alive(instant)  # the beat is fresh, its process is gone
    assert table.can_roll_back(instant)


def test_an_older_heartbeat_without_the_namespace_is_judged_by_its_age(tmp_path: Path
                                                                      ) -> None:
    """A heartbeat from an earlier version (host and PID only) cannot say which PID
    namespace its PID belongs to: fresh, its writer counts as alive."""
    table = Table(str(tmp_path / "t"), options=SLOW_BEATS)
    instant = table.start_commit(heartbeat=False)
    beat = {"instant": instant, "ts_ms": int(time.time() * 1000),
            "host": socket.gethostname(), "pid": _free_pid()}
    table.storage.put(table.heartbeats._file(instant), json.dumps(beat).encode())
    assert identity.writer_alive(beat) is None
    assert table.writer_alive(instant)
