"""`markerstore ingest` and the streaming sink publish too: the ingest's commit and its
error table's, and one Delta version per micro-batch, read back by delta-rs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from markerstore import Table
from tests.spark.test_spark_stream import input_files
from tests.support.entry_points import format_name
from tests.support.formats import (
    DELTA,
    assert_delta_matches,
    assert_iceberg_matches,
    delta_table,
    iceberg_table,
    ingest_sample,
)

pytestmark = pytest.mark.spark
pytest.importorskip("deltalake")


def test_the_ingest_publishes_its_table_and_error_table(spark: Any, tmp_path: Path) -> None:
    info, url = ingest_sample(spark, tmp_path, DELTA)
    table = Table(url)
    assert_delta_matches(table)
    assert delta_table(table).to_pyarrow_table().num_rows == info.good
    errors = Table(url + "_errors")
    assert_delta_matches(errors)
    assert delta_table(errors).to_pyarrow_table().num_rows == sum(info.bad.values())


def test_each_micro_batch_is_one_delta_version_and_iceberg_snapshot(spark: Any,
                                                                   tmp_path: Path) -> None:
    good, _ = input_files(tmp_path / "in", 3, 200)
    url = str(tmp_path / "table")
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(
        str(tmp_path / "in")).where("id IS NOT NULL")
    query = (stream.writeStream.format(format_name(spark))
             .option("checkpointLocation", str(tmp_path / "ck"))
             .option("markerstore.write.partition_by", "day")
             .option("markerstore.table.formats", "delta,iceberg")
             .trigger(availableNow=True).start(url))
    query.awaitTermination()
    assert query.exception() is None
    table = Table(url)
    assert len(table.completed()) == 3
    assert_delta_matches(table)
    assert_iceberg_matches(table)
    ids = delta_table(table).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == sorted(good)
    assert sorted(iceberg_table(table).scan().to_arrow().column("id").to_pylist()) == sorted(
        good)
