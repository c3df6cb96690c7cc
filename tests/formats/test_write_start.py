"""One rule on every entry point: a write publishes to every format of its table, or it
fails when it starts, before anything is written, in one line.

A table that publishes Delta and Iceberg, partitioned by ``day``; then, through each way
in (``markerstore.spark.write``, ``df.write.format("markerstore")``, the streaming sink,
``markerstore ingest``), a write each format would refuse: other partition columns, a
column whose type Delta cannot widen, an interval (a type neither format has). Each is
refused with TableFormatError before its instant starts: the timeline and the files are
as they were. Then writes the formats can take (a null into a column the first write
had NOT NULL, an ingest) publish, and their results say so."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

import markerstore.spark as ms
from markerstore import Table, TableFormatError
from markerstore.ingest.pipeline import ingest
from tests.formats.readback import delta_sql, iceberg
from tests.support.entry_points import format_name, format_writer

pytestmark = pytest.mark.spark
pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

BOTH = {"markerstore.table.formats": "delta,iceberg"}


def _state(table: Table) -> tuple[Any, list[str]]:
    root = table.storage.root
    files = sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)
    return table.timeline(), files


def _one_line(text: str) -> str:
    """markerstore's own message, as Spark's error quotes it."""
    line = next(x for x in str(text).splitlines() if "TableFormatError: " in x)
    return line.partition("TableFormatError: ")[2]


def test_every_entry_point_refuses_before_it_writes(spark: Any, tmp_path: Path) -> None:
    url = str(tmp_path / "events")
    ms.write(spark.range(4).selectExpr("id", "CAST(id % 2 AS INT) AS day"), url,
             partition_by="day", options=BOTH)
    table = Table(url)
    before = _state(table)

    with pytest.raises(TableFormatError, match=r"partitioned by \[\], the Delta table"):
        ms.write(spark.range(2).selectExpr("id", "1 AS day"), url, options=BOTH)
    wider = spark.range(2).selectExpr("id", "CAST(1 AS BIGINT) AS day")
    with pytest.raises(AnalysisException) as batch:
        format_writer(wider, format_name(spark), url, partition_by="day",
                      options=BOTH).save(url)
    assert "'day' is long in this write but integer in the Delta" in _one_line(str(batch.value))

    source = tmp_path / "in"
    spark.range(3).selectExpr("id", "CAST(0 AS INT) AS day").write.parquet(str(source))
    schema = spark.read.parquet(str(source)).schema
    stream = (spark.readStream.schema(schema).parquet(str(source))
              .selectExpr("id", "day", "INTERVAL '2' DAY AS wait")
              .writeStream.format(format_name(spark))
              .option("checkpointLocation", str(tmp_path / "ck"))
              .option("markerstore.write.partition_by", "day")
              .option("markerstore.table.formats", "delta,iceberg")
              .trigger(availableNow=True).start(url))
    with pytest.raises(StreamingQueryException):
        stream.awaitTermination()
    assert "'wait'" in _one_line(str(stream.exception()))

    lines = tmp_path / "lines"
    lines.mkdir()
    (lines / "a.json").write_text("".join(json.dumps({"id": 10 + i, "day": i % 2}) + "\n"
                                          for i in range(5)))
    with pytest.raises(TableFormatError, match=r"partitioned by \['id'\]"):
        ingest(str(lines), url, schema="id BIGINT, day INT", partition_by="id", spark=spark,
               markers="direct", options=BOTH, progress=False)
    assert _state(table) == before

    # What the formats take: a null where the first write had NOT NULL, an ingest.
    nulls = spark.createDataFrame([(None, 0), (7, 1)], "id BIGINT, day INT")
    result = ms.write(nulls, url, partition_by="day", options=BOTH)
    assert "pending" not in result.published, result.published
    found = delta_sql(url, "SELECT count(*) AS n FROM t WHERE id IS NULL")
    assert found.column("n").to_pylist() == [1]
    assert not iceberg(url).schema().find_field("id").required
    summary = ingest(str(lines), url, schema="id BIGINT, day INT", partition_by="day",
                     spark=spark, markers="direct", options=BOTH, progress=False).summary()
    assert summary["published"].startswith("delta v2, iceberg snapshot ")
    assert delta_sql(url, "SELECT count(*) AS n FROM t").column("n").to_pylist() == [11]
