"""Odd files where markerstore keeps its own state (a folder where a file belongs, a file
where a folder belongs, a name that only looks like an instant): `report`, `timeline` and
`sql ... FROM commits` still answer, and the report lists the marker folder it could not
read as a finding."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from markerstore import Table
from markerstore.cli.main import cli as markerstore_cli
from markerstore.timeline import is_instant
from tests.support.files import marked_write


def _replace_with_folder(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir(parents=True)


ODD: dict[str, tuple[Callable[[Table, str], None], bool]] = {
    # name: (what is done to the in-flight instant `i`, whether its markers are unreadable)
    "a commit file that only looks like an instant": (
        lambda t, i: Path(t.storage.path(".markerstore/timeline/99999999999999999.commit"))
        .write_text("{"), False),
    "a folder as the heartbeat": (
        lambda t, i: _replace_with_folder(Path(t.storage.path(".markerstore/heartbeats", i))),
        False),
    "a folder as MARKERS.type": (
        lambda t, i: _replace_with_folder(
            Path(t.storage.path(".markerstore/markers", i, "MARKERS.type"))), True),
    "a file as an instant's marker folder": (
        lambda t, i: Path(t.storage.path(".markerstore/markers/20991231000000000"))
        .write_text("x"), True),
}


def cli(*args: str) -> Result:
    return CliRunner().invoke(markerstore_cli, list(args))


@pytest.mark.parametrize("case", sorted(ODD))
def test_commands_answer_around_an_odd_state_file(tmp_path: Path, case: str) -> None:
    table = Table(str(tmp_path / "t"))
    first = table.start_commit(heartbeat=False)
    marked_write(table, first, ["p/a.parquet"])
    table.commit(first, ["p/a.parquet"])
    inflight = table.start_commit(heartbeat=False)
    marked_write(table, inflight, ["q/b.parquet"])
    act, unreadable = ODD[case]
    act(table, inflight)

    report = cli("report", table.path, "--json")
    assert report.exit_code == 0, report.stderr
    findings = json.loads(report.stdout)["verdict"]["findings"]
    assert any(f["kind"] == "unreadable_markers" for f in findings) == unreadable
    timeline = cli("timeline", table.path)
    assert timeline.exit_code == 0 and timeline.stderr == "", timeline.stderr
    assert first in timeline.stdout and inflight in timeline.stdout
    sql = cli("sql", table.path, "SELECT count(*) AS n FROM commits", "--json")
    assert sql.exit_code == 0 and sql.stderr == "", sql.stderr
    assert json.loads(sql.stdout) == [{"n": 2}]  # the two instants, nothing else


@pytest.mark.parametrize("text", ["99999999999999999", "20241301000000000",
                                  "20240230000000000", "2024010100000000\u00b2", "0" * 17])
def test_what_is_not_a_date_is_not_an_instant(text: str) -> None:
    assert not is_instant(text)
    assert is_instant("20240229235959999")
