"""A slice of the kill campaign (`make soak` runs it in full and writes
docs/RELIABILITY.md): the same code, with small counts."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import soak
from harness.s3 import MotoS3
from harness.server_kills import server_kill_campaign
from harness.spark_kills import check_table, driver_kill_campaign
from markerstore import Table


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_killed_marker_server_loses_no_acknowledged_marker(kind: str, tmp_path: Any,
                                                           request: pytest.FixtureRequest
                                                           ) -> None:
    """64 clients mixing create and create_many; the server SIGKILLed 8 times."""
    options: dict[str, Any] = {}
    url = str(tmp_path / "t")
    if kind == "s3":
        moto: MotoS3 = request.getfixturevalue("moto_s3")
        url = f"s3://{moto.create_bucket(f'soak-{uuid.uuid4().hex[:10]}')}/t"
        options = moto.storage_options()
    report = server_kill_campaign(Table(url, options), 8, clients=64, seed=7,
                                  storage_options=options, kills_per_instant=4,
                                  run_seconds=soak.RUN_SECONDS[kind])
    assert report.kills == 8 and report.instants == 2
    assert report.lost == 0, report.lost_examples
    assert report.unknown_to_fresh_server == 0 and report.recreated == 0
    assert report.acknowledged > 50
    assert report.creates > 0 and report.create_many_calls > 0


@pytest.mark.slow
@pytest.mark.campaign
@pytest.mark.spark
@pytest.mark.timeout(900)
@pytest.mark.skipif(not os.environ.get("MARKERSTORE_SOAK_SPARK"),
                    reason="two Spark driver kills take about 5 minutes on this shared "
                           "machine: `make soak-test` (MARKERSTORE_SOAK_SPARK=1) runs it, "
                           "`make soak` runs the campaign")
def test_killed_spark_driver_leaves_exactly_the_committed_rows(tmp_path: Any) -> None:
    """Two driver kills in real writes on local disk, each recovered and checked by
    Spark, DuckDB and pyarrow (and `markerstore verify` where the CLI has it)."""
    url = str(tmp_path / "events")
    report = driver_kill_campaign(url, 2, seed=5, rows=600)
    assert report.kills == 2 and report.recoveries == 2
    assert report.completed_writes == 3
    assert report.inconsistencies == 0, report.problems
    assert report.final["completed"] >= 3 and not report.final["problems"]


def test_check_table_catches_an_orphan_file(tmp_path: Any) -> None:
    """The check can fail: a data file no commit references is an inconsistency."""
    url = str(tmp_path / "events")
    table = Table(url)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [1, 2]}), sink)
    table.storage.put(table.storage.path("day=0", "orphan.parquet"), sink.getvalue().to_pybytes())
    check = check_table(url, {}, 100)
    assert any("not committed" in p for p in check["problems"])
    assert any("duckdb sees 2 rows" in p for p in check["problems"])


def test_the_report_gives_counts_and_seeds() -> None:
    from datetime import datetime, timezone

    from harness.server_kills import ServerKillReport

    figures = {"started": datetime.now(timezone.utc), "seconds": 60.0, "load_start": "1",
               "load_end": "2", "clients": 64, "drivers": [],
               "servers": [ServerKillReport("local", 13, kills=3, acknowledged=99)]}
    text = soak.markdown(figures, "make soak")
    assert "3 marker server kills, 99 acknowledged markers, 0 lost" in text
    assert "| local | 13 | 3 |" in text
