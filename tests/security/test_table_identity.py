"""Tables are identified by a stable id, not by their absolute path: a copied or moved
table keeps its `errors` view, and a table given another table's error table says so."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import errortable
from errortable import table_sql as sql_views
from markerstore import CorruptTableError, Table
from markerstore.storage import Storage
from tests.support.errortable_writes import batch, full_write

COUNT = "SELECT count(*) FROM errors"


def error_count(url: str, options: dict[str, Any]) -> int:
    return int(sql_views(Table(url, options), COUNT).fetchall()[0][0])


def write_with_errors(url: str, options: dict[str, Any]) -> int:
    """Two writes with error rows; returns how many error rows the table has."""
    table = Table(url, options)
    full_write(table, [batch(4, {"cast": 3, "check": 2}), batch(2, {"key": 1})])
    full_write(table, [batch(3, {"cast": 2})])
    count = error_count(url, options)
    assert count == 8
    return count


def copy(room: tuple[str, dict[str, Any]], src: str, dst: str, *, move: bool = False) -> None:
    url, options = room
    storage = Storage(url, options)
    if storage.is_local:
        (shutil.move if move else shutil.copytree)(f"{url}/{src}", f"{url}/{dst}")
        return
    storage.fs.copy(storage.path(src), storage.path(dst), recursive=True)
    if move:
        storage.fs.rm(storage.path(src), recursive=True)


def test_a_copied_table_keeps_its_errors(room: tuple[str, dict[str, Any]]) -> None:
    url, options = room
    original = write_with_errors(f"{url}/w/events", options)
    copy(room, "w/events", "c/events")
    copy(room, "w/events_errors", "c/events_errors")
    assert error_count(f"{url}/c/events", options) == original
    assert error_count(f"{url}/w/events", options) == original  # and the original too
    assert errortable.read(f"{url}/c/events", options).aggregate("count(*)").fetchall()[0][0] \
        == original
    # copied without its error table: the original error table still holds its rows
    copy(room, "w/events", "d/events")
    assert error_count(f"{url}/d/events", options) == original


def test_a_moved_table_keeps_its_errors(room: tuple[str, dict[str, Any]]) -> None:
    url, options = room
    original = write_with_errors(f"{url}/w/events", options)
    copy(room, "w/events", "m/events", move=True)
    copy(room, "w/events_errors", "m/events_errors", move=True)
    assert error_count(f"{url}/m/events", options) == original
    assert Table(f"{url}/m/events", options).table_id() is not None


def test_another_tables_error_table_is_named_not_silently_empty(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_with_errors(str(tmp_path / "events"), {})
    other = Table(str(tmp_path / "other"))
    instant = other.start_commit(heartbeat=False)
    other.commit(instant, [])
    shutil.copytree(tmp_path / "events_errors", tmp_path / "other_errors")
    caplog.clear()
    assert error_count(str(tmp_path / "other"), {}) == 0
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1 and "\n" not in said[0], said
    owner = Table(str(tmp_path / "events")).table_id()
    assert re.search(rf"other_errors holds rows of table id\(s\) {owner}, not of "
                     rf".*other \(id {other.table_id()}\)", said[0]), said[0]


def test_table_ids_are_stable_and_checked(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    assert table.table_id() is None  # nothing written yet
    instant = table.start_commit(heartbeat=False)
    table.commit(instant, [])
    first = Table(str(tmp_path / "t")).table_id()
    assert first and first == table.table_id()
    Table(str(tmp_path / "t")).start_commit(heartbeat=False)
    assert Table(str(tmp_path / "t")).table_id() == first  # a later write keeps it
    (tmp_path / "t" / ".markerstore" / "table.json").write_text('{"table_id": "../x"}')
    with pytest.raises(CorruptTableError, match="table.json"):
        Table(str(tmp_path / "t")).table_id()
