"""The `errortable` command: every command, --json, and exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.errortable import cli
from tests.support.errortable_writes import batch, full_write


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), prog_name="errortable", catch_exceptions=False)


@pytest.fixture
def written(tmp_table: Table) -> Any:
    first = full_write(tmp_table, [batch(2, {"cast": 2, "check": 1})])
    full_write(tmp_table, [batch(1, {"key": 1})])
    return first


def test_query_text_and_json(written: Any) -> None:
    url = written.commit.url
    result = run("query", url, "SELECT reason, count(*) AS n FROM errors GROUP BY reason "
                               "ORDER BY reason", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [{"reason": "cast", "n": 2}, {"reason": "check", "n": 1},
                                         {"reason": "key", "n": 1}]
    text = run("query", url, "SELECT count(*) AS n FROM errors")
    assert text.exit_code == 0 and text.output.split() == ["n", "4"]
    # the target table's path works too (its error tables, its rows)
    via_target = run("query", written.target.path, "SELECT count(*) AS n FROM errors", "--json")
    assert json.loads(via_target.output) == [{"n": 4}]


def test_stats(written: Any) -> None:
    result = run("stats", written.commit.url, "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["total"] == 4
    assert {r["reason"]: r["rows"] for r in stats["by_reason"]} == {"cast": 2, "check": 1,
                                                                   "key": 1}
    cast_groups = [g for g in stats["by_fingerprint"] if g["reason"] == "cast"]
    assert len(cast_groups) == 1 and cast_groups[0]["rows"] == 2  # grouped by fingerprint
    assert len(stats["by_commit"]) == 2 and len(stats["by_day"]) == 1
    text = run("stats", written.commit.url)
    assert "by fingerprint" in text.output and "4 committed error row(s)" in text.output


def test_show_with_commit_and_limit(written: Any) -> None:
    result = run("show", written.commit.url, "--commit", written.instant, "--json")
    rows = json.loads(result.output)
    assert len(rows) == 3 and {r["source_instant"] for r in rows} == {written.instant}
    assert len(json.loads(run("show", written.commit.url, "--limit", "1",
                              "--json").output)) == 1
    text = run("show", written.commit.url)
    assert text.exit_code == 0 and "reason" in text.output.splitlines()[0]


def test_expire_and_recover(written: Any) -> None:
    dry = run("expire", written.commit.url, "--older-than", "30d", "--dry-run", "--json")
    assert dry.exit_code == 0 and json.loads(dry.output)["expired"] == []
    result = run("expire", written.commit.url, "--older-than", "30d")
    assert result.exit_code == 0 and "expired 0 error commit(s)" in result.output
    recovered = run("recover", written.commit.url, "--json")
    assert recovered.exit_code == 0 and json.loads(recovered.output)["rolled_forward"] == []


def test_replay_dry_run_then_real(written: Any) -> None:
    dry = run("replay", written.commit.url, "--where", "reason = 'check'", "--dry-run",
              "--json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["written_rows"] == 1
    real = run("replay", written.commit.url, "--where", "reason = 'check'")
    assert real.exit_code == 0 and "replayed 1 record(s)" in real.output
    again = run("replay", written.commit.url, "--where", "reason = 'check'", "--json")
    assert json.loads(again.output)["written_rows"] == 0


@pytest.mark.parametrize("args, message", [
    (["query", "{url}", "SELEC nonsense"], "syntax error"),
    (["query", "{url}", "SELECT nope FROM errors"], "nope"),
    (["expire", "{url}", "--older-than", "thirty"], "duration"),
    (["expire", "{url}"], "--older-than"),
    (["show", "{url}", "--limit", "-1"], "-1"),
    (["replay", "{url}", "--where", "reason = "], "syntax error"),
    (["stats", "{url}", "--storage-option", "novalue"], "key=value"),
    (["stats", "{missing}"], "not an error table"),
])
def test_bad_arguments_exit_2_with_one_line(written: Any, tmp_path: Any, args: list[str],
                                            message: str) -> None:
    filled = [a.format(url=written.commit.url, missing=str(tmp_path / "missing"))
              for a in args]
    result = run(*filled)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("errortable: error:")
    assert message in lines[0]


def test_corrupt_file_is_a_warning_line_and_strict_fails(written: Any) -> None:
    import pathlib

    # Parquet: the default format
    victim = sorted(pathlib.Path(written.commit.url).glob("day=*/*.parquet"))[0]
    victim.write_bytes(b"garbage")
    result = run("query", written.commit.url, "SELECT count(*) AS n FROM errors", "--json")
    assert result.exit_code == 0
    assert "errortable: warning:" in result.stderr and victim.name in result.stderr
    strict = run("query", written.commit.url, "SELECT 1", "--strict")
    assert strict.exit_code == 1 and victim.name in strict.stderr


def test_the_console_command_exits_2_on_a_bad_path(tmp_path: Any) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "markerstore.cli.errortable", "stats",
                           str(tmp_path / "nothing")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("errortable: error:") and proc.stderr.count("\n") == 1


def test_plugs_into_the_markerstore_command(written: Any) -> None:
    from markerstore.cli.errortable import register
    from markerstore.cli.main import OneLineGroup

    group = OneLineGroup("m")
    register(group)
    result = CliRunner().invoke(group, ["errortable", "stats", written.commit.url, "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["total"] == 4


@pytest.mark.parametrize("duration", ["99999999999d", "999999999d", "365001d",
                                      "99999999999999999999w"])
def test_a_duration_too_long_is_a_bad_argument(written: Any, duration: str) -> None:
    """It raised OverflowError with a traceback."""
    from errortable.ops.retention import parse_duration
    from markerstore.errors import ConfigError

    with pytest.raises(ConfigError, match="too long"):
        parse_duration(duration)
    result = run("expire", written.commit.url, "--older-than", duration)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "too long" in result.stderr
    longest = run("expire", written.commit.url, "--older-than", "365000d", "--json")
    assert longest.exit_code == 0 and json.loads(longest.output)["expired"] == []
