"""The data source's own surface: registration, options, fail-if-exists, what Spark refuses.
(The failure tests it shares with markerstore.spark.write are in test_spark_writer.py.)"""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

import markerstore.spark as ms
from markerstore import Table
from markerstore.errors import ConfigError
from markerstore.spark.source import parse_options
from tests.support.commit_checks import assert_clean, data_files, open_table

pytestmark = pytest.mark.spark


def frame(spark: Any, rows: int = 300) -> Any:
    return spark.range(0, rows, numPartitions=2).selectExpr("id", "id % 3 AS day")


def test_importing_registers_the_format_with_the_active_session(spark: Any,
                                                                tmp_path: Any) -> None:
    importlib.reload(ms)  # what `import markerstore.spark` does with a session active
    frame(spark).write.format("markerstore").mode("append").save(str(tmp_path / "t"))
    result = ms.last_commit(str(tmp_path / "t"))
    assert result is not None and result.rows_written == 300
    assert result.conflict_mode == "append"


def test_options_are_sorted_out_case_free() -> None:
    request = parse_options({
        "path": "/t", "hoodie.write.markers.type": "BATCHED",
        "spark.sql.sources.writejobuuid": "5b1e2f7c-0c0e-4c1e-9a57-3c2f6f0e9d11",
        "markerstore.write.partition_by": "day, hour", "markerstore.write.key": "id",
        "markerstore.write.check.positive": "amount > 0",
        "markerstore.storage_options": json.dumps({"anon": False}),
        "markerstore.storage_options.client_kwargs": '{"endpoint_url": "http://x"}',
        "checkpointlocation": "/ck"})
    assert request.options == {"markerstore.write.markers.type": "BATCHED",
                               "markerstore.write.uuid": "5b1e2f7c-0c0e-4c1e-9a57-3c2f6f0e9d11"}
    assert request.partition_by == ("day", "hour") and request.key == "id"
    assert request.checks == {"positive": "amount > 0"}
    assert request.storage_options == {"anon": False,
                                       "client_kwargs": {"endpoint_url": "http://x"}}
    assert request.query_id is not None and request.query_id.startswith("checkpoint-")
    with pytest.raises(ConfigError, match="did you mean markerstore.write.conflict.mode"):
        parse_options({"path": "/t", "markerstore.write.conflict.mod": "fail"})
    with pytest.raises(ConfigError, match="expected one of fail, append, replace"):
        parse_options({"path": "/t", "markerstore.write.conflict.mode": "sometimes"})
    with pytest.raises(ConfigError, match="JSON object"):
        parse_options({"path": "/t", "markerstore.storage_options": "[1]"})


def test_bad_options_fail_in_spark_before_any_work(spark: Any, tmp_path: Any) -> None:
    ms.register(spark)
    url = str(tmp_path / "t")
    with pytest.raises(Exception, match="did you mean"):
        frame(spark).write.format("markerstore").mode("append").option(
            "markerstore.write.conflict.mod", "fail").save(url)
    with pytest.raises(Exception, match="not in the DataFrame"):
        frame(spark).write.format("markerstore").mode("append").option(
            "markerstore.write.partition_by", "nope").save(url)
    assert Table(url).timeline() == []


def test_what_spark_refuses_for_python_sources(spark: Any, tmp_path: Any) -> None:
    """Documented in docs/API.md: partitionBy, and the save modes error and ignore."""
    ms.register(spark)
    url = str(tmp_path / "t")
    with pytest.raises(Exception, match="partitioning or clustering columns do not match"):
        frame(spark).write.format("markerstore").mode("append").partitionBy("day").save(url)
    for mode in ("error", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            frame(spark).write.format("markerstore").mode(mode).save(url)
    assert Table(url).timeline() == []


def test_conflict_mode_fail_refuses_an_existing_table(spark: Any, where: Any) -> None:
    """`mode("error")` for the data source: an existing table is refused, untouched."""
    ms.register(spark)
    storage = {f"markerstore.storage_options.{k}": json.dumps(v) if not isinstance(v, str)
               else v for k, v in where.storage_options.items()}
    writer = frame(spark).write.format("markerstore").mode("append").options(**storage)
    writer.option("markerstore.write.conflict.mode", "fail").save(where.url)  # new: fine
    table = open_table(where)
    before, timeline = data_files(table), table.timeline()
    with pytest.raises(Exception, match="WriteConflictError"):
        frame(spark).write.format("markerstore").mode("append").options(**storage).option(
            "markerstore.write.conflict.mode", "fail").save(where.url)
    assert data_files(table) == before and table.timeline() == timeline
    assert_clean(table)
