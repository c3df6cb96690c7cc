"""Hosts on one machine: network namespaces plugged into a private bridge.

A :class:`Network` is a switch namespace holding a bridge; each :class:`Host` is a
namespace with ``lo`` up and one veth (``eth0``) whose peer is a port of the bridge, and
one private address (``10.77.0.N/24``) that exists only inside the namespaces. Nothing is
added to the machine's own namespace: the veth pairs are created directly between the
host and the switch. Names carry a per-run prefix ``mscl<pid>x<hex>-`` so two runs cannot
clash, and a run whose process is gone is swept by the next one.

Every process a host starts is tracked and stopped by its PID (SIGTERM, then SIGKILL);
what those processes started in turn (Spark's executors and Python workers) is found with
``ip netns pids`` and stopped by PID as well, before the namespace is deleted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

from markerstore.timeline.identity import pid_alive

PREFIX = "mscl"
_NAME = re.compile(rf"^{PREFIX}(\d+)x[0-9a-f]+-")
_CLONE_NEWNET = 0x40000000
T = TypeVar("T")


def _ip(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def unavailable() -> str | None:
    """Why namespaces cannot be built here (one line), or None when they can."""
    if os.geteuid() != 0:
        return "the cluster tests need root (ip netns, veth, a bridge)"
    probe = f"{PREFIX}{os.getpid()}x0-probe"
    try:
        made = _ip("netns", "add", probe, check=False)
    except FileNotFoundError:
        return "the cluster tests need iproute2's `ip` (apt-get install iproute2)"
    if made.returncode != 0:
        reason = (made.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"`ip netns add` is refused here: {reason}"
    try:
        pair = _ip("link", "add", "eth0", "netns", probe, "type", "veth", "peer", "name",
                   "eth1", "netns", probe, check=False)
        if pair.returncode != 0:
            return f"veth pairs are refused here: {pair.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def namespace_pids(namespace: str) -> list[int]:
    proc = _ip("netns", "pids", namespace, check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_pids(pids: Sequence[int], grace: float = 5.0) -> None:
    """SIGTERM each PID, then SIGKILL those still alive after `grace` seconds."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _delete_namespace(namespace: str, grace: float = 5.0) -> None:
    for _ in range(3):  # a process may fork while the first ones stop
        pids = namespace_pids(namespace)
        if not pids:
            break
        kill_pids(pids, grace)
    _ip("netns", "del", namespace, check=False)


def sweep_stale() -> list[str]:
    """Delete the namespaces of earlier runs whose owning process is gone."""
    listing = _ip("netns", "list", check=False).stdout.split("\n")
    stale = []
    for line in listing:
        name = line.split(" ")[0].strip()
        match = _NAME.match(name)
        if match and not pid_alive(int(match.group(1))):
            _delete_namespace(name, grace=1.0)
            stale.append(name)
    return stale


def in_namespace(namespace: str, fn: Callable[[], T], timeout: float = 30) -> T:
    """Run `fn` in a thread that joined `namespace`'s network (a thread's own attribute):
    the sockets it opens live there. For probes, not for library code with thread pools."""
    result: dict[str, Any] = {}

    def target() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{namespace}", os.O_RDONLY)
        try:
            if libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {namespace}")
        finally:
            os.close(fd)
        try:
            result["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name=f"netns-{namespace}")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"probe in {namespace} did not return in {timeout:.0f} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


class Proc:
    """A process a host started: its Popen, its log file, its name for messages."""

    def __init__(self, name: str, popen: subprocess.Popen[Any], log: Path,
                 handle: IO[bytes] | None) -> None:
        self.name = name
        self.popen = popen
        self.log = log
        self._handle = handle
        self.stopped = False  # stopped or killed on purpose: its exit is no failure

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        self.stopped = True
        if self.alive():
            kill_pids([self.pid], grace)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=grace)
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def kill(self) -> None:
        self.stopped = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)


class Host:
    """One namespace with one address on the bridge; processes run in it by `ip netns exec`."""

    def __init__(self, network: Network, role: str, index: int) -> None:
        self.network = network
        self.role = role
        self.namespace = f"{network.prefix}-{role}"
        self.address = f"{network.subnet}.{index}"
        self.port = f"p{index}"  # its port on the bridge, in the switch namespace
        self.folder = network.folder / role
        self.procs: list[Proc] = []

    def create(self) -> Host:
        sw = self.network.switch
        _ip("netns", "add", self.namespace)
        _ip("link", "add", "eth0", "netns", self.namespace, "type", "veth",
            "peer", "name", self.port, "netns", sw)
        _ip("-n", sw, "link", "set", self.port, "master", "br0", "up")
        _ip("-n", self.namespace, "link", "set", "lo", "up")
        _ip("-n", self.namespace, "addr", "add", f"{self.address}/24", "dev", "eth0")
        _ip("-n", self.namespace, "link", "set", "eth0", "up")
        (self.folder / "tmp").mkdir(parents=True, exist_ok=True)
        return self

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a process on this host: its own temp dir (hosts share the
        machine's disk; each gets a folder of its own as its local disk)."""
        return {**os.environ, "TMPDIR": str(self.folder / "tmp"), **(extra or {})}

    def popen(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None,
              cwd: str | None = None, **kwargs: Any) -> Proc:
        log = self.folder / f"{name}.log"
        handle = open(log, "ab")  # noqa: SIM115 (closed by Proc.stop)
        popen = subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv],
                                 env=self.env(env), cwd=cwd, stdout=kwargs.pop("stdout", handle),
                                 stderr=handle, **kwargs)
        proc = Proc(f"{self.role}/{name}", popen, log, handle)
        self.procs.append(proc)
        return proc

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None, timeout: float = 60,
            cwd: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run a command to its end; past `timeout` its process group (a Spark driver's
        JVM with it) is SIGKILLed and TimeoutExpired raised."""
        with subprocess.Popen(["ip", "netns", "exec", self.namespace, *argv],
                              env=self.env(env), cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              start_new_session=True) as popen:
            try:
                out, err = popen.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(popen.pid, signal.SIGKILL)
                out, err = popen.communicate()
                raise subprocess.TimeoutExpired(popen.args, timeout, out, err) from None
        return subprocess.CompletedProcess(popen.args, popen.returncode, out, err)

    def iptables(self, *args: str) -> None:
        proc = self.run(["iptables", "-w", *args], timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"iptables {' '.join(args)} in {self.role}: "
                               f"{proc.stderr.strip()}")

    def probe(self, fn: Callable[[], T], timeout: float = 30) -> T:
        return in_namespace(self.namespace, fn, timeout)

    def pids(self) -> list[int]:
        return namespace_pids(self.namespace)

    def destroy(self, grace: float = 5.0) -> None:
        """Stop its processes by PID, then everything left in it, then delete it."""
        for proc in reversed(self.procs):
            proc.stop(grace)
        _delete_namespace(self.namespace, grace)
        _ip("-n", self.network.switch, "link", "del", self.port, check=False)

    def pull_plug(self) -> None:
        """The host vanishes: its link goes first (no peer sees a FIN or a reset), then
        every process in it is SIGKILLed, then the namespace is deleted."""
        _ip("-n", self.network.switch, "link", "del", self.port, check=False)
        kill_pids(self.pids(), grace=0)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=30)
        self.destroy(grace=1.0)
        # Its disk goes with it (kept aside for the logs): a host added again in its
        # place starts on an empty one.
        self.folder.rename(self.folder.with_name(f"{self.role}.removed-{secrets.token_hex(2)}"))


class Network:
    """A bridge in a switch namespace; hosts are added with :meth:`add`."""

    def __init__(self, folder: Path, subnet: str = "10.77.0") -> None:
        self.prefix = f"{PREFIX}{os.getpid()}x{secrets.token_hex(2)}"
        self.switch = f"{self.prefix}-sw"
        self.subnet = subnet
        self.folder = folder
        self.hosts: dict[str, Host] = {}
        self._lock = threading.Lock()

    def start(self) -> Network:
        sweep_stale()
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        return self

    def add(self, role: str, index: int) -> Host:
        host = Host(self, role, index)
        with self._lock:
            if role in self.hosts:
                raise ValueError(f"host {role} exists")
            self.hosts[role] = host
        return host.create()

    def remove(self, role: str, pull_plug: bool = False) -> None:
        with self._lock:
            host = self.hosts.pop(role)
        if pull_plug:
            host.pull_plug()
        else:
            host.destroy()

    def close(self) -> None:
        """Stop every host's processes by PID and delete every namespace, the hosts in
        parallel; safe to repeat."""
        import concurrent.futures

        def remove(role: str) -> None:
            with contextlib.suppress(Exception):
                self.remove(role)

        roles = list(self.hosts)
        if roles:
            with concurrent.futures.ThreadPoolExecutor(len(roles)) as pool:
                list(pool.map(remove, roles))
        _delete_namespace(self.switch, grace=1.0)
