"""The Spark side of ingest on the driver: the session ingest makes when none is given, and
the progress bar of Spark's tasks drawn while the write runs."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def spark_session(master: str = "local[*]", log_level: str | None = None) -> Any:
    """The Spark session ingest uses when none is given: this Python in the workers, UTC,
    no console progress (ingest draws its own), Spark's log at ERROR unless
    MARKERSTORE_SPARK_LOG_LEVEL says otherwise."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (SparkSession.builder.master(master).appName("markerstore-ingest")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.host", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
               .getOrCreate())
    session.sparkContext.setLogLevel(
        log_level or os.environ.get("MARKERSTORE_SPARK_LOG_LEVEL", "ERROR"))
    return session


@contextlib.contextmanager
def progress_bar(session: Any, enabled: bool | None) -> Iterator[None]:
    """A progress bar of Spark's tasks on stderr while the write runs (when a terminal)."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield
        return
    import threading

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    tracker = session.sparkContext.statusTracker()
    stop = threading.Event()
    with Progress(TextColumn("[bold]spark[/bold] {task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} tasks"), TimeElapsedColumn(),
                  transient=True) as bar:
        task_id = bar.add_task("starting", total=None)

        def poll() -> None:
            while not stop.wait(0.3):
                try:
                    stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
                except Exception:
                    continue
                stages = [st for st in stages if st is not None]
                if stages:
                    total = sum(st.numTasks for st in stages)
                    done = sum(st.numCompletedTasks for st in stages)
                    bar.update(task_id, description="writing", total=total, completed=done)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=2)
