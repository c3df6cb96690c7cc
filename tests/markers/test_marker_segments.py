"""Segment files: schema, encoding, naming, the DuckDB reader. (The server's compaction
planning is tested in tests/server/test_marker_compaction.py.)"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from markerstore import Table
from markerstore.errors import StorageError
from markerstore.markers import BATCHED, MARKER_COLUMNS, ensure_marker_type, segments
from markerstore.markers.base import MarkerName, marker_folder
from markerstore.markers.reconcile import read_markers
from markerstore.markers.scan import scan_markers
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
from markerstore.server.service import load_segment_files


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


def _read_with_scan(storage: Any, instant: str) -> pa.Table:
    scan = scan_markers(storage, instant)
    assert scan is not None
    try:
        return scan.rows(duckdb.connect()).to_arrow_table()
    finally:
        scan.close()


def _read_as_the_server_loads(storage: Any, instant: str) -> pa.Table:
    segments, _ = load_segment_files(storage, instant)
    return pa.concat_tables(decode(s.data, s.file.fmt) for s in segments)


@pytest.mark.parametrize("reader", [read_batched_table, _read_with_scan,
                                    _read_as_the_server_loads],
                         ids=["read_batched", "scan", "server_load"])
def test_a_reader_outlasts_a_compaction_whose_deletes_land_under_it(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, reader: Any) -> None:
    """Sixteen merged segments deleted one after each listing (a slow compaction's deletes
    under a loaded machine): the reader lists again until the listing holds, and reads
    every marker. Five quick tries failed this."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    storage = table.storage
    ensure_marker_type(storage, instant, BATCHED)
    seq = iter(range(1, 100))
    merged = [write_segment(storage, instant, _rows(3, 3 * i), "parquet", lambda: next(seq))
              for i in range(16)]
    write_segment(storage, instant, _rows(48), "parquet", lambda: next(seq))
    real_list = segments.list_segments
    listings = []

    def list_then_delete_one(storage: Any, instant: str) -> list[Any]:
        listed = real_list(storage, instant)
        listings.append(listed)
        gone = [s for s in merged if s in listed]
        if gone:
            storage.delete(gone[0].path)
        return listed

    monkeypatch.setattr(segments, "list_segments", list_then_delete_one)
    monkeypatch.setattr(segments, "READ_PAUSE_MAX_S", 0.02)
    rows = reader(storage, instant)
    assert sorted(set(rows.column("file").to_pylist())) == sorted(
        f"f{i}_w_1.parquet" for i in range(48))
    assert len(listings) > 10


def test_a_listing_that_never_holds_is_an_error_after_the_wait(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    folder = marker_folder(table.storage, instant)
    seqs = itertools.count(1)

    def ghosts(storage: Any, instant: str) -> list[Any]:
        """A new segment each listing, none of them there when read."""
        seq = next(seqs)
        return [segments.SegmentFile(seq, "parquet", f"{folder}/{segment_name(seq, 'parquet')}")]

    monkeypatch.setattr(segments, "list_segments", ghosts)
    monkeypatch.setattr(segments, "READ_WAIT_S", 0.3)
    started = time.monotonic()
    with pytest.raises(StorageError, match="kept changing while being read"):
        read_batched_table(table.storage, instant)
    assert time.monotonic() - started < 5
