"""Fixtures of the format tests: a table on local disk or on S3, where S3 is moto's server
in a process of its own (delta-rs holds the interpreter while it waits on the store, so a
server thread in the test's own process would never answer it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from harness.s3 import MotoS3
from tests.support.locations import Location


@pytest.fixture(scope="session")
def moto_apart() -> Iterator[MotoS3]:
    server = MotoS3(process=True).start()
    yield server
    server.stop()


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Any) -> Location:
    """A table on local disk or on S3 (moto over HTTP, in its own process)."""
    if request.param == "local":
        return Location("local", str(tmp_path / "table"))
    moto: MotoS3 = request.getfixturevalue("moto_apart")
    bucket = moto.create_bucket(f"fmt-{uuid.uuid4().hex[:12]}")
    return Location("s3", f"s3://{bucket}/table", moto.storage_options())
