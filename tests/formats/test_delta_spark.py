"""Every Spark entry publishes: the function writer and `format("markerstore")` with a
retried task (a worker killed after writing its files), then an overwrite, read back by
delta-rs row for row equal to markerstore's snapshot, one version per commit, nothing for
Delta's own cleanup to find; on local disk (Delta and Iceberg) and S3 (moto, Delta)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from markerstore import Table
from tests.support.commit_checks import data_files
from tests.support.entry_points import ENTRIES, write_with
from tests.support.formats import (
    BOTH,
    DELTA,
    assert_delta_matches,
    assert_iceberg_matches,
    vacuum_candidates,
)

pytestmark = pytest.mark.spark
pytest.importorskip("deltalake")


def _df(spark: Any, start: int, rows: int) -> Any:
    data = [(i, i % 3, f"row-{i}", float(i) / 7) for i in range(start, start + rows)]
    return spark.createDataFrame(data, "id BIGINT, day INT, payload STRING, amount DOUBLE"
                                 ).repartition(3)


@pytest.mark.parametrize("entry", ENTRIES)
def test_spark_writes_are_delta_versions(spark: Any, where: Any, entry: str) -> None:
    if entry == "format" and where.kind == "s3":
        pytest.skip("format and function share the job commit; S3 is checked with one")
    def die_once(step: str, attempt: Any, files: list[Any]) -> None:
        # The worker dies after its files are written: job commit must delete them.
        if step == "committed" and attempt.partition_id == 1 and attempt.attempt_number == 0:
            os._exit(3)

    # On local disk both formats (Iceberg's embedded catalog is a local file).
    both = where.kind != "s3"
    options = {**(BOTH if both else DELTA), "markerstore.write.target_file_size": 4000}
    write_with(entry, spark, _df(spark, 0, 600), where.url, partition_by="day",
               options=options, storage_options=where.storage_options, task_hook=die_once)
    table = Table(where.url, where.storage_options)
    assert_delta_matches(table)
    if both:
        assert_iceberg_matches(table)
    assert vacuum_candidates(table) == []  # the dead attempt left nothing
    write_with(entry, spark, _df(spark, 10_000, 90).where("day = 1"), where.url,
               partition_by="day", mode="overwrite", storage_options=where.storage_options)
    assert_delta_matches(table)
    if both:
        assert_iceberg_matches(table)
    assert len(table.completed()) == 2
    logs = ("_delta_log/", "metadata/")  # each format's own folder
    replaced = table.completed()[-1][1]["replaced_files"]  # kept for the retention (7d)
    assert replaced and [p for p in data_files(table) if not p.startswith(logs)] == sorted(
        [*table.snapshot().paths, *replaced])
