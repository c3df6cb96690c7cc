"""A table nested inside another (``/lake`` and ``/lake/archive``, or a global error table
under the table's base path) is another table, never the outer table's garbage.

``verify --repair`` of the outer table lists the nested table's files too; they are
markerstore files whose instants are not on the outer table's timeline, so they looked
like orphans. A folder holding its own ``.markerstore/`` is now skipped and reported
(``nested_table``), and nothing of it is deleted or aborted, on local disk and on S3.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.commit import s3
from markerstore.commit.verify import verify
from tests.support.files import exists, marked_write


def ours(partition: str, instant: str) -> str:
    """A path named as markerstore names data files (verify repairs only such orphans)."""
    return f"{partition}/{uuid.uuid4()}-0_0-1-0_{instant}.parquet"


def written(table: Table, commits: int, operation: str = "write") -> list[str]:
    """`commits` completed commits of one file each; their paths."""
    paths = []
    for _ in range(commits):
        instant = table.start_commit(heartbeat=False, operation=operation)
        path = ours("day=1", instant)
        marked_write(table, instant, [path])
        table.commit(instant, [path])
        paths.append(path)
    return paths


def cli_options(options: dict[str, Any]) -> list[str]:
    return [arg for key, value in options.items()
            for arg in ("--storage-option", f"{key}={json.dumps(value)}")]


def test_verify_repair_never_touches_a_nested_table(room: tuple[str, dict[str, Any]]
                                                    ) -> None:
    url, options = room
    outer = Table(f"{url}/lake", options)
    kept = written(outer, 1)
    archive = Table(f"{url}/lake/archive", options)
    errors = Table(f"{url}/lake/_errors/events", options)  # a global error table
    errors.storage.put(errors.storage.path(".markerstore/errortable.json"),
                       json.dumps({"kind": "error_table"}).encode())
    nested = {archive: written(archive, 1), errors: written(errors, 1, "errors")}
    orphan = ours("day=1", outer.timeline()[0].instant)  # a real orphan of the outer table
    outer.storage.put(outer.storage.path(orphan), b"orphan")
    pending = None
    if outer.storage.is_s3:  # an upload of a nested table's live write
        live = archive.start_commit(heartbeat=False)
        bucket, key = s3.bucket_key(archive.storage, ours("day=2", live))
        pending = archive.storage.fs.call_s3("create_multipart_upload", Bucket=bucket,
                                             Key=key)["UploadId"]

    report = verify(outer, repair=True, grace="0")

    for table, paths in nested.items():
        assert all(exists(table, p) for p in paths), table
    assert all(exists(outer, p) for p in kept) and not exists(outer, orphan)
    skipped = {f.path: f.action for f in report.findings if f.kind == "nested_table"}
    assert set(skipped) == {"archive", "_errors/events"}
    assert all(a.startswith("skipped: another table") for a in skipped.values())
    assert {f.kind for f in report.findings} == {"nested_table", "orphan_file"}
    assert [f.path for f in report.findings if f.kind == "orphan_file"] == [orphan]
    if pending is not None:
        assert pending in {u.upload_id for u in s3.list_uploads(outer.storage)}
        return  # the command's output is the same on S3

    # The table is consistent now; the nested tables are listed, in text and JSON, and
    # the exit code says consistent.
    out = CliRunner().invoke(cli, ["verify", outer.path, "--json", *cli_options(options)])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert sorted((r["kind"], r["path"]) for r in rows) == [
        ("nested_table", "_errors/events"), ("nested_table", "archive")]
    out = CliRunner().invoke(cli, ["verify", outer.path, *cli_options(options)])
    assert out.exit_code == 0, out.output
    assert ": consistent (" in out.output
    assert "nested_table" in out.output and "archive" in out.output
    for table in nested:
        assert verify(table).consistent, table  # each verifies on its own
