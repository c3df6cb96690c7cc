"""`markerstore report`: the figures of a table (``--json``) and what each section says,
for a table with commits, errors and a rollback, an empty table, a table with only
rolled-back instants, one with a corrupt instant, one with a dead writer, and one on S3."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.audit import build, collect, parse_since
from markerstore.cli.main import cli
from markerstore.errors import ConfigError
from markerstore.render import page
from tests.support.errortable_writes import batch, full_write
from tests.support.files import marked_write

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def written(url: str, storage_options: dict[str, Any] | None = None, days: int = 3,
            rollback: bool = True) -> Table:
    """Three commits (one a day) with cast, check, key and partition errors, then a failed
    write rolled back."""
    table = Table(url, storage_options)
    for i, day in enumerate(DAYS[:days]):
        full_write(table, [batch(20 + i, {"cast": i + 1, "check": 2, "key": 1}, day=day),
                           batch(5, {"partition": 1}, day=day)])
    if not rollback:
        return table
    failed = table.start_commit(heartbeat=False)
    marked_write(table, failed, ["x.parquet"])
    table.rollback(failed, force=True)
    return table


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return written(str(tmp_path_factory.mktemp("report") / "events"))


def test_the_figures_of_a_table(table: Table) -> None:
    data = build(table).to_dict()
    assert data["verdict"] == {"healthy": True, "findings": [], "summary": "healthy"}
    header = data["table"]
    assert header["url"] == table.storage.url() and header["table_id"] == table.table_id()
    assert [c["name"] for c in header["schema"]] == ["id", "amount", "day"]
    assert header["files"] == 6 and header["last_commit"]["instant"] == \
        table.completed()[-1][0]
    commits = data["commits"]
    assert (commits["completed"], commits["rolled_back"], commits["inflight"]) == (3, 1, 0)
    assert [p["commits"] for p in commits["points"]] == [1, 1, 1] and not commits["grouped"]
    assert sum(p["rows"] for p in commits["points"]) == header["rows"]
    first = commits["points"][0]
    assert first["by_reason"] == {"cast": 1, "check": 2, "key": 1, "partition": 1}
    assert first["error_rate"] == round(5 / first["rows_in"], 6)
    assert [e["kind"] for e in commits["events"]] == ["rolled back"]
    assert commits["events"][0]["point"] == 3  # after the last commit
    quality = data["quality"]
    assert quality["error_rows"] == 5 + 6 + 7 and quality["by_reason"] == {
        "check": 6, "cast": 6, "key": 3, "partition": 3}
    check = quality["checks"][0]
    assert check["check"] == "positive_amount" and check["failed"] == 6
    assert check["pass_rate_per_point"][0] == round(1 - 2 / first["rows_in"], 6)
    top = quality["fingerprints"][0]
    assert top["rows"] == 6 and top["example_record"] and top["record_key"] is not None
    assert top["example_message"].startswith(("ArrowInvalid", "CheckFailed"))
    assert data["layout"]["files"] == 6 and data["layout"]["small_files"] == 6
    assert sum(h["files"] for h in data["layout"]["size_histogram"]) == 6
    assert data["notes"]["commits"].startswith("3 completed commit(s), one bar per commit")


def test_many_commits_are_grouped(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "MAX_POINTS", 2)
    data = build(table).to_dict()
    points = data["commits"]["points"]
    assert data["commits"]["grouped"] and [p["commits"] for p in points] == [2, 1]
    assert points[0]["by_reason"]["cast"] == 1 + 2
    assert len(data["quality"]["checks"][0]["pass_rate_per_point"]) == 2
    assert "in 2 groups of consecutive commits" in data["notes"]["commits"]


def test_since_keeps_the_newer_commits(table: Table) -> None:
    third = table.completed()[-1][0]
    data = build(table, since=third).to_dict()
    assert data["commits"]["completed"] == 1 and data["quality"]["error_rows"] == 3 + 2 + 1 + 1
    assert data["since"] == {"given": third, "instant": third}
    now = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)
    assert parse_since("2d", now) == "20261119120000000"
    assert parse_since("2026-11-01") == "20261101000000000"
    with pytest.raises(ConfigError, match="--since expects"):
        parse_since("yesterday")


def test_an_empty_table(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "empty"))
    table.table_id(create=True)
    data = build(table).to_dict()
    assert data["verdict"]["healthy"] and data["commits"]["points"] == []
    assert data["table"]["last_commit"] is None and data["table"]["schema"] is None
    assert data["notes"]["commits"] == "No instant: nothing has been written to this table."
    assert data["notes"]["quality"].startswith("No error table")
    assert data["notes"]["layout"] == "No live data file."
    assert "<h1>Table report</h1>" in build(table).to_html()


def test_only_rolled_back_instants(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    for _ in range(2):
        instant = table.start_commit(heartbeat=False)
        marked_write(table, instant, ["p=1/a.parquet"])
        table.rollback(instant, force=True)
    data = build(table).to_dict()
    assert data["commits"]["rolled_back"] == 2 and data["commits"]["points"] == []
    assert data["notes"]["commits"] == ("No completed commit: 2 instant(s), 2 rolled back, "
                                        "0 in flight, 0 corrupt.")
    assert data["recovery"]["recent_rollbacks"] == [i.instant for i in table.timeline()][::-1]
    assert data["verdict"]["healthy"]


def test_a_corrupt_instant_is_a_finding_and_the_rest_is_shown(tmp_path: Path) -> None:
    table = written(str(tmp_path / "events"))
    broken = table.completed()[1][0]
    Path(table.commit_url(broken)).write_text("{not json")
    data = build(Table(table.path)).to_dict()
    # the error table's rows are read against the main table's commits: not readable now
    assert [(f["kind"], f["instant"]) for f in data["verdict"]["findings"]] == [
        ("corrupt_instant", broken), ("error_table_unreadable", None)]
    assert "the commit metadata is not JSON" in data["verdict"]["findings"][1]["what"]
    assert data["quality"]["error_rows"] == 0
    assert data["commits"]["completed"] == 2 and data["commits"]["corrupt"] == 1
    assert data["table"]["files"] == 4  # without the corrupt commit's files
    assert "1 corrupt (left out)" in data["notes"]["commits"]
    assert any(e["kind"] == "corrupt" and e["instant"] == broken
               for e in data["commits"]["events"])


def test_a_dead_writer_is_a_finding(tmp_path: Path) -> None:
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p=1/a.parquet", "p=1/b.parquet"])
    table.storage.put(table.storage.path(".markerstore/heartbeats", instant), json.dumps(
        {"instant": instant, "ts_ms": 1000, "host": "elsewhere", "pid": 1}).encode())
    data = build(table).to_dict()
    assert data["recovery"]["inflight"] == [{"instant": instant, "state": "inflight",
                                             "writer_alive": False, "markers": 2,
                                             "pending_uploads": 0}]
    assert [f["kind"] for f in data["verdict"]["findings"]] == ["dead_writer"]
    assert data["commits"]["events"][0]["kind"] == "in flight"


@pytest.mark.s3
def test_a_table_on_s3(moto_s3: Any) -> None:
    bucket = moto_s3.create_bucket("report-s3")
    table = written(f"s3://{bucket}/events", moto_s3.storage_options(), days=1,
                    rollback=False)
    started = time.perf_counter()
    data = build(table).to_dict()
    print(f"report on S3: {time.perf_counter() - started:.2f} s")
    assert data["table"]["url"] == f"s3://{bucket}/events"
    assert data["commits"]["completed"] == 1 and data["quality"]["error_rows"] == 5
    assert data["commits"]["rolled_back"] == 0
    assert [c["name"] for c in data["table"]["schema"]] == ["id", "amount", "day"]
    assert data["verdict"]["healthy"]


def test_the_command_writes_the_page_and_prints_the_same_figures(table: Table,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    run = CliRunner().invoke(cli, ["report", table.path, "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert run.output == f"{out}: report of {table.storage.url()} (healthy)\n"
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "No verify recorded" in page
    as_json = CliRunner().invoke(cli, ["report", table.path, "--json"])
    data = json.loads(as_json.output)
    expected = build(table).to_dict()
    for key in ("table", "commits", "quality", "layout", "verdict"):
        assert data[key] == json.loads(json.dumps(expected[key], default=str)), key
    bad = CliRunner().invoke(cli, ["report", table.path, "--since", "soon"])
    assert bad.exit_code == 2 and "--since expects" in bad.output
    missing = CliRunner().invoke(cli, ["report", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "no markerstore table" in missing.output


def test_verify_findings_make_the_verdict(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    table = written(str(tmp_path / "events"))
    (Path(table.path) / "day=orphan").mkdir()
    (Path(table.path) / "day=orphan" / "stray.parquet").write_bytes(b"x")
    report = build(table, verify=True)
    data = report.to_dict()
    assert data["recovery"]["verify"]["consistent"] is False
    monkeypatch.setattr(page, "available", lambda: False)  # the text, without charts
    assert "Verify: 1 finding(s)" in report._repr_html_()
    assert data["verdict"]["summary"] == "1 finding"
    assert data["verdict"]["findings"][0]["what"] == "day=orphan/stray.parquet"


def test_the_last_verify_is_in_the_report(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`markerstore verify` keeps a summary in the table; the report shows it when
    `--verify` is not given, the verdict of then, not a check of now."""
    table = written(str(tmp_path / "events"))
    monkeypatch.setattr(page, "available", lambda: False)  # the text, without charts
    assert build(table).to_dict()["recovery"]["last_verify"] is None
    assert "No verify recorded" in build(table)._repr_html_()
    (Path(table.path) / "day=orphan").mkdir()
    (Path(table.path) / "day=orphan" / "stray.parquet").write_bytes(b"x")
    assert CliRunner().invoke(cli, ["verify", table.path]).exit_code == 1
    report = build(table)
    last = report.to_dict()["recovery"]["last_verify"]
    assert (last["consistent"], last["findings"], last["repair"]) == (False, 1, False)
    assert last["by_kind"] == {"orphan_file": 1} and last["tables"][0] == table.storage.url()
    html = report._repr_html_()
    assert "Last verify" in html and 'data-figure="recovery.last_verify.findings">1<' in html
    assert report.to_dict()["verdict"]["healthy"]  # the verdict is of now

    repaired = CliRunner().invoke(cli, ["verify", table.path, "--repair", "--grace", "0"])
    assert repaired.exit_code == 1  # a file not named as markerstore names files is kept
    assert build(table).to_dict()["recovery"]["last_verify"]["repair"] is True
    (Path(table.path) / "day=orphan" / "stray.parquet").unlink()
    assert CliRunner().invoke(cli, ["verify", table.path]).exit_code == 0
    last = build(table).to_dict()["recovery"]["last_verify"]
    assert (last["consistent"], last["findings"]) == (True, 0)

    summary = Path(table.path) / ".markerstore" / "verify.json"
    before = summary.read_bytes()
    assert CliRunner().invoke(cli, ["verify", table.path, "--no-record"]).exit_code == 0
    assert summary.read_bytes() == before
    summary.write_text('{"at": 5}')
    assert "unreadable" in build(table).to_dict()["recovery"]["last_verify"]
    assert "cannot be read" in build(table)._repr_html_()


def test_verify_of_a_read_only_table_records_nothing_and_still_answers(tmp_path: Path
                                                                        ) -> None:
    import os

    table = written(str(tmp_path / "events"))
    meta = Path(table.path) / ".markerstore"
    if os.geteuid() == 0:  # root writes through permissions: a link out of the table
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (meta / "verify.json").symlink_to(outside / "verify.json")
    else:
        meta.chmod(0o555)
    try:
        result = CliRunner().invoke(cli, ["verify", table.path])
    finally:
        meta.chmod(0o755)
    assert result.exit_code == 0, result.output
    assert "consistent" in result.output
    assert not (tmp_path / "elsewhere" / "verify.json").exists()
    assert "unreadable" in (build(table).to_dict()["recovery"]["last_verify"] or {
        "unreadable": "absent"})


def test_a_check_is_rated_over_the_commits_that_applied_it(tmp_path: Path) -> None:
    """A commit's `checks` name what its write applied: a check that never failed is
    listed at 100%, a commit that did not apply a check does not rate it (None), and a
    commit from before checks were recorded counts for every check."""
    table = Table(str(tmp_path / "events"))

    def applied(*names: str) -> Any:
        return lambda write: write.metadata.update(checks=list(names))

    full_write(table, [batch(8, {"check": 2}, day=DAYS[0])])  # no record: every check
    full_write(table, [batch(9, {"check": 1}, day=DAYS[1])],
               before_main=applied("positive_amount", "has_day"))
    full_write(table, [batch(10, {}, day=DAYS[2])], before_main=applied())
    checks = {c["check"]: c for c in build(table).to_dict()["quality"]["checks"]}
    assert sorted(checks) == ["has_day", "positive_amount"]
    positive = checks["positive_amount"]
    assert positive["failed"] == 3
    assert positive["pass_rate_per_point"] == [0.8, 0.9, None]
    assert positive["pass_rate"] == round(1 - 3 / 20, 6)
    never = checks["has_day"]
    assert never["failed"] == 0 and never["pass_rate"] == 1.0
    assert never["pass_rate_per_point"] == [1.0, 1.0, None]  # the first: before records
