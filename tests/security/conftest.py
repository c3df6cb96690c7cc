"""Fixtures of the security tests."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.s3 import MotoS3


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def room(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A place for tables, as (URL, storage options): a local folder, or an S3 bucket
    (moto over HTTP)."""
    if request.param == "local":
        return str(tmp_path), {}
    moto: MotoS3 = request.getfixturevalue("moto_s3")
    bucket = moto.create_bucket(f"sec-{uuid.uuid4().hex[:12]}")
    return f"s3://{bucket}", moto.storage_options()
