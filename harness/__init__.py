"""The test harness, outside the shipped package: a moto S3 server and a fault-injecting S3
proxy (`s3`), the kill campaigns (`soak`, `server_kills`, `spark_kills`, `spark_sources`)
and the Java check of `make setup` (`javacheck`). Tests, benchmarks and the Makefile use it
from the repository's root."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping

# The folder holding `harness/`: a child process started with ``-m harness.<module>``
# finds it on its PYTHONPATH, whatever its working directory.
ROOT = pathlib.Path(__file__).resolve().parent.parent


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's environment) with the harness's folder first on
    PYTHONPATH, for a child process that imports the harness."""
    result = dict(os.environ if env is None else env)
    paths = [str(ROOT), *(p for p in result.get("PYTHONPATH", "").split(os.pathsep) if p)]
    result["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return result
