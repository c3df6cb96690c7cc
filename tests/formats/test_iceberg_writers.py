"""The real writers publish to Iceberg (beside Delta): the function writer, then an
overwrite, and `markerstore ingest` with its error table, read back by pyiceberg's scan
row for row equal to markerstore's snapshot, one snapshot per commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import markerstore.spark as ms
from markerstore import Table
from tests.support.commit_checks import NO_RETENTION, data_files
from tests.support.formats import (
    BOTH,
    ICEBERG,
    assert_delta_matches,
    assert_iceberg_matches,
    iceberg_table,
    ingest_sample,
)

pytestmark = pytest.mark.spark
pytest.importorskip("pyiceberg")
pytest.importorskip("deltalake")


def _df(spark: Any, start: int, rows: int) -> Any:
    data = [(i, i % 3, f"row-{i}", float(i) / 7) for i in range(start, start + rows)]
    return spark.createDataFrame(data, "id BIGINT, day INT, payload STRING, amount DOUBLE"
                                 ).repartition(3)


def test_the_function_writer_and_an_overwrite_are_snapshots(spark: Any, tmp_path: Path
                                                            ) -> None:
    url = str(tmp_path / "events")
    ms.write(_df(spark, 0, 600), url, partition_by="day", options=BOTH)
    table = Table(url)
    assert table.formats() == ("delta", "iceberg")
    ms.write(_df(spark, 1000, 60), url, partition_by="day")
    assert len(iceberg_table(table).snapshots()) == len(table.completed()) == 2
    assert_iceberg_matches(table)
    ms.write(_df(spark, 10_000, 90).where("day = 1"), url, partition_by="day",
             mode="overwrite", options=NO_RETENTION)  # the replaced files go at once
    assert_iceberg_matches(table)
    assert_delta_matches(table)
    assert iceberg_table(table).scan().to_arrow().num_rows == 600 + 60 - 220 + 30
    assert [p for p in data_files(table) if not p.startswith(("_delta_log/", "metadata/"))
            ] == sorted(table.snapshot().paths)


def test_the_ingest_publishes_its_table_and_error_table(spark: Any, tmp_path: Path) -> None:
    info, url = ingest_sample(spark, tmp_path, ICEBERG)
    table = Table(url)
    assert len(iceberg_table(table).snapshots()) == len(table.completed()) == 1
    assert_iceberg_matches(table)
    assert iceberg_table(table).scan().to_arrow().num_rows == info.good
    errors = Table(url + "_errors")
    assert errors.formats() == ("iceberg",)
    assert_iceberg_matches(errors)
    assert iceberg_table(errors).scan().to_arrow().num_rows == sum(info.bad.values())
