"""A local Spark Connect server for tests: the installed pyspark's own
``org.apache.spark.sql.connect.service.SparkConnectServer``, started through
``$SPARK_HOME/bin/spark-class`` (SparkSubmit, as Spark's ``start-connect-server.sh``
does, so ``--conf`` applies) with SPARK_HOME the pyspark package folder, on a free port of
loopback. Its Python workers run this interpreter, so they import markerstore."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness.s3 import free_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


class ConnectServer:
    """`start()` it, use `url` (``sc://127.0.0.1:PORT``), `stop()` it (by its pid)."""

    def __init__(self, folder: Path, master: str = "local[2]",
                 conf: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.master = master
        # C1 only: the tests' queries are small, and C2's compiler threads would double
        # the JVM's CPU time on a busy machine (about 30 s instead of 55 s to start).
        self.conf = {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                     "spark.sql.shuffle.partitions": "2",
                     "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
                     "spark.sql.session.timeZone": "UTC", **(conf or {})}
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "connect-server.log"

    def start(self, timeout: float = 240.0) -> ConnectServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = {**self.conf, "spark.connect.grpc.binding.port": str(self.port),
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.local.dir": str(self.folder / "local")}
        home = spark_home()
        command = [os.path.join(home, "bin", "spark-class"), "org.apache.spark.deploy.SparkSubmit",
                   "--class", SERVER_CLASS, "--master", self.master,
                   *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
                   "spark-internal"]
        env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable,
               "SPARK_CONF_DIR": str(self.folder / "conf")}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited ({self.proc.returncode}): "
                                   f"{self.log.read_text()[-2000:]}")
            if "Spark Connect server started" in self.log.read_text(errors="replace"):
                with socket.create_connection(("127.0.0.1", self.port), timeout=5):
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the Spark Connect server did not start in {timeout:.0f} s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the JVM and its workers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
