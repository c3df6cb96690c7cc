"""Who wrote a heartbeat (or an inflight or rollback file): a process, told apart across
hosts, containers and reboots.

A host name is not enough: the pods of a restarted StatefulSet, or Docker containers,
share one while each has its own PID namespace, so a PID read from another's file names
some unrelated process here (or none). A writer records, besides its host name (for
humans) and PID, the kernel's boot id (``/proc/sys/kernel/random/boot_id``: one per boot
of one machine), the inode of its PID namespace (``/proc/self/ns/pid``) and its process's
start time (``/proc/self/stat``: against a reused PID). Only a record from this boot and
this PID namespace says anything about its process; anything else (another host or
container, a file without those fields, a system without /proc) leaves the heartbeat alone
to decide.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Mapping
from typing import Any

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
PID_NAMESPACE = "/proc/self/ns/pid"


@functools.lru_cache(maxsize=1)
def _machine() -> tuple[str | None, int | None]:
    """This boot's id and this process's PID namespace inode (None where unknown). A
    forked child shares both, so caching them per process is right."""
    try:
        with open(BOOT_ID_FILE) as handle:
            boot_id: str | None = handle.read().strip() or None
    except OSError:
        boot_id = None
    try:
        namespace: int | None = os.stat(PID_NAMESPACE).st_ino
    except OSError:
        namespace = None
    return boot_id, namespace


def start_time(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot), or None if it is gone or this
    system has no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def writer_identity() -> dict[str, Any]:
    """This process, as a heartbeat records it."""
    boot_id, namespace = _machine()
    pid = os.getpid()
    record: dict[str, Any] = {"host": socket.gethostname(), "pid": pid}
    if boot_id is not None and namespace is not None:
        record.update(boot_id=boot_id, pid_ns=namespace, pid_start=start_time(pid))
    return record


def pid_alive(pid: int) -> bool:
    """Whether `pid` exists in this PID namespace and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def writer_alive(record: Mapping[str, Any]) -> bool | None:
    """Whether the process that wrote `record` is alive: True or False only when it ran in
    this boot and this PID namespace; None (unsure: let the heartbeat decide) otherwise."""
    boot_id, namespace = _machine()
    pid = record.get("pid")
    if (boot_id is None or namespace is None or not isinstance(pid, int)
            or isinstance(pid, bool) or record.get("boot_id") != boot_id
            or record.get("pid_ns") != namespace):
        return None
    if not pid_alive(pid):
        return False
    started = record.get("pid_start")
    return started is None or start_time(pid) == started  # else the PID was reused
