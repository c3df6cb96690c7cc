"""`markerstore ingest` and `ingest()`: sources, schemas, checks, bad input, S3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import errortable
from errortable import ErrorTables
from harness.s3 import MotoS3
from markerstore import Table
from markerstore.cli import sample
from markerstore.cli.demo import read_back
from markerstore.commit import recover
from markerstore.ingest.pipeline import ingest
from markerstore.sql import sql as sql_views
from tests.support.readback import assert_records

pytestmark = pytest.mark.spark

ARGS = ["--schema", sample.SCHEMA_DDL, "--key", sample.KEY, "--partition-by",
        sample.PARTITION_BY, "--master", "local[2]", "--no-progress",
        *[arg for name, expr in sample.CHECKS.items() for arg in ("--check", f"{name}={expr}")]]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-m", "markerstore.cli", *args], capture_output=True,
                          text=True, timeout=600, env=env)


def test_ingest_json_with_checks(spark: Any, tmp_path: Path) -> None:
    info = sample.generate(str(tmp_path / "src"), rows=6000, files=3)
    url = str(tmp_path / "events")
    result = ingest(str(tmp_path / "src"), url, schema=sample.SCHEMA_DDL, checks=sample.CHECKS,
                    key=sample.KEY, partition_by=sample.PARTITION_BY, spark=spark,
                    markers="direct", progress=False)
    bad = {k: v for k, v in info.bad.items() if v}
    assert_records(url, info.rows, instant=result.commit.instant, rows=info.good, errors=bad)
    assert read_back(Table(url), result.commit.instant, info.rows, bad) == (info.good, bad)
    # and the counts the ingest reports are those
    assert result.rows_read == info.rows and result.error_records == bad
    assert result.commit.rows_written == info.good
    assert (result.source_records, result.source_lines) == (info.rows, info.rows)
    meta = Table(url).commit_metadata(result.commit.instant)
    assert (meta["source_records"], meta["source_lines"]) == (info.rows, info.rows)
    # Three small files on the session's cores: packed into one Spark task per core.
    assert (result.source_tasks, result.spark_tasks) == (
        3, min(3, spark.sparkContext.defaultParallelism))
    table = Table(url)
    assert sql_views(table, "SELECT sum(rows) FROM files").fetchall() == [(info.good,)]
    errors = errortable.read(url + "_errors")
    parse = errors.query("e", "SELECT source_file, source_line FROM e WHERE reason = 'parse' "
                              "ORDER BY source_line LIMIT 1").fetchall()
    assert parse and parse[0][0].endswith(".json") and int(parse[0][1]) >= 1
    data = pq.read_table([f for f in table.storage.find(url) if f.endswith(".parquet")])
    assert data.num_rows == info.good
    assert data.schema.field("amount").type == pa.float64()


def test_ingest_csv_and_parquet_with_inferred_schema(spark: Any, tmp_path: Path) -> None:
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    (csv_dir / "a.csv").write_text("id,name,score\n1,a,1.5\n2,b,x\n3,c,2.5\n4,d,3\n\n5,e,\"oops\n")
    result = ingest(str(csv_dir), str(tmp_path / "t1"), schema="id BIGINT, name STRING, "
                    "score DOUBLE", spark=spark, progress=False, markers="direct")
    assert_records(str(tmp_path / "t1"), 5, rows=3, errors={"cast": 1, "parse": 1})
    assert (result.source_records, result.source_lines) == (5, 7)  # a header, a blank line
    assert result.commit.rows_written == 3
    assert sum(result.error_records.values()) == 2
    pq.write_table(pa.table({"id": [1, 2, None], "v": ["a", "b", "c"]}),
                   str(tmp_path / "in.parquet"))
    result = ingest(str(tmp_path / "in.parquet"), str(tmp_path / "t2"), key="id", spark=spark,
                    progress=False, markers="direct")
    assert_records(str(tmp_path / "t2"), 3, rows=2, errors={"key": 1})
    assert (result.source_records, result.source_lines) == (3, 0)
    assert result.commit.rows_written == 2 and result.error_records == {"key": 1}


def test_empty_source_gives_an_empty_commit(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("")
    result = ingest(str(tmp_path / "empty.json"), str(tmp_path / "t"), schema="a BIGINT",
                    spark=spark, progress=False, markers="direct")
    assert result.commit.rows_written == 0 and result.commit.num_files == 0
    assert_records(str(tmp_path / "t"), 0)
    assert (result.source_records, result.source_lines) == (0, 0)
    assert Table(str(tmp_path / "t")).state(result.commit.instant) == "completed"


@pytest.mark.parametrize(("args", "fragment"), [
    (["missing-dir"], "does not exist"),
    (["src", "--schema", "id BIGINTX"], "unknown type"),
    (["src", "--check", "bad=amount >>> 0"], "not a valid SQL boolean expression"),
    (["src", "--check", "no-expression"], "NAME=SQL_EXPR"),
    (["src", "--key", "nope"], "record key column 'nope'"),
])
def test_bad_input_fails_before_anything_is_written(tmp_path: Path, args: list[str],
                                                    fragment: str) -> None:
    sample.generate(str(tmp_path / "src"), rows=100, files=1)
    source = str(tmp_path / args[0])
    out = cli("ingest", source, str(tmp_path / "t"), *args[1:])
    assert out.returncode == 2, out.stderr
    assert fragment in out.stderr
    assert not (tmp_path / "t").exists() and not (tmp_path / "t_errors").exists()


@pytest.mark.s3
@pytest.mark.slow
def test_cli_ingest_from_and_to_s3(moto_s3: MotoS3, s3_bucket: str, tmp_path: Path) -> None:
    opts = moto_s3.storage_options()
    info = sample.generate(f"s3://{s3_bucket}/source", rows=3000, files=2,
                           storage_options=opts)
    flags = ["--storage-option", f"endpoint_url={moto_s3.endpoint}", "--storage-option",
             "key=testing", "--storage-option", "secret=testing", "--storage-option",
             "client_kwargs.region_name=us-east-1"]
    table = f"s3://{s3_bucket}/events"
    out = cli("ingest", f"s3://{s3_bucket}/source", table, *ARGS, "--json", *flags)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["rows_read"] == info.rows and summary["rows_written"] == info.good
    assert summary["storage_requests"]["total"] > 0
    assert_records(table, info.rows, storage_options=opts, rows=info.good,
                   errors={k: v for k, v in info.bad.items() if v})


@pytest.mark.slow
def test_ctrl_c_during_ingest_leaves_nothing_the_next_run_does_not_clean(tmp_path: Path
                                                                         ) -> None:
    import signal
    import time

    sample.generate(str(tmp_path / "src"), rows=200_000, files=4)
    table_url = str(tmp_path / "t")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-m", "markerstore.cli", "ingest",
                             str(tmp_path / "src"), table_url, *ARGS], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timeline = tmp_path / "t" / ".markerstore" / "timeline"
    deadline = time.time() + 300
    while time.time() < deadline and not any(timeline.glob("*.inflight")):
        time.sleep(0.2)
    assert any(timeline.glob("*.inflight")), "the ingest never started its write"
    time.sleep(2)  # let the Spark job get going
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    assert proc.returncode != 0
    table = Table(table_url)
    recover(table, error_tables=ErrorTables())  # what the next run does first
    states = {i.state for i in table.timeline()}
    assert states <= {"rolledback", "completed"}, states
    committed = {r[0] for r in sql_views(table, "SELECT path FROM files").fetchall()}
    on_disk = {table.storage.relative(p) for p in table.storage.find(table_url)
               if p.endswith(".parquet") and "/.markerstore/" not in p}
    assert on_disk == committed
