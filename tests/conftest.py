"""Shared fixtures: a moto S3 server over HTTP on loopback, a fault proxy, table locations."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from markerstore.testing.s3 import MotoS3, S3Proxy

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
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


@dataclass
class Location:
    """Where a test's table lives: a URL and the storage options to reach it."""

    kind: str
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def child(self, name: str) -> Location:
        return Location(self.kind, f"{self.url.rstrip('/')}/{name}", self.storage_options)


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
