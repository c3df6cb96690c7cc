"""markerstore.spark.write groups partitions in Python: no JVM sort unless asked."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

import markerstore.spark as ms
from markerstore import Table, config
from markerstore.spark.writer import _grouped

pytestmark = pytest.mark.spark


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_no_jvm_sort_by_default_and_a_sort_when_asked(spark: Any) -> None:
    df = spark.range(0, 100, numPartitions=2).selectExpr("id", "id % 3 AS day")
    python = _grouped(df, ("day",), config.resolve({}))
    jvm = _grouped(df, ("day",), config.resolve({config.PARTITION_SORT: "jvm"}))
    assert "Sort" not in _plan(python)
    assert "Sort [day" in _plan(jvm)


@pytest.mark.parametrize("sort", ["python", "jvm"])
def test_interleaved_partitions_give_one_file_per_partition_and_task(
        spark: Any, tmp_path: Any, sort: str) -> None:
    rows = 20_000
    df = spark.range(0, rows, numPartitions=2).selectExpr("id", "id % 5 AS day")
    url = str(tmp_path / sort)
    result = ms.write(df, url, partition_by="day",
                      options={config.PARTITION_SORT: sort, config.MARKERS_TYPE: "direct"})
    assert result.rows_written == rows
    assert result.num_files == 10  # 5 days x 2 tasks, rows interleaved in every batch
    files = [f for f in Table(url).storage.find(url) if f.endswith(".parquet")]
    assert sum(pq.read_metadata(f).num_rows for f in files) == rows
