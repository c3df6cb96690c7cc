"""`markerstore verify`: a consistent table after real writes passes; every kind of finding,
injected for real, is reported; without --repair nothing changes; --repair honours the
grace period and never touches an inflight instant's file or a committed one."""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from errortable import ErrorTables
from markerstore import Table
from markerstore.audit.verify import LAST_VERIFY_FILE, verify_all
from markerstore.cli.main import cli
from markerstore.commit import WriteJob
from markerstore.commit.driver import ErrorTableSpec
from markerstore.commit.plan import PLANS_DIR
from markerstore.commit.staging import STAGING_DIR
from markerstore.commit.verify import parse_grace, verify
from markerstore.errors import ConfigError
from markerstore.markers import MARKERS_DIR
from markerstore.timeline.heartbeat import HEARTBEAT_DIR
from tests.support.commit_checks import data_files, open_table, run_job_tasks, split

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.int64()), ("payload", pa.string())])
ERRORS = {"markerstore__write__error__table__enabled": "true"}
OLD = 3 * 86400  # seconds: older than the default grace period


def _written(location: Any) -> Table:
    """A table after two real writes (the second with error rows) and a rolled-back one."""
    table = open_table(location, **ERRORS)
    for rows in (1200, 600):
        job = WriteJob(table, partition_by=["day"], conflict_mode="append",
                       error_table=ErrorTableSpec(SCHEMA, "id", {"no_7": "id % 7 <> 0"}),
                       error_tables=ErrorTables()).start()
        job.commit(run_job_tasks(job, split(rows, 2)))
    failed = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    run_job_tasks(failed, split(300, 1))
    failed.abort()
    return table


def _errors_of(table: Table) -> Table:
    return Table(table.storage.url() + "_errors", table.storage.storage_options)


def _snapshot(table: Table) -> list[tuple[str, int]]:
    storage = table.storage
    found = []
    for t in (table, _errors_of(table)):
        for path in t.storage.find(t.storage.root):
            found.append((path, int(t.storage.info(path)["size"])))
    if storage.is_s3:
        from markerstore.commit import s3

        found += [(u.key, -1) for u in s3.list_uploads(storage)]
    return sorted(found)


def _kinds(reports: list[Any]) -> dict[str, int]:
    result: dict[str, int] = {}
    for report in reports:
        for kind, n in report.counts().items():
            result[kind] = result.get(kind, 0) + n
    return result


def _age(table: Table, path: str, seconds: float) -> None:
    full = table.storage.path(path)
    os.utime(full, (time.time() - seconds,) * 2)


def _ours(table: Table, instant: str) -> str:
    return f"day=1/{uuid.uuid4()}-0_0-1-9_{instant}.parquet"


def test_a_consistent_table_passes(location: Any) -> None:
    table = _written(location)
    reports = verify_all(table)
    assert [r.table for r in reports] == [table.storage.url(), _errors_of(table).storage.url()]
    assert all(r.consistent for r in reports), [r.findings for r in reports]
    assert reports[0].committed_files == len(data_files(table)) > 0
    assert reports[1].committed_files == len(data_files(_errors_of(table))) > 0
    out = CliRunner().invoke(cli, ["verify", table.path, *_options(table)])
    assert out.exit_code == 0, out.output
    assert out.output.count(": consistent (") == 2


def _options(table: Table) -> list[str]:
    args = []
    for key, value in table.storage.storage_options.items():
        args += ["--storage-option", f"{key}={json.dumps(value)}"]
    return args


def _inject(table: Table) -> dict[str, str]:
    """One of each finding, made for real; returns what was injected where."""
    storage = table.storage
    committed = sorted(f["path"] for _, meta in table._timeline.completed()
                       for f in meta["files"])
    completed = [i.instant for i in table.timeline() if i.state == "completed"]
    rolled_back = [i.instant for i in table.timeline() if i.state == "rolledback"][0]
    orphan = _ours(table, completed[0])
    storage.put(storage.path(orphan), b"a file no commit references")
    storage.delete(storage.path(committed[0]))
    with storage.open_read(storage.path(committed[1])) as handle:
        head = handle.read(100)
    storage.put(storage.path(committed[1]), head)
    marker = f"{MARKERS_DIR}/{rolled_back}/day=1/x_0-1-0_{rolled_back}.parquet.marker.CREATE"
    storage.put(storage.path(marker), b"")
    storage.put(storage.path(HEARTBEAT_DIR, completed[1]), b"{}")
    storage.put(storage.path(STAGING_DIR, rolled_back, "day=1", "staged.parquet"), b"staged")
    storage.put(storage.path(PLANS_DIR, f"{rolled_back}.json"), b"{}")
    errors = _errors_of(table)
    error_file = f"day=2024-01-01/{uuid.uuid4().hex[:16]}-task-9_{completed[0]}.parquet"
    errors.storage.put(errors.storage.path(error_file), b"error rows of no commit")
    return {"orphan": orphan, "missing": committed[0], "truncated": committed[1],
            "error_file": error_file, "rolled_back": rolled_back}


def test_each_injected_finding_is_reported_and_nothing_changes(location: Any) -> None:
    table = _written(location)
    injected = _inject(table)
    if location.kind == "local":
        _age(table, injected["orphan"], OLD)
        _age(_errors_of(table), injected["error_file"], OLD)
    before = _snapshot(table)
    reports = verify_all(table)
    assert _snapshot(table) == before  # without --repair nothing changes
    main, errors = reports
    found = {(f.kind, f.path) for f in main.findings}
    assert ("orphan_file", injected["orphan"]) in found
    assert ("missing_file", injected["missing"]) in found
    assert ("size_mismatch", injected["truncated"]) in found
    assert ("leftover_markers", f"{MARKERS_DIR}/{injected['rolled_back']}") in found
    assert any(k == "leftover_heartbeat" for k, _ in found)
    assert [(f.kind, f.path) for f in errors.findings] == [("orphan_file",
                                                            injected["error_file"])]
    assert ("leftover_staging", f"{STAGING_DIR}/{injected['rolled_back']}") in found
    assert ("leftover_plan", f"{PLANS_DIR}/{injected['rolled_back']}.json") in found
    assert _kinds(reports) == {"orphan_file": 2, "missing_file": 1, "size_mismatch": 1,
                               "leftover_markers": 1, "leftover_heartbeat": 1,
                               "leftover_staging": 1, "leftover_plan": 1}
    out = CliRunner().invoke(cli, ["verify", table.path, "--json", *_options(table)])
    assert out.exit_code == 1
    rows = json.loads(out.output)
    assert {r["kind"] for r in rows} == set(_kinds(reports))
    assert all(set(r) >= {"kind", "path", "size", "instant", "action"} for r in rows)
    # The command's one write: its summary for `markerstore report`, nothing else.
    summary = table.storage.path(LAST_VERIFY_FILE)
    assert [p for p, _ in _snapshot(table) if p != summary] == [p for p, _ in before]
    table.storage.delete(summary)
    assert _snapshot(table) == before
    text = CliRunner().invoke(cli, ["verify", table.path, *_options(table)])
    assert text.exit_code == 1 and injected["orphan"] in text.output


def test_repair_honours_the_grace_period_and_spares_inflight_instants(tmp_path: Any) -> None:
    from types import SimpleNamespace

    table = _written(SimpleNamespace(kind="local", url=str(tmp_path / "t"),
                                     storage_options={}))
    completed = [i.instant for i in table.timeline() if i.state == "completed"]
    old, young = _ours(table, completed[0]), _ours(table, completed[1])
    for path in (old, young):
        table.storage.put(table.storage.path(path), b"orphan")
    _age(table, old, OLD)
    live = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    marked = run_job_tasks(live, split(200, 1))[0].files[0].path  # staged, with a marker
    unmarked = _ours(table, live.instant)  # named for the inflight instant, no marker
    table.storage.put(table.storage.path(unmarked), b"inflight")
    _age(table, unmarked, OLD)
    foreign = "day=1/notes.txt"
    table.storage.put(table.storage.path(foreign), b"not ours")
    _age(table, foreign, OLD)
    committed = set(data_files(table)) - {old, young, unmarked, foreign}

    report = verify(table, repair=True)
    actions = {f.path: f.action for f in report.findings}
    assert actions[old] == "deleted" and not table.storage.exists(table.storage.path(old))
    assert actions[young].startswith("kept: younger")
    assert actions[unmarked] == f"kept: instant {live.instant} is inflight"
    assert actions[foreign] == "kept: not a markerstore file name"
    assert marked not in actions
    for path in (young, unmarked, foreign):
        assert table.storage.exists(table.storage.path(path))
    assert committed <= set(data_files(table))  # nothing committed was touched
    again = verify(table, repair=True, grace="0")
    assert {f.path: f.action for f in again.findings}[young] == "deleted"
    assert table.storage.exists(table.storage.path(unmarked))
    live.abort()


def test_repair_removes_leftovers_and_error_table_orphans(location: Any) -> None:
    table = _written(location)
    injected = _inject(table)
    reports = verify_all(table, repair=True, grace="0")
    actions = {(f.kind, f.path): f.action for r in reports for f in r.findings}
    assert actions[("orphan_file", injected["orphan"])] == "deleted"
    assert actions[("orphan_file", injected["error_file"])] == "deleted"
    assert actions[("leftover_markers", f"{MARKERS_DIR}/{injected['rolled_back']}")] == \
        "deleted"
    assert actions[("missing_file", injected["missing"])].startswith("none")
    after = _kinds(verify_all(table))
    assert after == {"missing_file": 1, "size_mismatch": 1}  # lost data is only reported


@pytest.mark.s3
def test_an_orphaned_multipart_upload_is_reported_and_aborted(moto_s3: Any) -> None:
    from types import SimpleNamespace

    from markerstore.commit import s3

    bucket = moto_s3.create_bucket(f"verify-{uuid.uuid4().hex[:8]}")
    table = _written(SimpleNamespace(kind="s3", url=f"s3://{bucket}/t",
                                     storage_options=moto_s3.storage_options()))
    rolled_back = [i.instant for i in table.timeline() if i.state == "rolledback"][0]
    write_uuid = table.write_uuid(rolled_back)
    key = f"t/day=1/{write_uuid}-0_0-1-3_{rolled_back}.parquet"
    client = moto_s3.client()
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 10)
    other = client.create_multipart_upload(Bucket=bucket, Key="t/day=1/not-ours.bin")
    before = _snapshot(table)
    report = verify(table)
    assert _snapshot(table) == before
    assert [(f.kind, f.path, f.instant) for f in report.findings] == [
        ("orphan_upload", key[2:], rolled_back)]
    assert report.findings[0].action == f"would abort (upload {upload})"
    verify(table, repair=True, grace="0")
    keys = {u.upload_id for u in s3.list_uploads(table.storage)}
    assert upload not in keys and other["UploadId"] in keys
    assert verify(table).consistent


def test_grace_periods() -> None:
    assert parse_grace("1d").total_seconds() == 86400
    assert parse_grace("0").total_seconds() == 0
    assert parse_grace("90m").total_seconds() == 5400
    with pytest.raises(ConfigError, match="grace"):
        parse_grace("soon")
    out = CliRunner().invoke(cli, ["verify", "/nowhere", "--grace", "soon"])
    assert out.exit_code == 2 and "grace" in out.output


def test_a_path_without_a_table_is_a_one_line_error(tmp_path: Any) -> None:
    out = CliRunner().invoke(cli, ["verify", str(tmp_path / "nothing")])
    assert out.exit_code == 2
    lines = [line for line in out.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "no markerstore table at" in lines[0]
