"""The `markerstore` command: timeline, markers, rollback, sql; --json; exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.s3 import MotoS3
from markerstore import Table
from tests.support.files import exists, marked_write


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "markerstore.cli", *args],
                          capture_output=True, text=True, timeout=120)


def make_table(url: str, storage_options: dict[str, object] | None = None
               ) -> tuple[Table, str, str]:
    table = Table(url, storage_options)
    done = table.start_commit(heartbeat=False)
    marked_write(table, done, ["p=1/a.parquet", "p=1/b.parquet"])
    table.commit(done, [{"path": "p=1/a.parquet", "rows": 3}])
    failed = table.start_commit(heartbeat=False)
    marked_write(table, failed, ["p=2/c.parquet"])
    return table, done, failed


def test_help_lists_commands() -> None:
    out = run("--help")
    assert out.returncode == 0
    for command in ("timeline", "markers", "rollback", "sql"):
        assert command in out.stdout


def test_timeline_markers_sql_rollback_json(tmp_path: Path) -> None:
    url = str(tmp_path / "t")
    table, done, failed = make_table(url)
    timeline = json.loads(run("timeline", url, "--json").stdout)
    assert [(r["instant"], r["state"]) for r in timeline] == [(done, "completed"),
                                                             (failed, "inflight")]
    assert timeline[0]["files"] == 1 and timeline[0]["rows"] == 3
    markers = json.loads(run("markers", url, failed, "--json").stdout)
    assert [m["marker"] for m in markers] == ["p=2/c.parquet.marker.CREATE"]
    rows = json.loads(run("sql", url, "SELECT path, rows FROM files", "--json").stdout)
    assert rows == [{"path": "p=1/a.parquet", "rows": 3}]
    text = run("sql", url, "SELECT state, count(*) AS n FROM commits GROUP BY 1 ORDER BY 1")
    assert text.returncode == 0 and "completed" in text.stdout and "inflight" in text.stdout
    out = run("rollback", url, failed, "--force", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["deleted_files"] == ["p=2/c.parquet"]  # to_dict()
    assert not exists(table, "p=2/c.parquet")
    again = json.loads(run("rollback", url, failed, "--json").stdout)
    assert again[0]["noop"] is True and again[0]["rolled_forward"] is False  # already


def test_rollback_of_completed_instant_fails_with_one_line(tmp_path: Path) -> None:
    url = str(tmp_path / "t")
    _, done, _ = make_table(url)
    out = run("rollback", url, done)
    assert out.returncode == 1
    assert out.stderr.strip().count("\n") == 0 and "never rolled back" in out.stderr


@pytest.mark.parametrize("args", [
    ("timeline",),
    ("markers", "{table}"),
    ("rollback", "{table}", "not-an-instant"),
    ("sql", "{table}", "SELEC 1"),
    ("sql", "{table}", "SELECT * FROM no_such_view"),
    ("timeline", "{table}", "--storage-option", "novalue"),
    ("timeline", "/tmp/x/no/such/table"),
    ("no-such-command",),
])
def test_bad_arguments_exit_2_with_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    url = str(tmp_path / "t")
    make_table(url)
    out = run(*(a.format(table=url) for a in args))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("markerstore: error: ")
    assert out.stderr.strip().count("\n") == 0


@pytest.mark.s3
def test_s3_with_storage_options(moto_s3: MotoS3, s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/t"
    _, done, failed = make_table(url, moto_s3.storage_options())
    flags = ["--storage-option", f"endpoint_url={moto_s3.endpoint}",
             "--storage-option", "key=testing", "--storage-option", "secret=testing",
             "--storage-option", "client_kwargs.region_name=us-east-1"]
    out = run("timeline", url, "--json", *flags)
    assert out.returncode == 0, out.stderr
    assert [r["state"] for r in json.loads(out.stdout)] == ["completed", "inflight"]
    out = run("rollback", url, failed, "--force", *flags)
    assert out.returncode == 0, out.stderr
    rows = json.loads(run("sql", url, "SELECT instant, state FROM commits", "--json",
                          *flags).stdout)
    assert rows == [{"instant": done, "state": "completed"},
                    {"instant": failed, "state": "rolledback"}]


def test_console_scripts_start() -> None:
    """Both entry points import cleanly (the errortable command loads markerstore's CLI
    helpers, which load errortable's commands in turn)."""
    bin_dir = Path(sys.executable).parent
    for script, command in (("markerstore", "errortable"), ("errortable", "stats")):
        out = subprocess.run([str(bin_dir / script), "--help"], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert command in out.stdout


def test_options_lists_every_key_with_the_error_tables() -> None:
    from markerstore import config

    done = run("options", "--json")
    assert done.returncode == 0, done.stderr
    listed = {row["key"] for row in json.loads(done.stdout)}
    assert listed == set(config.OPTIONS) | set(config.PREFIX_KEYS)
    assert config.ERROR_TABLE_ENABLED in listed and config.ERROR_PAYLOAD_REDACT in listed
