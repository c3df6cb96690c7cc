"""Direct markers on local disk, memory:// and S3 (moto over HTTP): one suite for all."""

from __future__ import annotations

import json

import pytest

from markerstore import IOType, Table
from markerstore.errors import InvalidMarkerError, MarkerTypeError, TimelineError
from markerstore.markers import MARKER_TYPE_FILE, MarkerName, read_marker_type
from tests.support.locations import Location


def open_table(location: Location) -> Table:
    return Table(location.url, location.storage_options)


def test_create_list_has_and_duplicate(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    assert markers.exists()  # MARKERS.type is written when the markers are opened
    assert markers.create("day=1", "a.parquet", IOType.CREATE) is True
    assert markers.create("day=1", "a.parquet", "CREATE") is False  # duplicate: not an error
    assert markers.create_if_not_exists("day=1", "a.parquet", "CREATE") is False
    assert markers.create("day=1", "b.parquet", "merge") is True
    assert markers.create("", "c.parquet", "APPEND") is True
    assert markers.create("day=1/hour=2", "d.parquet") is True
    assert markers.all() == sorted([
        "day=1/a.parquet.marker.CREATE", "day=1/b.parquet.marker.MERGE",
        "c.parquet.marker.APPEND", "day=1/hour=2/d.parquet.marker.CREATE"])
    assert markers.has("day=1", "a.parquet", "CREATE")
    assert not markers.has("day=1", "a.parquet", "MERGE")
    assert markers.created_and_merged_paths() == {
        "day=1/a.parquet", "day=1/b.parquet", "day=1/hour=2/d.parquet"}
    assert read_marker_type(table.storage, instant) == "DIRECT"


def test_delete_all(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    for i in range(5):
        markers.create("p=1", f"f{i}.parquet")
    assert markers.delete_all() is True
    assert not markers.exists()
    assert markers.delete_all() is False
    assert read_marker_type(table.storage, instant) is None


@pytest.mark.parametrize(("partition", "file_name", "io_type", "fragment"), [
    ("../up", "f.parquet", "CREATE", "'..'"),
    ("a/../../b", "f.parquet", "CREATE", "'..'"),
    ("/abs/path", "f.parquet", "CREATE", "absolute"),
    ("s3://bucket/x", "f.parquet", "CREATE", "absolute"),
    ("a//b", "f.parquet", "CREATE", "empty"),
    ("p", "dir/f.parquet", "CREATE", "separator"),
    ("p", "..", "CREATE", "'..'"),
    ("p", "", "CREATE", "non-empty"),
    ("p", "x.marker.CREATE", "CREATE", ".marker."),
    ("p", "f.parquet", "DELETE", "unknown IO type"),
    ("p", "f\nx", "CREATE", "control"),
])
def test_bad_marker_names(partition: str, file_name: str, io_type: str, fragment: str) -> None:
    table = Table("memory://bad-names/t")
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    with pytest.raises(InvalidMarkerError) as info:
        markers.create(partition, file_name, io_type)
    assert fragment in str(info.value)
    assert markers.all() == []


def test_marker_name_round_trip() -> None:
    marker = MarkerName.parse("a=1/b=2/x_1-2-0_20260101000000000.parquet.marker.MERGE")
    assert (marker.partition, marker.file_name, marker.io_type) == (
        "a=1/b=2", "x_1-2-0_20260101000000000.parquet", IOType.MERGE)
    assert marker.name == "a=1/b=2/x_1-2-0_20260101000000000.parquet.marker.MERGE"
    assert marker.data_path == "a=1/b=2/x_1-2-0_20260101000000000.parquet"
    with pytest.raises(InvalidMarkerError, match="not a marker name"):
        MarkerName.parse("a=1/f.parquet")


def test_missing_or_empty_marker_type_is_a_named_error(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    markers.create("p", "f.parquet")
    type_file = table.storage.path(".markerstore/markers", instant, MARKER_TYPE_FILE)
    table.storage.put(type_file, b"")
    with pytest.raises(MarkerTypeError, match="empty"):
        markers.all()
    table.storage.delete(type_file)
    with pytest.raises(MarkerTypeError, match="missing"):
        markers.all()
    # Rollback must not turn into a silent no-op either.
    with pytest.raises(MarkerTypeError, match="missing"):
        table.rollback(instant, force=True)
    table.storage.put(type_file, json.dumps({"type": "DIRECT", "version": 1}).encode())
    assert markers.all() == ["p/f.parquet.marker.CREATE"]


def test_marker_type_mismatch_and_unknown_mechanism() -> None:
    table = Table("memory://mechanisms/t")
    instant = table.start_commit(heartbeat=False)
    table.markers(instant)
    type_file = table.storage.path(".markerstore/markers", instant, MARKER_TYPE_FILE)
    table.storage.put(type_file, b'{"type": "BATCHED", "version": 1}')
    with pytest.raises(MarkerTypeError, match="BATCHED, not DIRECT"):
        table.markers(instant)
    table.storage.put(type_file, b"SOMETHING_ELSE")
    with pytest.raises(MarkerTypeError, match="unknown marker mechanism"):
        read_marker_type(table.storage, instant)
    table.storage.put(type_file, b'{"type": "DIRECT", "version": 99}')
    with pytest.raises(MarkerTypeError, match="version 99"):
        read_marker_type(table.storage, instant)


def test_markers_only_for_inflight_instants() -> None:
    table = Table("memory://inflight-only/t")
    instant = table.start_commit(heartbeat=False)
    table.commit(instant, [])
    with pytest.raises(TimelineError, match="completed"):
        table.markers(instant)


def test_create_many_answers_each_marker_in_order(location: Location) -> None:
    table = open_table(location)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    markers.create("day=1", "a.parquet")
    answers = markers.create_many([
        ("day=1", "a.parquet"),                       # existed
        ("day=2", "b.parquet", "MERGE"),
        {"partition": "day=3", "file": "c.parquet", "size": 7},
        ("day=2", "b.parquet", "MERGE"),              # the same marker twice in one call
    ] + [("day=4", f"f{i}.parquet") for i in range(20)])
    assert answers[:2] == [False, True] and answers[2] is True and answers[3] is False
    assert answers[4:] == [True] * 20
    assert len(markers.all()) == 23
    with pytest.raises(InvalidMarkerError, match="file"):
        markers.create_many([{"partition": "p"}])
    with pytest.raises(InvalidMarkerError, match=r"\.\."):
        markers.create_many([("..", "x.parquet")])
