"""No name in a table holds a control character, in Unicode's sense, not only ASCII's.

The attack: partition names with a C1 control (``\\x85``, which some tools read as a line
break), a line or paragraph separator (``\\u2028``, ``\\u2029``) or a bidirectional
override (``\\u202e``, which makes a name display backwards) were accepted, by direct
markers, by the marker server and in rows read back from the table, although
docs/SECURITY.md says no control character is. Now each is refused with one line.
"""

from __future__ import annotations

import itertools
import unicodedata
from pathlib import Path

import pyarrow as pa
import pytest

from errortable import Validator
from markerstore import CorruptTableError, MarkerClient, Table
from markerstore.commit.names import escape_value
from markerstore.errors import InvalidMarkerError
from markerstore.markers.base import BATCHED, ensure_marker_type
from markerstore.markers.segments import now_ms, rows_to_table, write_segment
from markerstore.paths import CONTROL, CONTROL_RANGES, path_problem
from markerstore.paths_arrow import bad_paths
from markerstore.server.app import MarkerServer
from tests.support.locations import Location

HOSTILE = ["\x85", "\x9f", "\x1b", "\u2028", "\u2029", "\u202e", "\u2066", "\u200f", "\u061c"]
BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def test_the_refused_characters_are_unicode_controls_separators_and_bidi_controls() -> None:
    refused = {c for a, b in CONTROL_RANGES for c in range(a, b + 1)}
    expected = {c for c in range(0x10000)  # every Cc, Zl, Zp and bidi control is in the BMP
                if unicodedata.category(chr(c)) in ("Cc", "Zl", "Zp") or c in BIDI}
    assert refused == expected
    assert CONTROL.search("emoji \u200d joiner and soft\xadhyphen") is None  # other Cf


@pytest.mark.parametrize("char", HOSTILE, ids=[f"U+{ord(c):04X}" for c in HOSTILE])
def test_a_name_holding_it_is_refused_everywhere(char: str) -> None:
    name = f"day=a{char}b"
    assert path_problem(name) is not None
    assert path_problem(f"{name}/f.parquet") is not None
    assert bad_paths(pa.array([f"{name}/f.parquet", "day=1/f.parquet"])).to_pylist() == \
        [True, False]


def test_direct_markers_refuse_it(where: Location) -> None:
    table = Table(where.url, where.storage_options)
    instant = table.start_commit(heartbeat=False)
    markers = table.markers(instant)
    for char in ("\x85", "\u2028", "\u202e"):
        with pytest.raises(InvalidMarkerError, match="control character") as caught:
            markers.create(f"day=a{char}b", "f.parquet", "CREATE")
        assert "\n" not in str(caught.value)
        with pytest.raises(InvalidMarkerError, match="control character"):
            markers.create("day=1", f"f{char}.parquet", "CREATE")
    assert markers.all() == []


def test_the_marker_server_refuses_it(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    with MarkerServer(table, options={"markerstore.write.markers.type": "batched"}) as server:
        client = MarkerClient(server.url, instant)
        for char in ("\x85", "\u2029"):
            with pytest.raises(InvalidMarkerError, match="400|control character"):
                client.create(f"day=a{char}b", "f.parquet", "CREATE")
        assert client.all() == []


def test_a_row_read_back_with_it_stops_rollback(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    rows = rows_to_table([{"partition": "day=a\u2028b", "file": "f.parquet",
                           "io_type": "CREATE", "created_at": now_ms()}])
    write_segment(table.storage, instant, rows, "parquet", itertools.count().__next__)
    with pytest.raises(CorruptTableError, match="control character"):
        table.rollback(instant, force=True)


def test_partition_values_holding_it_are_error_rows_or_escaped() -> None:
    validator = Validator(pa.schema([("id", pa.string()), ("day", pa.string())]),
                          partition_by=["day"])
    good, errors = validator.split_records([{"id": "1", "day": "a\u2028b"},
                                            {"id": "2", "day": "a\x85b"},
                                            {"id": "3", "day": "2024-01-01"}])
    assert good.num_rows == 1
    assert [e["context"]["reason"] for e in errors] == ["partition", "partition"]
    assert escape_value("a\x85b") == "a%85b"  # C1: escaped as Spark reads it back
