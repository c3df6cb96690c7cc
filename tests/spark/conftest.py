"""One SparkSession for the whole test session: local[2,4] (2 cores, a failed task is
retried up to 4 times), no UI, few shuffle partitions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# Shared helpers (tables, data, what readers see) live with the commit tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "commit"))

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@dataclass
class Location:
    kind: str
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2,4]")
               .appName("markerstore-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    """A table location on local disk or S3 (moto over HTTP); not memory://, which
    executors (other processes) cannot see."""
    if request.param == "local":
        return Location("local", str(tmp_path / "table"))
    moto = request.getfixturevalue("moto_s3")
    import uuid

    bucket = moto.create_bucket(f"spark-{uuid.uuid4().hex[:12]}")
    return Location("s3", f"s3://{bucket}/table", moto.storage_options())


@pytest.fixture
def local_where(tmp_path: Any) -> Location:
    """A local table only: for Spark-level behaviour the commit tests already check on S3."""
    return Location("local", str(tmp_path / "table"))
