"""Fixtures for the errortable tests (helpers live in tests/support/errortable_writes.py)."""

from __future__ import annotations

from typing import Any

import pytest

from markerstore import Table


@pytest.fixture
def tmp_table(tmp_path: Any) -> Table:
    return Table(str(tmp_path / "warehouse" / "events"))
