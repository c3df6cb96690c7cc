"""The error table in a Spark write: bad rows are captured, committed with the data, and
a retried task leaves no duplicate error rows."""

from __future__ import annotations

import os
from typing import Any

import pytest

import errortable
from errortable import table_sql
from markerstore import Table
from markerstore.audit import build as build_report
from markerstore.errors import WriteAbortedError
from markerstore.spark import write
from markerstore.sql import sql as sql_views
from tests.support.entry_points import ENTRIES, write_with
from tests.support.readback import assert_records

pytestmark = pytest.mark.spark

ENABLED = {"markerstore.write.error.table.enabled": "true"}


def _df(spark: Any, rows: int = 400) -> Any:
    data = [(i if i % 50 else None, f"d{i % 3}", float(i % 7) - 1.0) for i in range(rows)]
    return spark.createDataFrame(data, "id BIGINT, day STRING, amount DOUBLE").repartition(3)


@pytest.mark.parametrize("entry", ENTRIES)
def test_bad_rows_go_to_the_error_table_with_the_commit(spark: Any, tmp_path: Any,
                                                        entry: str) -> None:
    url = str(tmp_path / "events")
    df = _df(spark)
    result = write_with(entry, spark, df, url, partition_by="day", options=ENABLED, key="id",
                        checks={"non_negative": "amount >= 0", "has_day": "day IS NOT NULL"})
    null_keys = 400 // 50
    negative = sum(1 for i in range(400) if i % 50 and (i % 7) - 1.0 < 0)
    assert_records(url, 400, rows=400 - null_keys - negative,
                   errors={"key": null_keys, "check": negative})
    assert result.error_records == {"key": null_keys, "check": negative}
    assert result.rows_written == 400 - null_keys - negative
    errors = errortable.read(url + "_errors")
    by_reason = dict(errors.query("e", "SELECT reason, count(*) FROM e GROUP BY 1").fetchall())
    assert by_reason == {"key": null_keys, "check": negative}
    table = Table(url)
    assert sql_views(table, "SELECT sum(rows) FROM files").fetchall() == [(result.rows_written,)]
    assert table_sql(table, "SELECT count(*) FROM errors").fetchall() == [(null_keys + negative,)]
    # The commit names the checks it applied: the report rates the one that never failed too.
    assert table.completed()[-1][1]["checks"] == ["has_day", "non_negative"]
    checks = {c["check"]: c for c in build_report(table).to_dict()["quality"]["checks"]}
    assert (checks["has_day"]["failed"], checks["has_day"]["pass_rate"]) == (0, 1.0)
    assert checks["non_negative"]["failed"] == negative
    assert checks["non_negative"]["pass_rate"] == round(1 - negative / 400, 6)


@pytest.mark.parametrize("entry", ENTRIES)
def test_retried_task_leaves_no_duplicate_error_rows(spark: Any, tmp_path: Any,
                                                     entry: str) -> None:
    url = str(tmp_path / "events")
    df = _df(spark)

    def fail_first_attempt(step: str, attempt: Any, files: list[Any]) -> None:
        # The worker dies after its data and error files are written: nothing is cleaned
        # up by the task; job commit must delete that attempt's files.
        if step == "committed" and attempt.partition_id == 1 and attempt.attempt_number == 0:
            os._exit(3)

    result = write_with(entry, spark, df, url, options=ENABLED, key="id",
                        task_hook=fail_first_attempt)
    assert result.error_records == {"key": 8}
    rows = errortable.read(url + "_errors").query("e", "SELECT count(*), count(DISTINCT uid) "
                                                       "FROM e").fetchall()
    assert rows == [(8, 8)]


def test_failed_write_leaves_no_visible_error_rows(spark: Any, tmp_path: Any) -> None:
    url = str(tmp_path / "events")

    def always_fail(step: str, attempt: Any, files: list[Any]) -> None:
        if step == "committed":
            raise RuntimeError("injected failure")

    with pytest.raises(WriteAbortedError):
        write(_df(spark), url, options=ENABLED, key="id", _task_hook=always_fail)
    assert errortable.read(url + "_errors").query("e", "SELECT count(*) FROM e"
                                                  ).fetchall() == [(0,)]
