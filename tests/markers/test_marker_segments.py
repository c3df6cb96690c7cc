"""Segment files: schema, encoding, naming, the DuckDB reader. (The server's compaction
planning is tested in tests/server/test_marker_compaction.py.)"""

from __future__ import annotations

import json
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from markerstore import Table
from markerstore.markers import BATCHED, MARKER_COLUMNS, ensure_marker_type
from markerstore.markers.base import MarkerName, marker_folder
from markerstore.markers.reconcile import read_markers
from markerstore.markers.segments import (
    arrow_schema_from_avro,
    avro_schema,
    decode,
    encode,
    marker_row,
    parse_segment_name,
    read_batched_table,
    rows_to_table,
    segment_name,
    write_segment,
)


def _rows(n: int, start: int = 0, partition: str = "day=1") -> pa.Table:
    return rows_to_table(
        marker_row(MarkerName.build(partition, f"f{i}_w_1.parquet", "CREATE"),
                   {"task_attempt": "t0", "size": i, "pending_upload": {"upload_id": str(i)}},
                   1_700_000_000_000 + i)
        for i in range(start, start + n))


def test_avro_schema_file_agrees_with_marker_columns() -> None:
    derived = arrow_schema_from_avro(avro_schema())
    assert derived.names == MARKER_COLUMNS.names
    assert [f.type for f in derived] == [f.type for f in MARKER_COLUMNS]
    # the key columns and created_at are required in the file; details are optional
    required = {f.name for f in derived if not f.nullable}
    assert required == {"partition", "file", "io_type", "created_at"}


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_encode_decode_round_trip(fmt: str) -> None:
    table = _rows(50)
    back = decode(encode(table, fmt), fmt)
    assert back.schema == MARKER_COLUMNS
    assert back.to_pylist() == table.to_pylist()
    assert json.loads(back.column("pending_upload")[3].as_py()) == {"upload_id": "3"}


def test_segment_names_sort_in_sequence_order() -> None:
    names = [segment_name(seq, "parquet") for seq in (1, 2, 10, 99, 100, 12345)]
    assert names == sorted(names)
    assert parse_segment_name(names[2]) == (10, "parquet")
    for other in (".segment-0000000001.parquet.abc.tmp", "segment-1.csv", "MARKERS.type",
                  "segment-.parquet", "segment-0000000001.parquet.tmp"):
        assert parse_segment_name(other) is None


@pytest.mark.parametrize("fmt", ["parquet", "avro"])
def test_reader_ignores_temporary_files_and_dedupes(location: Any, fmt: str) -> None:
    table = Table(location.url, location.storage_options)
    instant = table.start_commit(heartbeat=False)
    storage = table.storage
    ensure_marker_type(storage, instant, BATCHED)
    seq = iter(range(1, 100))
    write_segment(storage, instant, _rows(10), fmt, lambda: next(seq))
    # a compaction that wrote its merged segment but died before deleting the others
    write_segment(storage, instant, _rows(15), fmt, lambda: next(seq))
    # a partial write of a local atomic put, and some stray file: both ignored
    folder = marker_folder(storage, instant)
    storage.fs.pipe_file(f"{folder}/.segment-0000000009.{fmt}.0123.tmp", b"PAR1garbage")
    relation = read_markers(storage, instant, duckdb.connect())
    assert relation is not None
    rows = relation.to_arrow_table()
    assert rows.num_rows == 15
    assert sorted(rows.column("path").to_pylist()) == sorted(
        f"day=1/f{i}_w_1.parquet" for i in range(15))
    assert read_batched_table(storage, instant).num_rows == 15


def test_reader_fails_loudly_on_a_corrupt_segment(tmp_path: object) -> None:
    table = Table(str(tmp_path) + "/t")
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    folder = marker_folder(table.storage, instant)
    table.storage.put(f"{folder}/{segment_name(1, 'avro')}", b"not avro at all")
    with pytest.raises(Exception, match="unreadable|Avro|avro|magic"):
        read_batched_table(table.storage, instant)
