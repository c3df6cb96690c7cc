"""Stored values never act on a terminal or a page: an error value holding an escape
sequence (OSC 52 sets the clipboard, ``\\x1b[2J`` clears the screen), a bidi override or
a line separator is printed visibly escaped by both CLIs' text output, and escaped in the
report page and notebook HTML, as is markup (``<script>``).

The CLIs run as the installed console scripts, in their own processes."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import errortable
from markerstore import Table
from markerstore.audit import build
from markerstore.cli.main import cli
from markerstore.render import page as page_module
from markerstore.render.text import visible
from tests.support.errortable_writes import full_write

OSC52 = "\x1b]52;c;aGFja2Vk\x07"          # sets the clipboard to "hacked"
CLEAR = "\x1b[2J"
BIDI = "\u202e"                            # right-to-left override
C1 = "\x9b31m"                             # the C1 control sequence introducer
SEPARATOR = "\u2028"
SCRIPT = "<script>alert(1)</script>"
RAW = (OSC52, CLEAR, BIDI, C1, SEPARATOR, "\x7f", "\x1b")


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


@pytest.fixture(scope="module")
def evil(tmp_path_factory: pytest.TempPathFactory) -> Table:
    """A table whose error rows (two cast errors, one failed check) hold escape sequences
    in the key, the bad value (so the record and the message) and markup."""
    table = Table(str(tmp_path_factory.mktemp("evil") / "events"))
    source = pa.table({"id": [f"{CLEAR}{BIDI}k1", f"{SCRIPT}{SEPARATOR}k2", SCRIPT, "k4"],
                       "amount": [f"x{OSC52}", f"y{C1}\x7f{SCRIPT}", "-4", "4"],
                       "day": ["2024-01-01"] * 4})
    full_write(table, [source])
    return table


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out


def _assert_escaped(text: str) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} printed raw"
    assert "\\x1b]52;c;aGFja2Vk\\x07" in text and "\\u202e" in text


def test_errortable_show_escapes_control_characters(evil: Table) -> None:
    out = _run(_bin("errortable"), "show", f"{evil.path}_errors")
    _assert_escaped(out.stdout)
    assert "\\x9b31m" in out.stdout and "\\u2028" in out.stdout


def test_markerstore_sql_escapes_control_characters(evil: Table) -> None:
    out = _run(_bin("markerstore"), "sql", evil.path,
               "SELECT record_key, error, record FROM errors ORDER BY record_key")
    _assert_escaped(out.stdout)
    # one line per row: a separator in a value forges no row
    assert len(out.stdout.splitlines()) == 1 + 3


def test_json_output_stays_exact(evil: Table) -> None:
    out = CliRunner().invoke(cli, ["sql", evil.path, "--json",
                                   "SELECT record FROM errors ORDER BY record"])
    assert out.exit_code == 0, out.output
    assert not any(raw in out.output for raw in (OSC52, CLEAR, "\x1b"))
    records = [json.loads(row["record"]) for row in json.loads(out.output)]
    assert f"x{OSC52}" in [r["amount"] for r in records]  # the value, exactly


@pytest.mark.parametrize("args", [
    ["errortable", "stats"], ["errortable", "query", "{errors}", "SELECT * FROM errors"],
    ["timeline"], ["errortable", "show", "{errors}", "--limit", "5"]])
def test_every_text_command_escapes(evil: Table, args: list[str]) -> None:
    target = {"{errors}": f"{evil.path}_errors"}
    argv = [target.get(a, a) for a in args]
    if len(argv) <= 2 and argv[0] != "timeline":
        argv.append(f"{evil.path}_errors")
    elif argv == ["timeline"]:
        argv.append(evil.path)
    out = CliRunner().invoke(cli, argv)
    assert out.exit_code == 0, out.output
    assert "\x1b" not in out.output and BIDI not in out.output and "\x9b" not in out.output


def test_error_messages_are_one_visible_line(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["timeline", str(tmp_path / f"no{CLEAR}table")])
    assert out.exit_code == 2
    assert "\x1b" not in out.output and "\\x1b[2J" in out.output


def test_visible_escapes_exactly_the_controls() -> None:
    assert visible("a\tb\nc\x00\x7f\x85\u2028\u2029\u202a\u2066\u200f") == \
        "a\\x09b\\x0ac\\x00\\x7f\\x85\\u2028\\u2029\\u202a\\u2066\\u200f"
    assert visible("día ✓ 漢字 \\x1b") == "día ✓ 漢字 \\x1b"


def test_report_page_and_notebook_html_escape_everything(
        evil: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    report = build(evil)
    page = report.to_html()  # with its charts (labels are stored values too)
    monkeypatch.setattr(page_module, "available", lambda: False)
    fragment = report._repr_html_()  # the same sections, for notebooks
    stats = errortable.stats(f"{evil.path}_errors")._repr_html_()
    shown = errortable.show(f"{evil.path}_errors")
    assert any(SCRIPT in str(row["record"]) for row in shown)  # the attack is stored
    for text in (page, fragment, stats):
        assert "<script" not in text.lower()
        assert all(raw not in text for raw in RAW)
    for text in (page, fragment):
        assert html.escape("<script>") in text  # shown, as text
    assert "\\x1b]52;c;aGFja2Vk\\x07" in page
