"""The driver's address is Spark's: `markerstore ingest` honours spark-defaults.conf and
`--conf` (the live session's configuration says so), its marker server listens where
Spark's driver does, and a marker server that executors cannot reach fails the write in
bounded time, with one line naming the address and the settings, rolled back."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import markerstore.spark as ms
from markerstore import Table
from markerstore.errors import WriteAbortedError
from markerstore.ingest import sample
from tests.support.commit_checks import assert_clean, data_files

pytestmark = pytest.mark.spark

# Launches Spark's JVM as ingest does (from spark-defaults.conf alone) and shows what
# ingest would add for a cluster and a local master; then runs `markerstore ingest` with
# --conf in this process and prints the live session's settings and the commit's marker
# server.
SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from markerstore import Table
from markerstore.cli.main import cli
from markerstore.ingest.session import _classic_settings
added = {m: _classic_settings(m, {}) for m in ("spark://127.0.0.1:7077", "local[1]")}
try:
    cli.main(sys.argv[1:], prog_name="markerstore")
except SystemExit as exc:
    if exc.code:
        raise
conf = SparkSession.getActiveSession().conf
table = Table(sys.argv[3])
meta = table.commit_metadata(table.timeline()[-1].instant)
keys = ["spark.driver.host", "spark.sql.session.timeZone", "spark.sql.shuffle.partitions"]
print(json.dumps({"added": added, "conf": {k: conf.get(k, None) for k in keys},
                  "marker_server": meta.get("marker_server")}))
"""


@pytest.mark.slow
def test_spark_defaults_and_conf_decide_the_session(tmp_path: Path) -> None:
    """spark-defaults.conf (SPARK_CONF_DIR) sets the driver's address and the time zone:
    ingest pins neither, for a cluster master or a local one; `--conf` wins where both set
    a key; the batched marker server listens at that driver address (127.0.0.2: none of
    ingest's own)."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.driver.host 127.0.0.3\n"
        "spark.sql.session.timeZone America/New_York\n"
        "spark.sql.shuffle.partitions 5\n"
        "spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1\n"
        "spark.ui.enabled false\n")
    sample.generate(str(tmp_path / "src"), rows=500, files=1)
    url = str(tmp_path / "t")
    env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir), "PYSPARK_PYTHON": sys.executable}
    for name in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "PYSPARK_SUBMIT_ARGS"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, "ingest", str(tmp_path / "src"), url, "--master",
         "local[1]", "--conf", "spark.driver.host=127.0.0.2", "--no-progress",
         "--markers", "batched", "--json"],
        capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    only_progress = {"spark.ui.showConsoleProgress": "false"}
    assert seen["added"] == {"spark://127.0.0.1:7077": only_progress, "local[1]": only_progress}
    assert seen["conf"] == {"spark.driver.host": "127.0.0.2",
                            "spark.sql.session.timeZone": "America/New_York",
                            "spark.sql.shuffle.partitions": "5"}
    assert seen["marker_server"].startswith("http://127.0.0.2:")
    assert data_files(Table(url))


def test_unreachable_marker_server_fails_fast_in_one_line_and_rolls_back(
        spark: Any, tmp_path: Path) -> None:
    """Executors told to reach the marker server where nothing listens (127.0.0.2; the
    server binds the driver's 127.0.0.1): each task attempt gives up once the connect
    timeout is spent (however many retries it would have left), the write fails with
    one line naming the address and the settings, and nothing of it stays."""
    url = str(tmp_path / "t")
    options = {"markerstore.write.markers.type": "batched",
               "markerstore.markers.server.host": "127.0.0.2",
               "markerstore.markers.client.retries": "1000",
               "markerstore.markers.client.connect_timeout_ms": "1500"}
    df = spark.range(0, 100, 1, 1).selectExpr("id", "id % 3 AS k")  # one task, 4 tries
    with pytest.raises(WriteAbortedError) as info:
        ms.write(df, url, options=options)
    message = str(info.value)
    tried = re.search(r"\((\d+) tries in ([\d.]+) s", message)
    assert tried is not None, message
    assert 1 < int(tried[1]) < 1000 and 1.5 <= float(tried[2]) < 4.0
    assert "\n" not in message
    assert "rolled back" in message and "http://127.0.0.2:" in message
    assert "spark.driver.host" in message and "markerstore.markers.server.host" in message
    table = Table(url)
    assert [i.state for i in table.timeline()] == ["rolledback"]
    assert data_files(table) == []
    assert_clean(table)
