"""Shared fixtures: a moto S3 server over HTTP on loopback, a fault proxy, table locations,
and one SparkSession for the whole test session (local[2,4]: 2 cores, a failed task is
retried up to 4 times; no UI, few shuffle partitions). Helpers live in tests/support."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.s3 import MotoS3, S3Proxy
from tests.support.locations import Location
from tests.support.sandbox import SECRET

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3]:
    server = MotoS3().start()
    yield server
    server.stop()


@pytest.fixture
def s3_bucket(moto_s3: MotoS3) -> str:
    return moto_s3.create_bucket(f"test-{uuid.uuid4().hex[:12]}")


@pytest.fixture
def s3_proxy(moto_s3: MotoS3) -> Iterator[S3Proxy]:
    proxy = S3Proxy(moto_s3.endpoint).start()
    yield proxy
    proxy.stop()


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def location(request: pytest.FixtureRequest, tmp_path: Any) -> Location:
    """A fresh table location on local disk, memory:// and S3 (moto over HTTP)."""
    kind = request.param
    if kind == "local":
        return Location(kind, str(tmp_path / "table"))
    if kind == "memory":
        return Location(kind, f"memory://test-{uuid.uuid4().hex[:12]}/table")
    moto: MotoS3 = request.getfixturevalue("moto_s3")
    bucket = moto.create_bucket(f"test-{uuid.uuid4().hex[:12]}")
    return Location(kind, f"s3://{bucket}/table", moto.storage_options())


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Any) -> Location:
    """A table location on local disk or S3 (moto over HTTP); not memory://, which
    executors (other processes) cannot see."""
    if request.param == "local":
        return Location("local", str(tmp_path / "table"))
    moto: MotoS3 = request.getfixturevalue("moto_s3")
    bucket = moto.create_bucket(f"spark-{uuid.uuid4().hex[:12]}")
    return Location("s3", f"s3://{bucket}/table", moto.storage_options())


@pytest.fixture
def local_where(tmp_path: Any) -> Location:
    """A local table only: for Spark-level behaviour the commit tests already check on S3."""
    return Location("local", str(tmp_path / "table"))


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


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local Spark Connect server (its own JVM, local[2]), started by the first test
    that asks for it and shared by the rest of the session."""
    from tests.support.connect import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("connect")).start()
    yield server
    server.stop()


@contextlib.contextmanager
def connect_mode() -> Iterator[None]:
    """PySpark's Connect mode for this process while the block runs. Creating a Connect
    session turns it on for good (SPARK_CONNECT_MODE_ENABLED), and then pyspark's
    functions and builder act for Connect; the classic `spark` session of the other tests
    needs it off again."""
    before = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before


@pytest.fixture(scope="session")
def connect_client(connect_server: Any) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    with connect_mode():
        session = SparkSession.builder.remote(connect_server.url).create()
    yield session
    with connect_mode():
        session.stop()


@pytest.fixture
def connect(connect_client: Any) -> Iterator[Any]:
    """A Spark Connect client session of `connect_server` (no JVM in this process), in
    Connect mode for the test."""
    with connect_mode():
        yield connect_client


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file outside every table that the SQL sandboxes must never read."""
    path = tmp_path / "secret.csv"
    path.write_text(f"name\n{SECRET}\n")
    return path


# `make test` runs the suite on two pytest-xdist workers (`--dist loadgroup`): each worker
# has its own Spark session and moto server, and tests are handed out one by one. What
# shares an expensive fixture beyond one test runs on one worker: the cluster of hosts
# (network namespaces with fixed names), the Spark Connect server, the browser, and each
# file with a module-scoped fixture.
SHARED_FIXTURES = {"connect_server": "connect", "browser": "browser"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _xdist_group(item: pytest.Item) -> str | None:
    path = Path(str(item.path))
    if "cluster" in path.parts:
        return "cluster"
    closure = getattr(item, "fixturenames", ())
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in closure:
            return group
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope == "module" for defs_ in defs.values() for d in defs_):
        return path.name
    return None
