"""A Spark standalone cluster on one machine, each part on its own host (a network
namespace, see tests/support/netns.py):

    master   10.77.0.2   Spark master (spark-class ...deploy.master.Master)
    worker1  10.77.0.3   Spark worker, 1 core, 1g
    worker2  10.77.0.4   Spark worker, 1 core, 1g
    s3       10.77.0.5   moto's S3 server (its own process)
    driver   10.77.0.6   the Spark driver (a runner), and the Spark Connect server
    client   10.77.0.7   a Spark Connect client, and the checks that read tables back

The hosts share the machine's disk (namespaces isolate the network only); each gets a
folder of its own as its temp dir. Tables live on S3, the only storage every host
reaches as on a real cluster. Readiness is probed (a port that accepts, the master's
count of live workers), never slept for; a timeout raises :class:`ClusterError` with the
tail of every log of every host.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.support.netns import Host, Network

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
SUBNET = "10.77.0"
ROLES = {"master": 2, "worker1": 3, "worker2": 4, "s3": 5, "driver": 6, "client": 7}
MASTER_PORT, MASTER_UI_PORT = 7077, 8080
S3_PORT, CONNECT_PORT = 5000, 15002
DRIVER_PORT, BLOCK_MANAGER_PORT = 7078, 7079  # fixed, so faults can spare Spark's own RPC
START_TIMEOUT = float(os.environ.get("MARKERSTORE_CLUSTER_START_TIMEOUT", "240"))
# Short-lived JVMs on a loaded 2-core machine: the client compiler only and the serial
# collector start faster and burn less CPU than the defaults.
JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WORKER_TIMEOUT_S = 20  # the master drops a worker silent this long (heartbeats every 1/4)


class ClusterError(RuntimeError):
    """A cluster step that did not finish in time: the message ends with every host's log."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def probe_port(host: Host, address: str, port: int) -> bool:
    def connect() -> bool:
        try:
            with socket.create_connection((address, port), timeout=2):
                return True
        except OSError:
            return False
    return host.probe(connect)


def http_json(host: Host, address: str, port: int, path: str) -> Any:
    def get() -> Any:
        conn = http.client.HTTPConnection(address, port, timeout=5)
        try:
            conn.request("GET", path)
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()
    return host.probe(get)


class Cluster:
    """The hosts, the Spark daemons and moto; started by :meth:`start`, gone after
    :meth:`close` (also on failure: every process by its PID, every namespace)."""

    def __init__(self, folder: Path, workers: int = 2) -> None:
        self.folder = folder
        self.network = Network(folder, SUBNET)
        self.workers = [f"worker{i + 1}" for i in range(workers)]
        self.timings: dict[str, float] = {}
        self.master_url = f"spark://{SUBNET}.{ROLES['master']}:{MASTER_PORT}"
        self.s3_endpoint = f"http://{SUBNET}.{ROLES['s3']}:{S3_PORT}"
        self.connect_url = f"sc://{SUBNET}.{ROLES['driver']}:{CONNECT_PORT}"

    # -- hosts and daemons ---------------------------------------------------------------

    def host(self, role: str) -> Host:
        return self.network.hosts[role]

    def address(self, role: str) -> str:
        return self.host(role).address

    def start(self, alongside: Callable[[], None] | None = None) -> Cluster:
        """Build the hosts, start the daemons; `alongside` runs in a thread once the
        master listens (a first driver can start while the workers do)."""
        started = time.monotonic()
        self.network.start()
        for role, index in ROLES.items():
            if role.startswith("worker") and role not in self.workers:
                continue
            self.network.add(role, index)
        self.conf_dir()
        self._start_master()
        self._start_moto()
        self.wait_for("the master's port", lambda: probe_port(
            self.host("master"), self.address("master"), MASTER_PORT))
        with concurrent.futures.ThreadPoolExecutor(len(self.workers) + 1) as pool:
            early = pool.submit(alongside) if alongside is not None else None
            list(pool.map(self.start_worker, self.workers))
            self.wait_for("moto's S3 server", lambda: probe_port(
                self.host("s3"), self.address("s3"), S3_PORT))
            self.wait_for(f"{len(self.workers)} workers registered with the master",
                          lambda: self.alive_workers() >= len(self.workers))
            self.timings["start"] = time.monotonic() - started
            if early is not None:
                early.result()
        return self

    def daemon_env(self, role: str, **extra: str) -> dict[str, str]:
        host = self.host(role)
        return {"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": host.address,
                "SPARK_CONF_DIR": str(self.folder / "conf-daemons"),
                "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(host.folder),
                "SPARK_DAEMON_JAVA_OPTS": f"{JVM_OPTS} -Dspark.worker.timeout={WORKER_TIMEOUT_S}",
                "PYSPARK_PYTHON": PYTHON, **extra}

    def _start_master(self) -> None:
        (self.folder / "conf-daemons").mkdir(exist_ok=True)
        host = self.host("master")
        host.popen("master", [str(spark_home() / "bin" / "spark-class"),
                              "org.apache.spark.deploy.master.Master",
                              "--host", host.address, "--port", str(MASTER_PORT),
                              "--webui-port", str(MASTER_UI_PORT)],
                   env=self.daemon_env("master"))

    def start_worker(self, role: str) -> None:
        host = self.host(role)
        work = host.folder / "work"
        local = host.folder / "local"
        work.mkdir(exist_ok=True)
        local.mkdir(exist_ok=True)
        host.popen("worker", [str(spark_home() / "bin" / "spark-class"),
                              "org.apache.spark.deploy.worker.Worker",
                              "--host", host.address, "--cores", "1", "--memory", "1g",
                              "--work-dir", str(work), self.master_url],
                   env=self.daemon_env(role, SPARK_LOCAL_DIRS=str(local),
                                       SPARK_WORKER_DIR=str(work)))

    def _start_moto(self) -> None:
        host = self.host("s3")
        host.popen("moto", [PYTHON, "-m", "moto.server", "-H", host.address,
                            "-p", str(S3_PORT)])

    def add_worker(self, role: str, index: int) -> Host:
        """One more worker host, started and registered."""
        host = self.network.add(role, index)
        self.workers.append(role)
        self.start_worker(role)
        self.wait_for(f"{role} registered with the master", lambda: any(
            w["host"] == host.address and w["state"] == "ALIVE"
            for w in self.master_state().get("workers", [])))
        return host

    def remove_host(self, role: str) -> None:
        """The host vanishes mid-flight: link first, then its processes, then itself."""
        if role in self.workers:
            self.workers.remove(role)
        self.network.remove(role, pull_plug=True)

    def master_state(self) -> dict[str, Any]:
        master = self.host("master")
        try:
            state = http_json(master, master.address, MASTER_UI_PORT, "/json/")
        except (OSError, ValueError, TimeoutError):
            return {}
        return state if isinstance(state, dict) else {}

    def alive_workers(self) -> int:
        return int(self.master_state().get("aliveworkers", 0))

    def applications(self, name: str | None = None) -> list[dict[str, Any]]:
        """The master's running and completed applications (optionally of one name)."""
        state = self.master_state()
        apps = [*state.get("activeapps", []), *state.get("completedapps", [])]
        return [a for a in apps if name is None or a.get("name") == name]

    # -- configuration ---------------------------------------------------------------------

    def spark_defaults(self, **extra: str) -> dict[str, str]:
        driver = self.address("driver")
        return {"spark.master": self.master_url, "spark.driver.host": driver,
                "spark.driver.port": str(DRIVER_PORT),
                "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
                "spark.blockManager.port": str(BLOCK_MANAGER_PORT),
                "spark.driver.memory": "512m", "spark.executor.memory": "512m",
                "spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.driver.extraJavaOptions": JVM_OPTS,
                "spark.executor.extraJavaOptions": JVM_OPTS,
                "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.pyspark.python": PYTHON, "spark.pyspark.driver.python": PYTHON,
                "spark.executorEnv.PYTHONPATH": str(ROOT),
                "spark.sql.shuffle.partitions": "2", "spark.sql.session.timeZone": "UTC",
                "spark.sql.execution.arrow.maxRecordsPerBatch": "500",
                "spark.connect.grpc.binding.address": driver,
                "spark.connect.grpc.binding.port": str(CONNECT_PORT), **extra}

    def conf_dir(self, name: str = "conf", **extra: str) -> Path:
        """A SPARK_CONF_DIR whose spark-defaults.conf is :meth:`spark_defaults` (+ extra)."""
        folder = self.folder / name
        folder.mkdir(exist_ok=True)
        lines = [f"{key} {value}" for key, value in sorted(self.spark_defaults(**extra).items())]
        (folder / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
        return folder

    def storage_options(self) -> dict[str, Any]:
        from harness.s3 import storage_options

        return storage_options(self.s3_endpoint)

    def run(self, role: str, argv: list[str], timeout: float,
            env: dict[str, str] | None = None) -> Any:
        """A command on a host, to its end (a CompletedProcess); past `timeout` it is
        killed and ClusterError says so, with every log's tail and the command's output."""
        import subprocess

        try:
            return self.host(role).run(argv, env=env, timeout=timeout, cwd=str(ROOT))
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"{' '.join(argv[:3])} on {role}: no end in {timeout:.0f} s "
                               f"(killed)\n--- its stderr\n{str(exc.stderr)[-3000:]}\n"
                               + self.tails()) from None

    # -- waiting, and what to say when it fails --------------------------------------------

    def wait_for(self, what: str, ready: Callable[[], bool],
                 timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            dead = [p.name for h in list(self.network.hosts.values()) for p in h.procs
                    if not p.stopped and p.popen.poll() not in (0, None)]
            if dead:
                raise ClusterError(f"waiting for {what}: {', '.join(dead)} exited\n"
                                   + self.tails())
            time.sleep(0.2)
        raise ClusterError(f"{what}: not ready after {timeout:.0f} s\n" + self.tails())

    def logs(self) -> Iterable[Path]:
        for path in sorted(self.folder.rglob("*")):
            if path.is_file() and (path.suffix == ".log" or path.name in ("stderr", "stdout")):
                yield path

    def tails(self, lines: int = 25) -> str:
        parts = []
        for path in self.logs():
            text = _tail(path, lines)
            if text.strip():
                parts.append(f"--- {path.relative_to(self.folder)} (last {lines} lines)\n{text}")
        return "\n".join(parts)

    def close(self) -> None:
        self.network.close()


class RunnerError(RuntimeError):
    """A command failed inside a runner (the runner itself goes on)."""


class Runner:
    """Test code on a cluster host: ``tests/cluster/runner.py`` under ``ip netns exec``,
    one JSON command per line in, one ``@@ {json}`` answer per line out."""

    def __init__(self, cluster: Cluster, role: str, name: str, conf_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        import queue
        import subprocess
        import threading

        self.cluster = cluster
        self.name = name
        base = {"PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": PYTHON,
                "SPARK_CONF_DIR": str(conf_dir or cluster.folder / "conf")}
        self.proc = cluster.host(role).popen(name, [PYTHON, "-u", "-m", "tests.cluster.runner"],
                                             env={**base, **(env or {})}, cwd=str(ROOT),
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._answers: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert self.proc.popen.stdout is not None
            for raw in self.proc.popen.stdout:
                line = raw.decode(errors="replace")
                if line.startswith("@@ "):
                    self._answers.put(line[3:])
            self._answers.put(None)

        threading.Thread(target=read, daemon=True, name=f"runner-{name}").start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, op: str, timeout: float = 300, **args: Any) -> Any:
        import queue

        stdin = self.proc.popen.stdin
        assert stdin is not None
        try:
            stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
            stdin.flush()
        except BrokenPipeError:
            raise ClusterError(f"runner {self.name} is gone\n" + self.cluster.tails()) from None
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise ClusterError(f"runner {self.name}: {op} gave no answer in {timeout:.0f} s\n"
                               + self.cluster.tails()) from None
        if line is None:
            raise ClusterError(f"runner {self.name} exited during {op} (exit "
                               f"{self.proc.popen.poll()})\n" + self.cluster.tails())
        answer = json.loads(line)
        if not answer["ok"]:
            raise RunnerError(f"{op}: {answer['error']}\n{answer.get('traceback', '')}")
        return answer["result"]

    def close(self, timeout: float = 60) -> None:
        import subprocess

        stdin = self.proc.popen.stdin
        if self.proc.alive() and stdin is not None and not stdin.closed:
            try:
                stdin.write(b'{"op": "quit"}\n')
                stdin.flush()
                stdin.close()
                self.proc.popen.wait(timeout=timeout)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                pass
        self.proc.stop()


def start_connect_server(cluster: Cluster, name: str = "connect") -> Any:
    """A Spark Connect server on the driver's host (SparkConnectServer through
    spark-submit, as Spark's start-connect-server.sh runs it), ready when its port
    accepts connections from the client's host."""
    host = cluster.host("driver")
    proc = host.popen(name, [str(spark_home() / "bin" / "spark-submit"), "--class",
                             "org.apache.spark.sql.connect.service.SparkConnectServer",
                             "--name", "markerstore-connect"],
                      env={"SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": PYTHON,
                           "PYTHONPATH": str(ROOT),
                           "SPARK_CONF_DIR": str(cluster.folder / "conf")})
    client = cluster.host("client")
    cluster.wait_for("the Spark Connect server", lambda: probe_port(
        client, host.address, CONNECT_PORT))
    return proc
