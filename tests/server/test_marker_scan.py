"""Lazy scans of batched markers (markerstore.markers.scan): the `markers` view and
reconcile read a snapshot of the segments, so a compaction that deletes segments under
them changes nothing."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from markerstore import MarkerClient, Table
from markerstore.markers import BATCHED, ensure_marker_type
from markerstore.markers.base import MarkerName
from markerstore.markers.scan import scan_markers
from markerstore.markers.segments import (
    delete_segments,
    list_segments,
    marker_row,
    read_segment,
    rows_to_table,
    write_segment,
)
from markerstore.server.app import MarkerServer
from markerstore.sql import connect, sandbox

Serve = Callable[..., MarkerServer]


def _segments_of(table: Table, instant: str, rows: list[dict[str, object]], per: int) -> None:
    ensure_marker_type(table.storage, instant, BATCHED)
    seq = itertools.count(1)
    for start in range(0, len(rows), per):
        write_segment(table.storage, instant, rows_to_table(rows[start:start + per]),
                      "parquet", seq.__next__)


def _compact_all(table: Table, instant: str) -> None:
    """What a compaction does: write the merged segment, then delete the ones it merged."""
    segments = list_segments(table.storage, instant)
    merged = pa.concat_tables([read_segment(table.storage, s) for s in segments])
    top = max(s.seq for s in segments)
    write_segment(table.storage, instant, merged, "parquet", itertools.count(top + 1).__next__)
    delete_segments(table.storage, segments)


def test_a_view_taken_before_a_compaction_reads_after_it(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    rows = [marker_row(MarkerName.build("d=1", f"f{i}_w.parquet", "CREATE"), {}, i)
            for i in range(300)]
    _segments_of(table, instant, rows, 100)
    con = connect(table)
    locked = connect(table)
    _compact_all(table, instant)  # the segments the views were taken from are gone
    assert len(list_segments(table.storage, instant)) == 1
    assert con.sql("SELECT count(*) FROM markers").fetchall() == [(300,)]
    assert sandbox.select(locked, "SELECT count(*), count(DISTINCT path) FROM markers"
                          ).fetchall() == [(300, 300)]
    # a view scanning the segments in place would fail here: prove they are really gone
    first = list_segments(table.storage, instant)[0]
    assert first.seq == 4


def test_the_view_merges_the_rows_of_a_marker_and_counts_it_once(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    names = [MarkerName.build("d=1", f"f{i}_w.parquet", "CREATE") for i in range(10)]
    rows = [marker_row(n, {}, 1000 + i) for i, n in enumerate(names)]
    rows.append(marker_row(names[3], {"size": 42, "checksum": "c1"}, 5000))  # details
    rows += [marker_row(n, {}, 2000) for n in names[:5]]  # a compaction that left its inputs
    _segments_of(table, instant, rows, 7)
    scan = scan_markers(table.storage, instant)
    assert scan is not None
    con = connect(table)
    assert not scan.unique(con)
    assert con.sql("SELECT count(*) FROM markers").fetchall() == [(10,)]
    assert con.sql("SELECT size, checksum, epoch_ms(created_at) FROM markers "
                   "WHERE file = 'f3_w.parquet'").fetchall() == [(42, "c1", 1003)]
    result = table.reconcile(instant, [f"d=1/{n.file_name}" for n in names[:8]])
    assert result.markers == 10
    assert result.invalid_files == ["d=1/f8_w.parquet", "d=1/f9_w.parquet"]


def test_unique_markers_are_their_own_merged_rows(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    rows = [marker_row(MarkerName.build(f"d={i % 3}", f"f{i}_w.parquet", "CREATE"),
                       {"size": i}, 10 + i) for i in range(50)]
    _segments_of(table, instant, rows, 20)
    scan = scan_markers(table.storage, instant)
    assert scan is not None
    con = connect(table)
    assert scan.unique(con)
    got = con.sql("SELECT partition, file, io_type, size, path FROM markers ORDER BY size"
                  ).fetchall()
    assert got == [(r["partition"], r["file"], "CREATE", r["size"],
                    f"{r['partition']}/{r['file']}") for r in rows]


@pytest.mark.timeout(300)
def test_view_and_reconcile_while_the_server_compacts(tmp_path: Path, serve: Serve,
                                                     http: Any) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    server = serve(table, options={"markerstore.markers.batch.max_segments": 4,
                                   "markerstore.markers.batch.interval_ms": 1})
    MarkerClient(server.url, instant).close()
    acked = [0, 0]  # markers acknowledged by each writer
    errors: list[BaseException] = []

    def write(k: int) -> None:
        client = MarkerClient(server.url, instant, initialize=False)
        try:
            for start in range(0, 6000, 100):
                client.create_many([("d=1", f"f{k}-{i}_w.parquet", "CREATE")
                                    for i in range(start, start + 100)])
                acked[k] = start + 100
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            client.close()

    writers = [threading.Thread(target=write, args=(k,)) for k in range(2)]
    for w in writers:
        w.start()
    def compactions() -> int:
        _, text = http("GET", f"{server.url}/metrics")
        prefix = 'markerstore_marker_compactions_total{result="ok"} '
        return sum(int(float(line[len(prefix):])) for line in text.splitlines()
                   if line.startswith(prefix))

    counts = []
    at_start = compactions()
    try:
        while any(w.is_alive() for w in writers):
            before = sum(acked)
            con = connect(table)
            count = con.sql("SELECT count(*) FROM markers").fetchall()[0][0]
            distinct = con.sql("SELECT count(DISTINCT path) FROM markers").fetchall()[0][0]
            assert before <= count == distinct <= 12_000
            counts.append(count)
    finally:
        for w in writers:
            w.join()
    assert not errors, errors
    assert counts == sorted(counts) and len(counts) >= 3
    assert compactions() - at_start >= 3  # segments were deleted under the queries
    # reconcile with the server still up (a compaction may still run): every loser found
    committed = [f"d=1/f{k}-{i}_w.parquet" for k in range(2) for i in range(5990)]
    result = table.reconcile(instant, committed)
    assert result.markers == 12_000
    assert result.invalid_files == sorted(f"d=1/f{k}-{i}_w.parquet" for k in range(2)
                                          for i in range(5990, 6000))
