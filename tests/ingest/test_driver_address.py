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

import pytest

from markerstore import Table
from markerstore.cli import sample
from tests.support.commit_checks import assert_clean, data_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Launches Spark's JVM as ingest does (from spark-defaults.conf alone) and shows what
# ingest would add for a cluster and a local master; runs `markerstore ingest` with the
# arguments given (after "--"), then again into a second table with executors sent to a
# marker server address where nothing listens; prints the live session's settings, the
# first commit's marker server and the second run's exit code (its error is on stderr).
SCRIPT = """
import json, sys
from pyspark.sql import SparkSession
from markerstore import Table
from markerstore.cli.main import cli
from markerstore.ingest.session import _classic_settings

def run(args):
    try:
        cli.main(args, prog_name="markerstore")
    except SystemExit as exc:
        return exc.code or 0
    return 0

added = {str(m): _classic_settings(m, {}) for m in ("spark://127.0.0.1:7077", "local[2]", None)}
args = sys.argv[2:]
first = run(args)
conf = SparkSession.getActiveSession().conf
table = Table(args[2])
meta = table.commit_metadata(table.timeline()[-1].instant)
unreachable = ["markerstore.markers.server.host=127.0.0.4",
               "markerstore.markers.client.retries=1000",
               "markerstore.markers.client.connect_timeout_ms=1500"]
second = run([*args[:2], sys.argv[1], *args[3:],
              *[a for option in unreachable for a in ("--option", option)]])
keys = ["spark.master", "spark.driver.host", "spark.sql.session.timeZone",
        "spark.sql.shuffle.partitions"]
print(json.dumps({"added": added, "conf": {k: conf.get(k, None) for k in keys},
                  "marker_server": meta.get("marker_server"), "exit": [first, second]}))
"""


def test_spark_defaults_and_conf_decide_the_session_and_an_unreachable_server_fails_fast(
        tmp_path: Path) -> None:
    """spark-defaults.conf (SPARK_CONF_DIR) sets the master, the driver's address and the
    time zone: ingest pins none of them (no --master: spark.master decides), for a
    cluster master or a local one; `--conf` wins where both set a key; the batched
    marker server listens at that driver address (127.0.0.2: none of ingest's own).
    Then executors sent where nothing listens (127.0.0.4; the server binds 127.0.0.2):
    the task gives up once the connect timeout is spent (however many retries it had
    left), the ingest fails with one line naming the address and the settings, and its
    write is rolled back."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.master local[1]\n"
        "spark.driver.host 127.0.0.3\n"
        "spark.sql.session.timeZone America/New_York\n"
        "spark.sql.shuffle.partitions 5\n"
        "spark.driver.extraJavaOptions -XX:TieredStopAtLevel=1\n"
        "spark.ui.enabled false\n")
    sample.generate(str(tmp_path / "src"), rows=500, files=1)
    url, failed = str(tmp_path / "t"), str(tmp_path / "unreachable")
    env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir), "PYSPARK_PYTHON": sys.executable}
    for name in ("SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "PYSPARK_SUBMIT_ARGS"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, failed, "ingest", str(tmp_path / "src"), url,
         "--conf", "spark.driver.host=127.0.0.2", "--no-progress",
         "--markers", "batched", "--json"],
        capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    only_progress = {"spark.ui.showConsoleProgress": "false"}
    assert seen["added"] == {"spark://127.0.0.1:7077": ["spark://127.0.0.1:7077", only_progress],
                             "local[2]": ["local[2]", only_progress],
                             "None": ["local[1]", only_progress]}  # spark-defaults' master
    assert seen["conf"] == {"spark.master": "local[1]", "spark.driver.host": "127.0.0.2",
                            "spark.sql.session.timeZone": "America/New_York",
                            "spark.sql.shuffle.partitions": "5"}
    assert seen["marker_server"].startswith("http://127.0.0.2:")
    assert data_files(Table(url))

    assert seen["exit"] == [0, 1]
    errors = [line for line in out.stderr.splitlines() if line.startswith("markerstore:")]
    assert len(errors) == 1, out.stderr[-3000:]
    message = errors[0]
    assert "rolled back" in message and "http://127.0.0.4:" in message
    assert "spark.driver.host" in message and "markerstore.markers.server.host" in message
    tried = re.search(r"\((\d+) tries in ([\d.]+) s", message)
    assert tried is not None, message
    assert 1 < int(tried[1]) < 1000 and 1.5 <= float(tried[2]) < 4.0
    table = Table(failed)
    assert [i.state for i in table.timeline()] == ["rolledback"]
    assert data_files(table) == []
    assert_clean(table)
