"""`markerstore verify` on a table whose id file (`.markerstore/table.json`) is corrupt or
unreadable, whatever it holds or is (bytes, deep JSON, a folder, a link to itself): exit
1 with the finding, never an empty output; `markerstore report` lists it and exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.table import TABLE_FILE
from tests.support.files import marked_write


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "table_id").write_text("x")


def _loop(path: Path) -> None:
    path.unlink()
    os.symlink(path.name, path)


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "bytes": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "empty": lambda p: p.write_bytes(b""),
    "deep": lambda p: p.write_bytes(b"[" * 100_000),
    "escapes": lambda p: p.write_bytes(b'{"table_id": "\x1b[2J\x1b]52;c;x\x07"}'),
    "folder": _folder,
    "link loop": _loop,
}


def corrupt_table(root: Path, how: str) -> Table:
    table = Table(str(root))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    table.commit(instant, ["p/a.parquet"])
    CORRUPTIONS[how](root / TABLE_FILE)
    return table


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_verify_says_what_is_wrong(tmp_path: Path, how: str) -> None:
    table = corrupt_table(tmp_path / "t", how)
    out = CliRunner().invoke(cli, ["verify", table.path, "--json"])
    assert out.exit_code == 1, out.output
    rows = json.loads(out.stdout)
    assert [(r["kind"], r["path"]) for r in rows] == [("corrupt_table_file", TABLE_FILE)]
    report = CliRunner().invoke(cli, ["report", table.path, "--json"])
    assert report.exit_code == 0, report.output
    kinds = [f["kind"] for f in json.loads(report.stdout)["verdict"]["findings"]]
    assert kinds[0] == "corrupt_table_id"  # (and the errors view it cannot filter)


@pytest.mark.parametrize("how", ["folder", "link loop", "bytes"])
def test_the_installed_command_prints_the_finding(tmp_path: Path, how: str) -> None:
    table = corrupt_table(tmp_path / "t", how)
    run = subprocess.run([sys.executable, "-m", "markerstore.cli", "verify", table.path],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "corrupt_table_file" in run.stdout and TABLE_FILE in run.stdout
    assert run.stderr == ""
    assert "\x1b" not in run.stdout
