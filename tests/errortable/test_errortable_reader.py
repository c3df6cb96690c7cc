"""Reading committed rows: the errors view, corrupt files, notebooks."""

from __future__ import annotations

import pathlib

import pyarrow as pa
import pytest

import errortable
from errortable import table_sql
from errortable.reading.reader import CorruptErrorFileWarning, full_schema
from markerstore import Table
from markerstore.errors import CorruptErrorFileError, NotAnErrorTableError
from markerstore.sql import sql as sql_views
from tests.support.errortable_writes import batch, full_write


def test_errors_view_has_the_rfc_columns_and_flattened_ones(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 1, "check": 1})])
    rel = errortable.read(write.commit.url)
    assert rel.columns[:6] == ["uid", "ts", "schema", "record", "message", "context"]
    for column in ("created_at", "commit_time", "table_name", "reason", "fingerprint", "day",
                   "source_instant", "error_instant", "record_key", "check_name",
                   "error", "task_attempt", "replayed_instant"):
        assert column in rel.columns
    table = rel.to_arrow_table()
    assert isinstance(table, pa.Table) and table.num_rows == 2
    assert set(table.column("source_instant").to_pylist()) == {write.instant}
    assert set(table.column("commit_time").to_pylist()) == {write.instant}
    assert len(rel.df()) == 2
    errors = errortable.query(write.commit.url,
                              "SELECT reason, check_name FROM errors ORDER BY reason")
    assert errors.fetchall() == [("cast", None), ("check", "positive_amount")]


def _error_files(path: str) -> list[pathlib.Path]:
    return sorted(pathlib.Path(path).glob("day=*/*.*"))


@pytest.mark.parametrize("fmt", ["avro", "parquet"])
def test_a_corrupt_file_is_named_and_the_others_stay_readable(tmp_table: Table,
                                                              fmt: str) -> None:
    options = {"markerstore.write.error.table.format": fmt}
    write = full_write(tmp_table, [batch(1, {"cast": 2}), batch(1, {"check": 3})], options)
    files = _error_files(write.commit.url)
    assert len(files) == 2
    victim = files[0]
    victim.write_bytes(victim.read_bytes()[:40])
    with pytest.warns(CorruptErrorFileWarning, match=victim.name):
        rows = errortable.read(write.commit.url).fetchall()
    assert len(rows) in (2, 3)  # the other file's rows
    with pytest.raises(CorruptErrorFileError, match=victim.name):
        errortable.read(write.commit.url, strict=True)


def test_a_missing_file_is_named(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 1}), batch(1, {"check": 1})])
    victim = _error_files(write.commit.url)[1]
    victim.unlink()
    with pytest.warns(CorruptErrorFileWarning, match=f"{victim.name} is missing"):
        assert len(errortable.read(write.commit.url).fetchall()) == 1


def test_a_file_of_another_schema_is_refused(tmp_table: Table) -> None:
    import fastavro

    write = full_write(tmp_table, [batch(1, {"cast": 1})])
    victim = _error_files(write.commit.url)[0]
    with victim.open("wb") as handle:
        fastavro.writer(handle, {"type": "record", "name": "X", "fields": [
            {"name": "other", "type": "int"}]}, [{"other": 1}])
    with pytest.raises(CorruptErrorFileError, match=victim.name):
        errortable.read(write.commit.url, strict=True)


def test_paths_that_are_not_error_tables(tmp_path: pathlib.Path) -> None:
    with pytest.raises(NotAnErrorTableError, match="not an error table"):
        errortable.read(str(tmp_path / "nothing"))
    plain = Table(str(tmp_path / "plain"))
    plain.commit(plain.start_commit(), [])
    assert table_sql(plain, "SELECT count(*) FROM errors").fetchall() == [(0,)]
    empty = table_sql(plain, "SELECT * FROM errors LIMIT 0")
    assert set(full_schema().names) - {"day"} <= set(empty.columns)


def test_memory_tables_are_read_too() -> None:
    target = Table("memory://et-reader/events")
    write = full_write(target, [batch(1, {"cast": 2})],
                       {"markerstore.write.error.table.format": "parquet"})
    assert len(errortable.read(write.commit.url).fetchall()) == 2
    assert len(errortable.read(target.path).fetchall()) == 2


def test_result_objects_render_html(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 1})])
    html = errortable.stats(write.commit.url)._repr_html_()
    assert "<table>" in html and "cast" in html
    assert "<b>" in errortable.recover(write.commit.url)._repr_html_()


def test_an_unreadable_error_table_leaves_markerstore_sql_usable(
        tmp_table: Table, caplog: pytest.LogCaptureFixture) -> None:
    write = full_write(tmp_table, [batch(1, {"cast": 1})])
    timeline = pathlib.Path(write.commit.url) / ".markerstore" / "timeline"
    (timeline / f"{write.commit.instant}.commit").write_text("{not json")
    with caplog.at_level("WARNING"):
        assert table_sql(tmp_table, "SELECT count(*) FROM errors").fetchall() == [(0,)]
        assert sql_views(tmp_table, "SELECT count(*) FROM commits").fetchall() == [(1,)]
    assert "cannot be read" in caplog.text
