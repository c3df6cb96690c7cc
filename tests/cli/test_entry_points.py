"""The installed entry points print the same JSON as the library's to_dict()."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import errortable
from markerstore import Table
from tests.cli.test_output import ROLLBACK_KEYS, failed_write
from tests.support.errortable_writes import batch, full_write

BIN = Path(sys.executable).parent


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / script), *args], capture_output=True, text=True,
                          timeout=120)


def test_markerstore_rollback_entry_point_prints_rollback_results(tmp_path: Path) -> None:
    table, failed = failed_write(str(tmp_path / "t"))
    out = _run("markerstore", "rollback", table.path, failed, "--force", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [set(r) for r in rows] == [ROLLBACK_KEYS]
    assert rows[0]["deleted_files"] == ["p=2/c.parquet", "p=2/d.parquet"]
    text = _run("markerstore", "rollback", table.path, failed)
    assert text.returncode == 0 and "already rolled back" in text.stdout


def test_errortable_recover_entry_point_prints_the_recovery_result(tmp_path: Path) -> None:
    pending = full_write(Table(str(tmp_path / "w" / "events")), [batch(1, {"cast": 1})],
                         complete=False)
    url = pending.commit.url
    out = _run("errortable", "recover", url, "--dry-run", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == errortable.recover(url, dry_run=True).to_dict()
    text = _run("errortable", "recover", url)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[1].split()[:2] == [pending.commit.instant,
                                                       "rolled_forward"]


def test_a_command_imports_only_its_own_module() -> None:
    """`markerstore serve` (the marker server's process) loads neither errortable nor pandas
    nor pyspark: commands are imported when looked up, one module each. `--help` still
    lists every command."""
    script = (
        "import sys, click\n"
        "from markerstore.cli.main import cli\n"
        "ctx = click.Context(cli)\n"
        "assert cli.get_command(ctx, 'serve') is not None\n"
        "print(sorted(m for m in ('errortable', 'pandas', 'pyspark') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
    listed = subprocess.run([sys.executable, "-m", "markerstore.cli", "--help"],
                            capture_output=True, text=True, check=True).stdout
    for name in ("serve", "sql", "rollback", "verify", "ingest", "errortable", "options"):
        assert f"  {name} " in listed
