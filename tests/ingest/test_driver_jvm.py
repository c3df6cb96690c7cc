"""The driver JVM that ingest launches: G1 regions of 16 MiB (Spark's 4 MiB task broadcast
buffers are then ordinary objects, not humongous ones that start a concurrent marking
cycle each job) unless the user's own Java options say otherwise, whichever way they say
it; the process's SPARK_SUBMIT_OPTS is as it was once the JVM runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Launches the driver JVM through spark_session and prints its G1 region size, whether it
# runs G1, and SPARK_SUBMIT_OPTS as the process has it afterwards.
SCRIPT = """
import json, os, sys
from markerstore.ingest.session import spark_session

conf = json.loads(sys.argv[1])
session = spark_session("local[1]", conf=conf)
jvm = session._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({"region": int(bean.getVMOption("G1HeapRegionSize").getValue()),
                  "g1": bean.getVMOption("UseG1GC").getValue(),
                  "tiered_stop": int(bean.getVMOption("TieredStopAtLevel").getValue()),
                  "submit_opts": os.environ.get("SPARK_SUBMIT_OPTS")}))
session.stop()
"""

MIB = 1 << 20
CASES = {  # name: (conf, SPARK_SUBMIT_OPTS, spark-defaults.conf, expected region)
    "other options of the user's only": ({"spark.driver.extraJavaOptions":
                                     "-XX:TieredStopAtLevel=1"}, None, "", 16 * MIB),
    "--conf extraJavaOptions": ({"spark.driver.extraJavaOptions":
                                 "-XX:G1HeapRegionSize=2m"}, None, "", 2 * MIB),
    "spark-defaults.conf": ({}, None,
                            "spark.driver.defaultJavaOptions -XX:G1HeapRegionSize=4m\n",
                            4 * MIB),
    "SPARK_SUBMIT_OPTS": ({}, "-XX:G1HeapRegionSize=8m", "", 8 * MIB),
}


def test_the_driver_jvm_gets_16_mib_regions_unless_the_user_sets_its_options(
        tmp_path: Path) -> None:
    """Each case launches its own JVM (all at once): the default where the user's options
    set other things (they still apply), the user's region size wherever it is given;
    SPARK_SUBMIT_OPTS is restored (absent, or the user's own)."""
    running = {}
    for i, (name, (conf, submit_opts, defaults, _)) in enumerate(CASES.items()):
        conf_dir = tmp_path / f"conf{i}"
        conf_dir.mkdir()
        (conf_dir / "spark-defaults.conf").write_text(defaults)
        env = {**os.environ, "SPARK_CONF_DIR": str(conf_dir),
               "PYSPARK_PYTHON": sys.executable}
        for var in ("SPARK_SUBMIT_OPTS", "PYSPARK_SUBMIT_ARGS", "JDK_JAVA_OPTIONS",
                    "JAVA_TOOL_OPTIONS"):
            env.pop(var, None)
        if submit_opts is not None:
            env["SPARK_SUBMIT_OPTS"] = submit_opts
        running[name] = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, json.dumps(conf)], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for name, process in running.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, f"{name}: {err[-3000:]}"
        seen = json.loads(out.strip().splitlines()[-1])
        conf, submit_opts, _, region = CASES[name]
        assert seen["g1"] == "true", name
        assert seen["region"] == region, name
        assert seen["submit_opts"] == submit_opts, name
        assert (seen["tiered_stop"] == 1) == ("TieredStopAtLevel" in json.dumps(conf)), name

