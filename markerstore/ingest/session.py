"""The Spark side of ingest on the driver: the session ingest makes when none is given, and
the progress bar of Spark's tasks drawn while the write runs.

The session's configuration is Spark's: ``spark-defaults.conf``, ``--conf`` and Spark's own
address detection decide it. Ingest adds only defaults where nothing set them, and pins
the driver to loopback only for a local master whose user set no driver address at all
(everything then runs on this host, and nothing needs to listen on the network).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from markerstore.spark.writer import is_connect

__all__ = ["default_parallelism", "is_connect", "progress_bar", "spark_session"]

DRIVER_HOST = "spark.driver.host"
# Settings ingest adds where neither the user nor Spark's defaults set them.
INGEST_DEFAULTS = {"spark.sql.session.timeZone": "UTC"}
# Ingest draws its own progress bar; Spark's console bar would garble it (and pyspark
# turns that one on for its shell, so the JVM's configuration cannot tell who set it).
CONSOLE_PROGRESS = "spark.ui.showConsoleProgress"
# What decides the driver's address besides spark.driver.host (see Spark's
# Utils.localHostName): with one of them set, Spark's own detection is the user's choice.
ADDRESS_ENV = ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")


def spark_session(master: str = "local[*]", log_level: str | None = None, *,
                  conf: Mapping[str, str] | None = None, remote: str | None = None) -> Any:
    """The Spark session ingest uses when none is given: `conf` (``--conf``) over
    ``spark-defaults.conf``; UTC where nothing else sets a time zone, no console
    progress bar unless `conf` asks for one; Spark's
    log at ERROR unless MARKERSTORE_SPARK_LOG_LEVEL says otherwise. With `remote`
    (``sc://host:port``), a Spark Connect session: the server's configuration decides,
    `conf` sets session options on it."""
    from pyspark.sql import SparkSession

    if remote:
        builder = SparkSession.builder.remote(remote)
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        return builder.getOrCreate()
    settings = _classic_settings(master, dict(conf or {}))
    builder = SparkSession.builder.master(master).appName("markerstore-ingest")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(
        log_level or os.environ.get("MARKERSTORE_SPARK_LOG_LEVEL", "ERROR"))
    return session


def _classic_settings(master: str, conf: dict[str, str]) -> dict[str, str]:
    """What the builder sets: the user's `conf`, and ingest's defaults where neither it
    nor the JVM's configuration (``spark-defaults.conf``, ``PYSPARK_SUBMIT_ARGS``) sets
    them. The JVM is launched here, with `conf`, so that what must be set at launch
    (driver memory, jars) is."""
    from pyspark import SparkConf, SparkContext

    launch = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        launch.set(key, value)
    SparkContext._ensure_initialized(conf=launch)
    loaded = SparkConf()  # the JVM's spark.* system properties: spark-defaults.conf too
    given = {key for key, _ in loaded.getAll()} | set(conf)
    python = conf.get("spark.pyspark.python") or loaded.get("spark.pyspark.python", None)
    os.environ.setdefault("PYSPARK_PYTHON", python or sys.executable)
    settings = {CONSOLE_PROGRESS: "false", **conf}
    settings.update({k: v for k, v in INGEST_DEFAULTS.items() if k not in given})
    if (master.startswith("local") and DRIVER_HOST not in given
            and not any(os.environ.get(name) for name in ADDRESS_ENV)):
        settings[DRIVER_HOST] = "127.0.0.1"
    return settings


def default_parallelism(session: Any) -> int:
    """Spark's default parallelism (the cores of the cluster, unless set). Over Spark
    Connect, without a SparkContext: the setting, or else the partitions of a range,
    which Spark cuts by it."""
    if not is_connect(session):
        return int(session.sparkContext.defaultParallelism)
    value = session.conf.get("spark.default.parallelism", None)
    if value:
        return int(value)
    from pyspark.sql import functions

    numbered = session.range(0, 1 << 16).select(functions.spark_partition_id().alias("p"))
    row = numbered.agg(functions.max("p")).first()
    return int(row[0]) + 1 if row is not None and row[0] is not None else 1


@contextlib.contextmanager
def progress_bar(session: Any, enabled: bool | None) -> Iterator[None]:
    """A progress bar of Spark's tasks on stderr while the write runs (when a terminal).
    Over Spark Connect (no status tracker) it follows the server's progress reports where
    the client has them, and is a plain timer otherwise."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield
        return
    import threading

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    stop = threading.Event()
    with Progress(TextColumn("[bold]spark[/bold] {task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} tasks"), TimeElapsedColumn(),
                  transient=True) as bar:
        task_id = bar.add_task("starting", total=None)

        def show(total: int, done: int) -> None:
            bar.update(task_id, description="writing", total=total, completed=done)

        with _follow(session, show, stop):
            yield


@contextlib.contextmanager
def _follow(session: Any, show: Any, stop: Any) -> Iterator[None]:
    """Call show(total, done) with the running stages' task counts until the block ends."""
    import threading

    if is_connect(session):
        register = getattr(session, "registerProgressHandler", None)
        if register is None:
            yield
            return

        def handler(stages: Any = (), *args: Any, **kwargs: Any) -> None:
            stages = list(stages or [])
            if stages:
                show(sum(s.num_tasks for s in stages),
                     sum(s.num_completed_tasks for s in stages))

        register(handler)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                session.removeProgressHandler(handler)
        return
    tracker = session.sparkContext.statusTracker()

    def poll() -> None:
        while not stop.wait(0.3):
            try:
                stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            except Exception:
                continue
            stages = [st for st in stages if st is not None]
            if stages:
                show(sum(st.numTasks for st in stages),
                     sum(st.numCompletedTasks for st in stages))

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
