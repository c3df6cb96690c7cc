"""Replay (idempotent re-ingest) and expire (retention by whole commit)."""

from __future__ import annotations

import pathlib
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import errortable
from errortable.ops import replays as replay_module
from errortable.ops.retention import parse_duration
from markerstore import Table
from markerstore.errors import ConfigError, NotAnErrorTableError
from tests.support.errortable_writes import batch, full_write


def target_rows(table: Table) -> int:
    total = 0
    for _, meta in table._timeline.completed():
        for entry in meta.get("files", []):
            with table.storage.open_read(table.storage.path(entry["path"])) as handle:
                total += pq.read_table(handle).num_rows
    return total


def test_replay_reingests_fixed_records_once(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(3, {"check": 2, "cast": 1})])
    before = target_rows(tmp_table)
    # the negative amounts failed a check of the writer; the target itself accepts them
    dry = errortable.replay(write.commit.url, "reason = 'check'", dry_run=True)
    assert dry.written_rows == 2 and dry.targets[0].instant is None
    assert target_rows(tmp_table) == before
    result = errortable.replay(write.commit.url, "reason = 'check'")
    (outcome,) = result.targets
    assert outcome.written_rows == 2 and outcome.instant is not None
    assert target_rows(tmp_table) == before + 2
    meta = tmp_table.commit_metadata(outcome.instant)
    assert meta["operation"] == "replay" and len(meta["replayed_error_uids"]) == 2
    again = errortable.replay(write.commit.url, "reason = 'check'")
    assert again.written_rows == 0 and again.targets[0].already_replayed == 2
    assert target_rows(tmp_table) == before + 2
    replayed = errortable.read(write.commit.url).filter("replayed_instant IS NOT NULL")
    assert len(replayed.fetchall()) == 2


def test_replay_stays_idempotent_when_the_error_table_log_was_lost(
        tmp_table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    write = full_write(tmp_table, [batch(1, {"check": 3})])
    monkeypatch.setattr(replay_module, "_log_replay", lambda *a, **k: None)  # crash here
    assert errortable.replay(write.commit.url, "true").written_rows == 3
    monkeypatch.undo()
    again = errortable.replay(write.commit.url, "true")
    assert again.written_rows == 0 and again.targets[0].already_replayed == 3


def test_records_that_still_fail_are_not_replayed(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(2, {"cast": 2, "check": 1})])
    result = errortable.replay(write.commit.url, "reason IN ('cast', 'check')")
    (outcome,) = result.targets
    assert outcome.selected == 3 and outcome.written_rows == 1
    assert outcome.still_failing == {"cast": 2}
    assert len(outcome.uids) == 1
    assert len(errortable.read(write.commit.url).fetchall()) == 3
    again = errortable.replay(write.commit.url, "reason IN ('cast', 'check')")
    assert again.targets[0].already_replayed == 1 and again.targets[0].written_rows == 0


def test_replay_refuses_bad_where(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"check": 1})])
    with pytest.raises(ConfigError, match="one SQL condition"):
        errortable.replay(write.commit.url, "true); DROP TABLE x; SELECT (1")
    with pytest.raises(ConfigError, match="SQL condition"):
        errortable.replay(write.commit.url, " ")


def test_replay_without_payload_is_counted_not_written(tmp_table: Table) -> None:
    write = full_write(tmp_table, [batch(1, {"check": 2})],
                       {"markerstore.write.error.table.payload.drop": "true"})
    (outcome,) = errortable.replay(write.commit.url, "true").targets
    assert outcome.no_payload == 2 and outcome.written_rows == 0


def test_expire_removes_whole_old_commits_and_records_them(tmp_table: Table) -> None:
    first = full_write(tmp_table, [batch(1, {"cast": 2})])
    second = full_write(tmp_table, [batch(1, {"check": 1})])
    url = first.commit.url
    later = datetime.now(timezone.utc) + timedelta(days=31)
    dry = errortable.expire(url, "30d", dry_run=True, now=later)
    assert [e["error_instant"] for e in dry.expired] == [first.commit.instant,
                                                         second.commit.instant]
    assert len(errortable.read(url).fetchall()) == 3
    assert errortable.expire(url, "30d").expired == []  # nothing is that old yet
    # expire only the first commit: the cutoff falls between the two instants
    cutoff_now = datetime.strptime(second.commit.instant, "%Y%m%d%H%M%S%f").replace(
        tzinfo=timezone.utc) + timedelta(days=30)
    result = errortable.expire(url, "30d", now=cutoff_now)
    assert [e["error_instant"] for e in result.expired] == [first.commit.instant]
    assert result.rows == 2 and result.files_deleted == 1 and result.expire_instant
    rows = errortable.read(url).fetchall()
    assert len(rows) == 1
    meta = first.commit.table.commit_metadata(result.expire_instant)
    assert meta["operation"] == "expire" and first.commit.instant in meta["expired"]
    again = errortable.expire(url, "30d", now=cutoff_now)
    assert again.expired == [] and again.expire_instant is None


def test_expire_finishes_the_deletes_of_a_crashed_expire(
        tmp_table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    from errortable.ops import retention

    write = full_write(tmp_table, [batch(1, {"cast": 2})])
    url = write.commit.url
    later = datetime.now(timezone.utc) + timedelta(days=2)
    monkeypatch.setattr(retention, "_delete", lambda *a, **k: 0)  # crash before deleting
    result = errortable.expire(url, "1d", now=later)
    assert result.expire_instant and len(list(pathlib.Path(url).glob("day=*/*"))) == 1
    assert errortable.read(url).fetchall() == []  # readers skip it at once
    monkeypatch.undo()
    cleanup = errortable.expire(url, "1d", now=later)
    assert cleanup.leftover_files_deleted == 1
    assert list(pathlib.Path(url).glob("day=*/*")) == []


def test_durations_and_paths() -> None:
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration(" 12h") == timedelta(hours=12)
    assert parse_duration("2w") == timedelta(weeks=2)
    with pytest.raises(ConfigError, match="duration"):
        parse_duration("30 days")
    with pytest.raises(NotAnErrorTableError):
        errortable.expire("memory://et-nothing/here", "1d")


def test_replay_into_partitioned_target(tmp_path: pathlib.Path) -> None:
    target = Table(str(tmp_path / "sales"))
    instant = target.start_commit()
    markers = target.markers(instant)
    markers.create("day=2024-01-01", "f0.parquet", "CREATE")
    path = tmp_path / "sales" / "day=2024-01-01" / "f0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"id": ["a"], "amount": [1]}), str(path))
    target.commit(instant, ["day=2024-01-01/f0.parquet"])
    write = full_write(target, [batch(0, {"check": 2}, day="2024-02-02")])
    result = errortable.replay(write.commit.url, "reason = 'check'")
    (outcome,) = result.targets
    assert outcome.written_rows == 2
    assert all(f.startswith("day=2024-02-02/") for f in outcome.files)
    table = pq.read_table(str(tmp_path / "sales" / outcome.files[0]))
    assert table.column_names == ["id", "amount"] and table.num_rows == 2
