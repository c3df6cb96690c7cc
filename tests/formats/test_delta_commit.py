"""Delta publishing through the commit protocol (no Spark): every completed instant one
Delta version of the same folder, read back by delta-rs row for row equal to markerstore's
snapshot, on local disk and S3 (moto); the option recorded at creation and honoured."""

from __future__ import annotations

import json
from typing import Any

import pytest

from markerstore import Table
from markerstore.errors import ConfigError, CorruptTableError
from markerstore.formats import FORMATS, commit_to_publish, drift, publish, publishers_of
from markerstore.table import TABLE_FILE
from markerstore.tablefile import parse_table_formats
from tests.support.commit_checks import commit_all, data_files, open_table, split
from tests.support.formats import DELTA, assert_delta_matches, delta_table, vacuum_candidates

pytest.importorskip("deltalake")


def test_appends_and_a_replace_are_delta_versions(where: Any) -> None:
    table = open_table(where, markerstore__table__formats="delta")
    commit_all(table, split(600, 2), partition_by=["day"], conflict_mode="append")
    commit_all(table, split(300, 3, start=1000), partition_by=["day"],
               conflict_mode="append")
    assert_delta_matches(table)
    # A replace of the partitions it writes: Delta removes the replaced files.
    replaced = commit_all(table, split(90, 1, start=5000, days=2), partition_by=["day"],
                          conflict_mode="replace")
    assert replaced.replaced_files
    assert_delta_matches(table)
    delta = delta_table(table)
    live = {f.replace("%3D", "=") for f in delta.file_uris()}
    assert all(not any(p in u for u in live) for p in replaced.replaced_files)
    # Nothing else is on storage for Delta's own cleanup than what the log removed.
    assert set(vacuum_candidates(table)) <= {
        p for _, m in table.completed() for p in m.get("replaced_files", [])}
    # The folder holds exactly the snapshot's files, beside the Delta log.
    assert [p for p in data_files(table) if not p.startswith("_delta_log/")] == sorted(
        table.snapshot().paths)


def test_statistics_come_from_the_footers(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta")
    commit_all(table, split(500, 2), partition_by=["day"], conflict_mode="append")
    import pyarrow as pa

    actions = pa.table(delta_table(table).get_add_actions(flatten=True)).to_pylist()
    snapshot = {f.path: f.rows for f in table.snapshot().files}
    assert sum(a["num_records"] for a in actions) == 500
    for action in actions:
        rows = table.snapshot().dataset().to_table().to_pylist()
        assert action["num_records"] == snapshot[action["path"]]
        ids = [r["id"] for r in rows if r["day"] == int(action["partition.day"])]
        assert action["min.id"] >= min(ids) and action["max.id"] <= max(ids)
        assert action["null_count.id"] == 0


def test_the_formats_are_recorded_when_the_table_is_created(tmp_path: Any) -> None:
    url = str(tmp_path / "t")
    table = Table(url, None, DELTA)
    commit_all(table, split(10, 1), conflict_mode="append")
    raw = table.storage.get(table.storage.path(TABLE_FILE))
    assert json.loads(raw)["formats"] == ["delta"]
    # A writer that names none honours the table's.
    plain = Table(url)
    assert plain.formats() == ("delta",)
    commit_all(plain, split(10, 1, start=100), conflict_mode="append")
    assert_delta_matches(plain)
    # A writer that names others is refused before anything is written, in one line.
    other = Table(url, None, {"markerstore.table.formats": "delta,iceberg"})
    with pytest.raises(ConfigError, match=r"^markerstore.table.formats=delta,iceberg but "
                                          r"table .* was created with delta; [^\n]*$"):
        commit_all(other, split(10, 1, start=200), conflict_mode="append")
    assert len(plain.completed()) == 2


def test_a_table_without_formats_refuses_them_later(tmp_path: Any) -> None:
    url = str(tmp_path / "t")
    commit_all(Table(url), split(10, 1), conflict_mode="append")
    with pytest.raises(ConfigError, match="was created with none"):
        commit_all(Table(url, None, DELTA), split(10, 1, start=100), conflict_mode="append")
    assert not (tmp_path / "t" / "_delta_log").exists()


@pytest.mark.parametrize("formats", ['"delta"', '["delta", "delta"]', '["hudi"]'])
def test_a_corrupt_formats_entry_is_refused(formats: str) -> None:
    raw = f'{{"table_id": "abcdefgh-1234", "formats": {formats}}}'.encode()
    with pytest.raises(CorruptTableError, match="'formats' of the table file"):
        parse_table_formats(raw, "t/.markerstore/table.json")


def test_a_missing_package_names_the_extra(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setitem(FORMATS, "delta",
                        ("markerstore.formats.delta", "no_such_package_x", "delta"))
    table = Table(str(tmp_path / "t"), None, DELTA)
    with pytest.raises(ConfigError, match=r"pip install 'markerstore\[delta\]'"):
        commit_all(table, split(10, 1), conflict_mode="append")
    assert table.completed() == []


def test_publishing_again_is_a_no_op_and_drift_is_found(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta")
    commit_all(table, split(50, 1), partition_by=["day"], conflict_mode="append")
    assert publish(table)["delta"].published == []
    (publisher,) = publishers_of(table)
    instant = table.completed()[0][0]
    publisher.publish(commit_to_publish(table, instant))  # idempotent: the app transaction
    assert delta_table(table).version() == 0
    assert drift(table) == []
    # A commit through the core (Table.commit) is published by the next publish/recovery.
    core = table.start_commit()
    table.commit(core, [])
    assert drift(table) == [{"kind": "format_missing_instant", "format": "delta",
                             "instant": core}]
    assert publish(table)["delta"].published == [core]
    assert drift(table) == []
    assert_delta_matches(table)


def test_log_cleanup_does_not_make_old_instants_missing(local_where: Any) -> None:
    """Delta's log cleanup drops old versions' commit info (history); their app
    transactions stay in the checkpoint, so those instants are neither drift nor
    published twice."""
    table = open_table(local_where, markerstore__table__formats="delta")
    for start in (0, 100, 200):
        commit_all(table, split(20, 1, start=start), partition_by=["day"],
                   conflict_mode="append")
    delta = delta_table(table)
    delta.create_checkpoint()
    for version in (0, 1):
        table.storage.delete(table.storage.path("_delta_log", f"{version:020d}.json"))
    (publisher,) = publishers_of(table)
    assert len(publisher.published_instants()) == 1  # the history left
    assert drift(table) == []
    assert publish(table)["delta"].published == []
    assert delta_table(table).version() == 2
    assert delta_table(table).to_pyarrow_table().num_rows == 60


def test_a_format_without_its_module_is_named(tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.setitem(FORMATS, "delta", ("markerstore.formats.nowhere", "pyarrow", "delta"))
    with pytest.raises(ConfigError, match=r"^table .* publishes delta, which this version of "
                                          r"markerstore cannot publish [^\n]*$"):
        commit_all(Table(str(tmp_path / "t"), None, DELTA), split(10, 1),
                   conflict_mode="append")


def test_null_and_escaped_partition_values_and_an_empty_first_commit(tmp_path: Any) -> None:
    import pyarrow as pa

    from markerstore.commit import TaskAttempt, WriteJob, run_task

    table = Table(str(tmp_path / "t"), None, DELTA)
    empty = table.start_commit()
    table.commit(empty, [])  # no file: nothing to give the Delta table its schema yet
    assert publish(table)["delta"].published == []
    commit_all(table, {}, partition_by=["day"], conflict_mode="append")  # no rows either
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    batch = pa.record_batch({"id": pa.array([1, 2, 3], pa.int64()),
                             "day": pa.array(["a", None, "x:y/z=%"])})
    job.commit([run_task(job.spec, [batch], TaskAttempt(0, 1, 0, 1))])
    assert drift(table) == []  # the empty instant too, once the table existed
    assert sorted(delta_table(table).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) \
        == [{"id": 1, "day": "a"}, {"id": 2, "day": None}, {"id": 3, "day": "x:y/z=%"}]
    assert delta_table(table).version() == 2
