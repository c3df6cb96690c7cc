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
import re
import socket
import sys
import urllib.parse
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from markerstore import config
from markerstore.errors import ConfigError
from markerstore.spark.writer import DRIVER_HOST, is_connect

__all__ = ["default_parallelism", "is_connect", "progress_bar", "spark_session"]

# Settings ingest adds where neither the user nor Spark's defaults set them.
INGEST_DEFAULTS = {"spark.sql.session.timeZone": "UTC"}
# Ingest draws its own progress bar; Spark's console bar would garble it (and pyspark
# turns that one on for its shell, so the JVM's configuration cannot tell who set it).
CONSOLE_PROGRESS = "spark.ui.showConsoleProgress"
# What decides the driver's address besides spark.driver.host (see Spark's
# Utils.localHostName): with one of them set, Spark's own detection is the user's choice.
ADDRESS_ENV = ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME")
MASTER = "spark.master"
CONNECT_PORT = 15002  # Spark Connect's port where the URL names none
LOCAL_MASTER = "local[*]"  # where neither --master nor Spark's configuration names one
# The driver JVM's G1 heap regions. Spark allocates a 4 MiB buffer for every job's task
# broadcast and 1 MiB ones for task results; with the 1 MiB regions G1 picks for a heap of
# 1 GiB (spark.driver.memory's default) each is a humongous object, and one allocated
# above G1's occupancy threshold starts a concurrent marking cycle: two a job, 0.1-0.2 s
# of a core each, taken from the tasks when they run in this JVM (a local master).
# Regions of 16 MiB hold them as ordinary objects. The launcher puts SPARK_SUBMIT_OPTS
# before every Java option a user sets (spark.driver.defaultJavaOptions,
# spark.driver.extraJavaOptions, --driver-java-options), and the JVM takes the last of a
# repeated -XX option: any of them decides over this one.
DRIVER_JVM_DEFAULTS = "-XX:G1HeapRegionSize=16m"
SUBMIT_OPTS = "SPARK_SUBMIT_OPTS"


def spark_session(master: str | None = None, log_level: str | None = None, *,
                  conf: Mapping[str, str] | None = None, remote: str | None = None,
                  options: Mapping[str, Any] | None = None) -> Any:
    """The Spark session ingest uses when none is given: `conf` (``--conf``) over
    ``spark-defaults.conf``; the master is `master`, else ``spark.master`` from those,
    else ``local[*]``; UTC where nothing else sets a time zone, no console
    progress bar unless `conf` asks for one; Spark's
    log at ERROR unless MARKERSTORE_SPARK_LOG_LEVEL says otherwise. With `remote`
    (``sc://host:port``), a Spark Connect session: the server's configuration decides,
    `conf` sets session options on it; the server must accept a connection within
    ``markerstore.ingest.connect.timeout_ms`` and a call it does not answer is retried
    ``markerstore.ingest.connect.retries`` times (`options`)."""
    if remote:
        return _connect_session(remote, conf or {}, options)
    from pyspark.sql import SparkSession

    master, settings = _classic_settings(master, dict(conf or {}))
    builder = SparkSession.builder.master(master).appName("markerstore-ingest")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(
        log_level or os.environ.get("MARKERSTORE_SPARK_LOG_LEVEL", "ERROR"))
    return session


def connect_address(url: str) -> tuple[str, int]:
    """The host and port of a Spark Connect URL (``sc://host[:port][/;key=value...]``,
    port 15002 by default), checked as pyspark's client reads it, without pyspark; a
    ConfigError naming what is wrong otherwise."""
    def bad(why: str) -> ConfigError:
        return ConfigError(f"--remote {url!r}: {why}; expected sc://HOST:PORT")

    if not url.startswith("sc://"):
        raise bad("not a Spark Connect URL")
    try:  # urllib refuses an unclosed or invalid [IPv6] address, and NFKC look-alikes
        parsed = urllib.parse.urlparse("http" + url[2:])
    except ValueError as exc:
        raise bad(f"not a valid address ({exc})") from None
    if parsed.path not in ("", "/"):
        raise bad(f"a path ({parsed.path!r}) where none may be")
    if parsed.params and any(p.count("=") != 1 for p in parsed.params.split(";")):
        raise bad("a parameter that is not key=value")
    if parsed.query or parsed.fragment:
        raise bad("a query or fragment where none may be")
    if not parsed.hostname:
        raise bad("no host")
    problem = _host_problem(parsed.netloc.rpartition("@")[2], parsed.hostname)
    if problem is not None:
        raise bad(problem)
    try:
        port = parsed.port
    except ValueError:
        port = 0
    if port is None:
        return parsed.hostname, CONNECT_PORT
    if not 1 <= port <= 65535:
        raise bad("the port is not a number from 1 to 65535")
    return parsed.hostname, port


def _host_problem(netloc: str, host: str) -> str | None:
    """Why the host part of a Spark Connect URL names no host one can connect to (urllib
    reads ``[::1]x`` as ``::1`` and takes any text as a name), or None."""
    if netloc.startswith("[") and not re.fullmatch(r"\[[^\]]*\](?::[^:]*)?", netloc):
        return "text after the bracketed address"
    if any(c.isspace() or not c.isprintable() for c in host):
        return "white space or a control character in the host"
    if not netloc.startswith("["):
        try:
            host.encode("idna")  # what the connection's name lookup encodes it with
        except UnicodeError:
            return "not a valid host name (a label is empty or longer than 63 characters)"
    return None


def _connect_session(remote: str, conf: Mapping[str, str],
                     options: Mapping[str, Any] | None) -> Any:
    """The Spark Connect session of `remote`: the server reached first (a connect timeout),
    then every call under a bounded retry budget (pyspark's default retries for minutes)."""
    host, port = connect_address(remote)
    settings = config.resolve(options)
    timeout = settings[config.CONNECT_TIMEOUT_MS] / 1000
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConnectionError(f"cannot reach the Spark Connect server at {host}:{port} "
                              f"({remote}): {why} (waited up to {timeout:g} s, "
                              f"{config.CONNECT_TIMEOUT_MS})") from None
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession

    # gRPC gives a connection this long to answer (its own default: 20 s)
    channel = DefaultChannelBuilder(remote, [("grpc.min_reconnect_backoff_ms",
                                              settings[config.CONNECT_TIMEOUT_MS])])
    session = SparkSession.builder.channelBuilder(channel).create()  # no call made yet
    retries = settings[config.CONNECT_RETRIES]
    session.client.set_retry_policies([DefaultPolicy(max_retries=retries,
                                                     max_backoff=int(timeout * 1000))])
    # pyspark also warns (when its retry loop is collected) of the retries it gave up:
    # the error below says it in one line.
    warnings.filterwarnings("ignore", r"\[RETRIES_EXCEEDED\]", UserWarning)
    try:
        _ = session.version  # the first call: the server speaks Spark Connect
    except Exception as exc:  # noqa: BLE001 (pyspark's and gRPC's errors alike)
        first = _first_line(exc)
        raise ConnectionError(f"the Spark Connect server at {host}:{port} ({remote}) did "
                              f"not answer after {retries} retries "
                              f"({config.CONNECT_RETRIES}): {first}") from None
    for key, value in conf.items():  # session options, under the same budget
        session.conf.set(key, value)
    return session


def _first_line(exc: BaseException) -> str:
    """What went wrong, in one line: gRPC's own text (its details) where the error or a
    cause of it has one."""
    seen: BaseException | None = exc
    while seen is not None:
        details = getattr(seen, "details", None)
        if callable(details) and details():
            return " ".join(str(details()).split())
        seen = seen.__cause__ or seen.__context__
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _classic_settings(master: str | None, conf: dict[str, str]
                      ) -> tuple[str, dict[str, str]]:
    """The master and what the builder sets: `master`, else the configured
    ``spark.master``, else ``local[*]``; the user's `conf`, and ingest's defaults where neither it
    nor the JVM's configuration (``spark-defaults.conf``, ``PYSPARK_SUBMIT_ARGS``) sets
    them. The JVM is launched here, with `conf`, so that what must be set at launch
    (driver memory, jars) is, and with ingest's JVM defaults under every option the user
    sets (DRIVER_JVM_DEFAULTS)."""
    from pyspark import SparkConf, SparkContext

    launch = SparkConf(loadDefaults=False)
    for key, value in conf.items():
        launch.set(key, value)
    with _driver_jvm_defaults():
        SparkContext._ensure_initialized(conf=launch)
    loaded = SparkConf()  # the JVM's spark.* system properties: spark-defaults.conf too
    given = {key for key, _ in loaded.getAll()} | set(conf)
    master = master or conf.get(MASTER) or loaded.get(MASTER, None) or LOCAL_MASTER
    python = conf.get("spark.pyspark.python") or loaded.get("spark.pyspark.python", None)
    os.environ.setdefault("PYSPARK_PYTHON", python or sys.executable)
    settings = {CONSOLE_PROGRESS: "false", **conf}
    settings.update({k: v for k, v in INGEST_DEFAULTS.items() if k not in given})
    if (master.startswith("local") and DRIVER_HOST not in given
            and not any(os.environ.get(name) for name in ADDRESS_ENV)):
        settings[DRIVER_HOST] = "127.0.0.1"
    return master, settings


@contextlib.contextmanager
def _driver_jvm_defaults() -> Iterator[None]:
    """SPARK_SUBMIT_OPTS with ingest's driver JVM options before the user's own, for the
    launch of the driver JVM (when this process starts one), then as it was."""
    before = os.environ.get(SUBMIT_OPTS)
    os.environ[SUBMIT_OPTS] = " ".join(filter(None, (DRIVER_JVM_DEFAULTS, before)))
    try:
        yield
    finally:
        if before is None:
            del os.environ[SUBMIT_OPTS]
        else:
            os.environ[SUBMIT_OPTS] = before


def default_parallelism(session: Any) -> int:
    """Spark's default parallelism (the cores of the cluster, unless set). Over Spark
    Connect, without a SparkContext: the setting, or else the partitions of a range,
    which Spark cuts by it."""
    if not is_connect(session):
        return int(session.sparkContext.defaultParallelism)
    value = session.conf.get("spark.default.parallelism", None)
    if value:
        return int(value)
    # Connect's own functions: pyspark.sql.functions picks Connect's by a process-wide
    # switch that a session made by a channel builder does not set
    from pyspark.sql.connect import functions

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
