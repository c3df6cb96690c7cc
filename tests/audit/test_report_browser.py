"""The report as a person sees it: headless Chromium opens the page from a file with the
network off, and nothing but the file is requested, no console error is logged, every
chart is drawn with the expected number of bars, and every number in the page is the
one in ``--json``. Screenshots (light and dark) are kept in test-artifacts/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from tests.audit.test_report import written
from tests.support.browser import Browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

# What the page holds: charts with their bars and event lines, and the tagged numbers.
INSPECT = """(() => {
  const charts = [...document.querySelectorAll('figure.ms-chart')].map(f => {
    const svg = f.querySelector('svg'); const box = svg.getBoundingClientRect();
    return {id: f.dataset.chart, marks: +f.dataset.marks, events: +f.dataset.events,
            width: box.width, height: box.height,
            drawn: svg.querySelectorAll('g[id^="mark-"] > path').length,
            lines: svg.querySelectorAll('g[id^="event-"] path').length,
            title: svg.querySelector('title')?.textContent,
            label: svg.getAttribute('aria-labelledby')};
  });
  const figures = [...document.querySelectorAll('[data-figure]')].map(
    e => [e.dataset.figure, e.textContent]);
  return {charts, figures, background: getComputedStyle(document.body).backgroundColor};
})()"""


def _at(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


def _shown(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else \
        str(value)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("browser")
    table = written(str(folder / "events"))
    live = Table(table.path).start_commit(heartbeat=False)  # an instant in flight
    del live
    page = folder / "report.html"
    run = CliRunner().invoke(cli, ["report", table.path, "-o", str(page)])
    assert run.exit_code == 0, run.output
    data = json.loads(CliRunner().invoke(cli, ["report", table.path, "--json"]).output)
    return page, data


def test_the_report_in_a_browser(browser: Browser, report: tuple[Path, dict[str, Any]]
                                 ) -> None:
    page_file, data = report
    url = page_file.as_uri()
    page = browser.open(url)
    try:
        seen = page.evaluate(INSPECT)
        page.screenshot(str(ARTIFACTS / "report-light.png"))
    finally:
        page.close()
    assert page.errors == []
    assert page.requests == [url] and page.blocked == []
    charts = {c["id"]: c for c in seen["charts"]}
    points = len(data["commits"]["points"])
    assert charts["commit-rows"]["marks"] == points == 3
    assert charts["commit-errors"]["marks"] == points * len(
        {r for p in data["commits"]["points"] for r in p["by_reason"]})
    assert charts["reasons"]["marks"] == len(data["quality"]["by_reason"])
    assert charts["file-sizes"]["marks"] == len(data["layout"]["size_histogram"])
    assert len(charts) == 11
    for chart in seen["charts"]:
        assert chart["width"] > 100 and chart["height"] > 50, chart
        assert chart["drawn"] == chart["marks"] and chart["lines"] == chart["events"], chart
        assert chart["title"] and chart["label"] == f"{chart['id']}-title {chart['id']}-desc"
    assert charts["commit-rows"]["events"] == len(data["commits"]["events"]) == 2
    figures = dict(seen["figures"])
    assert len(figures) >= 15 and "quality.fingerprints.0.rows" in figures
    for path, text in figures.items():
        assert text == _shown(_at(data, path)), path
    assert figures["verdict.summary"] == "healthy"


def test_the_dark_page(browser: Browser, report: tuple[Path, dict[str, Any]]) -> None:
    page = browser.open(report[0].as_uri(), dark=True)
    try:
        seen = page.evaluate(INSPECT)
        page.screenshot(str(ARTIFACTS / "report-dark.png"))
    finally:
        page.close()
    assert page.errors == [] and page.blocked == []
    assert seen["background"] == "rgb(21, 23, 26)"
