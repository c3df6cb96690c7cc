"""Reports and views take any table the timeline accepts: a long check name, a reason key
with quotes, a stray file in an in-flight write's marker folder. Each is laid out, read
as data, or listed as a finding; none makes a command exit 1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.audit.report import build
from markerstore.cli.main import cli
from markerstore.markers.base import BATCHED, DIRECT, MARKERS_DIR, ensure_marker_type
from markerstore.markers.segments import segment_name
from markerstore.render.charts import LABEL_CHARS, Chart, Series, alt_text, available, svg
from tests.support.files import marked_write

LONG = "amount_is_positive_and_below_the_limit_agreed_with_finance_" + "x" * 33  # 92 chars
QUOTED = 'it\'s "quoted" $.x[0]'


def committed(path: Path, error_records: dict[str, int] | None = None,
              checks: list[str] | None = None) -> Table:
    """A table with one commit whose metadata is rewritten as another writer may have
    written it (the timeline reads it back and accepts it)."""
    table = Table(str(path))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    table.commit(instant, ["p/a.parquet"])
    commit_file = Path(table.commit_url(instant))
    meta = json.loads(commit_file.read_bytes())
    if error_records is not None:
        meta["error_records"] = error_records
    if checks is not None:
        meta["checks"] = checks
    commit_file.write_text(json.dumps(meta))
    reread = Table(str(path))
    assert reread.commit_metadata(instant)["error_records" if error_records else "counts"]
    return reread


@pytest.mark.skipif(not available(), reason="matplotlib is not installed")
@pytest.mark.parametrize("length", [92, 300, 5000])
def test_a_chart_lays_out_any_legend_name(length: int) -> None:
    name = ("n" * length)
    chart = Chart("checks", "Pass rate", ["a", "b"], [Series(name, [0.5, 1.0]),
                                                       Series("short", [1.0, 0.9])],
                  "pass rate", description="Two checks.", percent=True)
    drawn = svg(chart)
    assert name in drawn  # in full in the alt text
    assert "n" * LABEL_CHARS not in re.sub(r"<desc.*?</desc>", "", drawn, flags=re.S)
    assert alt_text(chart).startswith("Two checks. In full: nnn")


@pytest.mark.skipif(not available(), reason="matplotlib is not installed")
def test_a_horizontal_chart_lays_out_any_category_label() -> None:
    label = "day=" + "x" * 400
    chart = Chart("parts", "Bytes per partition", [label, "day=2"],
                  [Series("bytes", [10, 20])], "bytes", horizontal=True)
    assert label in svg(chart)


def test_report_with_a_long_check_name_draws_its_charts(tmp_path: Path) -> None:
    table = committed(tmp_path / "t", error_records={"check": 2}, checks=[LONG, "short"])
    report = build(table)
    assert {c["check"] for c in report.to_dict()["quality"]["checks"]} == {LONG, "short"}
    page = report.to_html()
    if available():
        assert LONG in page and 'data-chart="check-pass-rate"' in page


def test_a_reason_key_with_quotes_is_data_not_a_json_path(tmp_path: Path) -> None:
    table = committed(tmp_path / "t", error_records={QUOTED: 3, "cast": 2})
    points = build(table).to_dict()["commits"]["points"]
    assert points[0]["by_reason"] == {QUOTED: 3, "cast": 2}
    out = CliRunner().invoke(cli, ["report", table.path, "--json"])
    assert out.exit_code == 0, out.output


def with_a_stray_marker_file(path: Path, mechanism: str = DIRECT) -> tuple[Table, str]:
    """A completed commit, then an in-flight write whose marker folder holds a file no
    marker mechanism wrote: a stray file (direct), a truncated segment (batched)."""
    table = committed(path)
    instant = table.start_commit(heartbeat=False)
    if mechanism == DIRECT:
        marked_write(table, instant, ["q/b.parquet"])
        stray = Path(table.storage.path(MARKERS_DIR, instant, "q", "part-0.tmp"))
    else:
        ensure_marker_type(table.storage, instant, BATCHED)
        stray = Path(table.storage.path(MARKERS_DIR, instant, segment_name(1, "parquet")))
    stray.write_bytes(b"half")
    return table, instant


@pytest.mark.parametrize("mechanism", [DIRECT, BATCHED])
def test_a_stray_marker_file_is_a_finding_of_the_report(tmp_path: Path, mechanism: str
                                                        ) -> None:
    table, instant = with_a_stray_marker_file(tmp_path / "t", mechanism)
    named = "part-0.tmp" if mechanism == DIRECT else segment_name(1, "parquet")
    out = CliRunner().invoke(cli, ["report", table.path, "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    found = [f for f in data["verdict"]["findings"] if f["kind"] == "unreadable_markers"]
    assert [f["instant"] for f in found] == [instant] and named in found[0]["what"]
    assert not data["verdict"]["healthy"]
    page = tmp_path / "r.html"
    out = CliRunner().invoke(cli, ["report", table.path, "-o", str(page)])
    assert out.exit_code == 0 and named in page.read_text()


def test_sql_over_a_table_with_a_stray_marker_file(tmp_path: Path) -> None:
    """The other views answer; a query of `markers` fails in one line naming the file."""
    table, _ = with_a_stray_marker_file(tmp_path / "t")

    def sql(query: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "markerstore.cli", "sql", table.path,
                               query, "--json"], capture_output=True, text=True, timeout=120)

    run = sql("SELECT count(*) AS n FROM commits")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert json.loads(run.stdout) == [{"n": 2}]
    run = sql("SELECT count(*) AS n FROM markers")
    assert run.returncode == 1 and run.stdout == ""
    error, = run.stderr.splitlines()
    assert "part-0.tmp" in error and error.startswith("markerstore: error: ")
