"""Parquet is the default error file format: the RFC-20 Avro schema travels in each file's
metadata, Avro stays an option, and DuckDB's read_parquet reads the committed files
(local disk and S3) with no Python per row."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.parquet as pq
import pytest

import errortable
from errortable import schema as S
from errortable.reading.access import readers_for
from errortable.reading.reader import ErrorTableReader, ParquetFiles, register_errors
from errortable.writing.files import AVRO_SCHEMA_KEY
from markerstore import Table
from tests.support.errortable_writes import batch, full_write


def _files(write: Any) -> list[str]:
    return [f["path"] for f in write.commit.table.commit_metadata(write.commit.instant)["files"]]


def test_the_default_format_is_parquet_with_the_avro_schema_in_the_metadata(
        tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 2}), batch(2, {"check": 1})])
    paths = _files(write)
    assert paths and all(p.endswith(".parquet") for p in paths)
    storage = write.commit.table.storage
    for path in paths:
        meta = pq.read_schema(storage.path(path)).metadata
        assert json.loads(meta[AVRO_SCHEMA_KEY.encode()]) == S.avro_schema()
        assert meta[b"markerstore.error_instant"].decode() == write.commit.instant
    rows = errortable.query(write.commit.url, "SELECT reason, count(*) FROM errors "
                                              "GROUP BY reason ORDER BY reason").fetchall()
    assert rows == [("cast", 2), ("check", 1)]


def test_avro_stays_an_option_and_both_formats_read_together(tmp_table: Table) -> None:
    avro = full_write(tmp_table, [batch(1, {"cast": 2})],
                      {"markerstore.write.error.table.format": "avro"})
    assert all(p.endswith(".avro") for p in _files(avro))
    parquet = full_write(tmp_table, [batch(1, {"check": 3})])
    assert all(p.endswith(".parquet") for p in _files(parquet))
    rows = errortable.query(tmp_table.path, "SELECT source_instant, reason, count(*) "
                                            "FROM errors GROUP BY ALL ORDER BY 1").fetchall()
    assert rows == [(avro.instant, "cast", 2), (parquet.instant, "check", 3)]


def test_duckdb_reads_the_committed_parquet_list_directly(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 2}), batch(1, {"key": 1})])
    dataset, avro = ErrorTableReader(write.commit.table).sources_for()
    assert avro is None and isinstance(dataset, ParquetFiles)
    assert "read_parquet([" in dataset.sql() and dataset.fs is None
    assert sorted(dataset.files) == sorted(write.commit.table.storage.path(p)
                                           for p in _files(write))


@pytest.mark.s3
def test_parquet_error_files_on_s3_are_read_by_duckdb(moto_s3: Any) -> None:
    bucket = moto_s3.create_bucket("errors-on-s3")
    target = Table(f"s3://{bucket}/lake/events", moto_s3.storage_options())
    write = full_write(target, [batch(2, {"cast": 2}), batch(1, {"check": 1, "key": 1})])
    dataset, _ = ErrorTableReader(write.commit.table).sources_for()
    assert isinstance(dataset, ParquetFiles) and dataset.fs is not None
    assert all(url.startswith(f"s3://{bucket}/lake/events_errors/") for url in dataset.files)
    rows = errortable.query(target.path, "SELECT reason, count(*) FROM errors GROUP BY reason "
                                         "ORDER BY reason",
                            storage_options=moto_s3.storage_options()).fetchall()
    assert rows == [("cast", 2), ("check", 1), ("key", 1)]
    meta = errortable.query(write.commit.url, "SELECT DISTINCT error_instant, source_instant "
                                              "FROM errors",
                            storage_options=moto_s3.storage_options()).fetchall()
    assert meta == [(write.commit.instant, write.instant)]
    # A second view on the same connection: the filesystem is registered already, so the
    # files are read through pyarrow instead, with the same rows.
    con = errortable.connect(target.path, moto_s3.storage_options())
    register_errors(con, readers_for(target.path, moto_s3.storage_options()), "again")
    assert con.sql("SELECT count(*) FROM again").fetchall() == [(4,)]
    assert con.sql("SELECT count(*) FROM errors").fetchall() == [(4,)]
