"""`markerstore sweep`: orphaned uploads of failed writes go; nothing else is touched."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.commit import FileName, WriteJob, sweep
from markerstore.storage import Storage
from tests.support.commit_checks import commit_all, run_job_tasks, split, uploads


def start_upload(storage: Storage, key: str) -> str:
    """A pending upload at `key` (bucket-relative), as a task that outlived its job makes."""
    bucket = storage.root.partition("/")[0]
    created = storage.fs.call_s3("create_multipart_upload", Bucket=bucket, Key=key)
    storage.fs.call_s3("upload_part", Bucket=bucket, Key=key, UploadId=created["UploadId"],
                       PartNumber=1, Body=b"late")
    return str(created["UploadId"])


def zombie_key(table: Table, instant: str, write_uuid: str | None = None) -> str:
    name = FileName(write_uuid or table.write_uuid(instant) or "", 0, 9, 9, 999, instant).name
    return f"{table.storage.root.partition('/')[2]}/{name}"


@pytest.mark.s3
def test_sweep_aborts_only_orphans_of_this_tables_finished_writes(moto_s3: Any) -> None:
    bucket = moto_s3.create_bucket("sweep-test")
    options = moto_s3.storage_options()
    table = Table(f"s3://{bucket}/t", options, {"markerstore.write.target_file_size": 16000})
    other = Table(f"s3://{bucket}/t2", options, table.settings)  # an adjacent table

    completed = commit_all(table, split(200, 1), conflict_mode="append")
    rolled_back = WriteJob(table, conflict_mode="append").start()
    run_job_tasks(rolled_back, split(200, 1))
    rolled_back.abort()
    live = WriteJob(table, conflict_mode="append").start()
    run_job_tasks(live, split(200, 1))
    live_uploads = uploads(table, live.write_uuid, live.instant)
    assert live_uploads

    orphans = {start_upload(table.storage, zombie_key(table, completed.instant)),
               start_upload(table.storage, zombie_key(table, rolled_back.instant))}
    kept = {start_upload(table.storage, zombie_key(table, completed.instant, "someone-else")),
            start_upload(table.storage, f"{table.storage.root.partition('/')[2]}/notes.txt")}
    other_job = WriteJob(other, conflict_mode="append").start()
    run_job_tasks(other_job, split(200, 1))
    other_pending = uploads(other)
    assert other_pending

    dry = sweep(table, dry_run=True)
    assert {r["upload_id"] for r in dry.rows if r["action"] == "would abort"} == orphans
    assert len(uploads(table)) == len(live_uploads) + 4

    result = CliRunner().invoke(cli, ["sweep", table.path, "--json", *sum(
        (["--storage-option", f"{k}={json.dumps(v)}"] for k, v in options.items()), [])])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["upload_id"] for r in rows if r["action"] == "aborted"} == orphans
    actions = {r["upload_id"]: r["action"] for r in rows if r["kind"] == "upload"}
    assert all(actions[u.upload_id].startswith("skipped: write is inflight")
               for u in live_uploads)
    assert {u.upload_id for u in uploads(table)} == kept | {u.upload_id for u in live_uploads}
    assert uploads(other) == other_pending  # another table's uploads are never touched

    live.commit([])  # its own uploads go with it (not a winner's)
    other_job.abort()
    assert {u.upload_id for u in uploads(table)} == kept


def test_sweep_deletes_staging_left_by_finished_writes_only(tmp_path: Any) -> None:
    table = Table(str(tmp_path / "t"), None, {"markerstore.write.target_file_size": 16000})
    done = WriteJob(table, conflict_mode="append").start()
    done.abort()
    live = WriteJob(table, conflict_mode="append").start()
    run_job_tasks(live, split(200, 1))
    late = tmp_path / "t" / ".markerstore" / "staging" / done.instant / "late.parquet"
    late.parent.mkdir(parents=True)
    late.write_bytes(b"a task that outlived its job")
    live_staged = table.storage.find(table.storage.path(".markerstore/staging", live.instant))
    assert live_staged
    report = sweep(table)
    assert [(r["kind"], r["instant"], r["action"]) for r in report.rows] == [
        ("staging", done.instant, "deleted")]
    assert not late.exists()
    assert table.storage.find(table.storage.path(".markerstore/staging", live.instant)) \
        == live_staged
    live.abort()
