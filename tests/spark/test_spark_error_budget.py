"""The error budget in a real Spark write: over it, no data file and no error row remain,
the error names the counts, and `markerstore verify` finds the table consistent."""

from __future__ import annotations

from typing import Any

import pytest

import errortable
from markerstore import Table
from markerstore.audit.verify import verify_all
from markerstore.errors import ErrorBudgetExceeded
from markerstore.spark import write
from tests.support.readback import assert_records

pytestmark = pytest.mark.spark


def _df(spark: Any) -> Any:
    data = [(i if i % 50 else None, f"d{i % 3}", float(i % 7) - 1.0) for i in range(400)]
    return spark.createDataFrame(data, "id BIGINT, day STRING, amount DOUBLE").repartition(3)


def _files(url: str) -> list[str]:
    table = Table(url)
    base = table.storage.root.rstrip("/") + "/"
    return [p[len(base):] for p in table.storage.find(table.storage.root)
            if not p[len(base):].startswith(".markerstore/")]


def test_a_spark_write_over_its_budget_is_rolled_back(spark: Any, tmp_path: Any) -> None:
    url = str(tmp_path / "events")
    options = {"markerstore.write.error.table.enabled": "true",
               "markerstore.write.error.table.max_fraction": "0.05"}
    with pytest.raises(ErrorBudgetExceeded) as raised:
        write(_df(spark), url, partition_by="day", options=options, key="id",
              checks={"non_negative": "amount >= 0"})
    negative = sum(1 for i in range(400) if i % 50 and (i % 7) - 1.0 < 0)
    assert raised.value.error_records == {"check": negative, "key": 8}
    assert f"{negative + 8} of 400 rows are bad (check {negative}, key 8)" in str(raised.value)
    assert "non_negative" in str(raised.value)
    assert _files(url) == [] and _files(url + "_errors") == []
    assert errortable.read(url + "_errors").fetchall() == []
    assert all(r.consistent for r in verify_all(url)), [r.findings for r in verify_all(url)]

    options["markerstore.write.error.table.max_fraction"] = "0.2"
    result = write(_df(spark), url, partition_by="day", options=options, key="id",
                   checks={"non_negative": "amount >= 0"})
    assert result.rows_written == 400 - negative - 8
    assert_records(url, 400, instant=result.instant, rows=400 - negative - 8,
                   errors={"check": negative, "key": 8})
