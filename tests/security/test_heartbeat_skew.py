"""A heartbeat from the future is suspect, not alive for ever.

The attack (or a wrong clock): a heartbeat file dated 10 years ahead. Its instant never
counted as failed, so recovery skipped it and a rollback needed `--force`. Now a beat
dated further ahead than markerstore.heartbeat.max_clock_skew_ms counts as expired, with
one warning naming the instant and how far ahead it is; a beat within the bound is still
a live writer's.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from markerstore import Table
from markerstore.errors import HeartbeatAliveError
from markerstore.timeline.heartbeat import HEARTBEAT_DIR
from tests.support.locations import Location

TEN_YEARS_MS = int(10 * 365.25 * 86400 * 1000)


def _beat(table: Table, instant: str, ahead_ms: int) -> None:
    payload = {"instant": instant, "ts_ms": int(time.time() * 1000) + ahead_ms,
               "host": "another-host", "pid": 4242}
    table.storage.put(table.storage.path(HEARTBEAT_DIR, instant), json.dumps(payload).encode())


def test_a_heartbeat_from_the_future_is_expired_with_a_warning(
        where: Location, caplog: pytest.LogCaptureFixture) -> None:
    table = Table(where.url, where.storage_options)
    near = table.start_commit(heartbeat=False)
    far = table.start_commit(heartbeat=False)
    _beat(table, near, 60_000)  # a minute ahead: clock skew, the writer is alive
    _beat(table, far, TEN_YEARS_MS)
    with caplog.at_level(logging.WARNING, logger="markerstore"):
        assert table.failed_instants("lazy") == [far]
        assert table.failed_instants("eager") == [far]
        table.rollback(far)  # no force needed
    said = [r.getMessage() for r in caplog.records if far in r.getMessage()]
    assert len(said) == 1, said
    assert "10.0 years ahead" in said[0] and "max_clock_skew_ms" in said[0]
    with pytest.raises(HeartbeatAliveError):
        table.rollback(near)


def test_an_instant_id_from_the_future_without_a_beat_is_not_young(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    table = Table(str(tmp_path))
    table.start_commit(heartbeat=False)  # makes the table's folders
    future = (datetime.now(timezone.utc) + timedelta(days=3650)).strftime("%Y%m%d%H%M%S%f")[:17]
    folder = tmp_path / ".markerstore" / "timeline"  # a writer that never beat, 10 years ahead
    (folder / f"{future}.commit.requested").write_text(json.dumps(
        {"instant": future, "operation": "write", "write_uuid": "w"}))
    (folder / f"{future}.inflight").write_text(json.dumps({"instant": future}))
    with caplog.at_level(logging.WARNING, logger="markerstore"):
        assert future in table.failed_instants("lazy")
    assert any(future in r.getMessage() and "ahead" in r.getMessage() for r in caplog.records)
