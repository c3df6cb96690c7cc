"""One output layer for both CLIs: with --json a command prints its library result's own
``to_dict()``; as text it prints the same data. Both CLIs through click's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

import errortable
from markerstore import RollbackResult, Table
from markerstore.cli.errortable import cli as errortable_cli
from markerstore.cli.main import as_data, cli, output
from tests.support.errortable_writes import batch, full_write
from tests.support.files import exists, marked_write

ROLLBACK_KEYS = set(RollbackResult("i").to_dict())


def markerstore_run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="markerstore")


def errortable_run(*args: str) -> Result:
    return CliRunner().invoke(errortable_cli, list(args), prog_name="errortable")


def failed_write(url: str) -> tuple[Table, str]:
    """A table with one completed commit and one inflight instant that wrote one file."""
    table = Table(url)
    done = table.start_commit(heartbeat=False)
    marked_write(table, done, ["p=1/a.parquet"])
    table.commit(done, [{"path": "p=1/a.parquet", "rows": 1}])
    failed = table.start_commit(heartbeat=False)
    marked_write(table, failed, ["p=2/c.parquet", "p=2/d.parquet"])
    return table, failed


def test_rollback_json_is_rollback_result_to_dict(tmp_path: Path) -> None:
    table, failed = failed_write(str(tmp_path / "t"))
    out = markerstore_run("rollback", table.path, failed, "--force", "--json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert len(rows) == 1 and set(rows[0]) == ROLLBACK_KEYS
    assert rows[0] == {"instant": failed, "deleted_files": ["p=2/c.parquet", "p=2/d.parquet"],
                       "kept_append_files": [], "noop": False, "rolled_forward": False}
    assert not exists(table, "p=2/c.parquet")
    again = json.loads(markerstore_run("rollback", table.path, failed, "--json").output)
    # the library's own answer for the same call, shape for shape
    assert again == [table.rollback(failed).to_dict()]
    assert again[0]["noop"] is True


def test_rollback_text_says_the_same_as_its_json(tmp_path: Path) -> None:
    table, failed = failed_write(str(tmp_path / "t"))
    text = markerstore_run("rollback", table.path, failed, "--force")
    assert text.exit_code == 0, text.output
    header, row = text.output.splitlines()
    assert header.split() == ["instant", "status", "deleted_files"]
    assert row.split() == [failed, "rolled", "back", "2"]
    again = markerstore_run("rollback", table.path, failed).output.splitlines()[1]
    assert again.split() == [failed, "already", "rolled", "back", "0"]


@pytest.fixture
def pending(tmp_path: Path) -> Any:
    """A write whose main commit completed while its error commit stayed inflight."""
    return full_write(Table(str(tmp_path / "w" / "events")),
                      [batch(2, {"cast": 2, "check": 1})], complete=False)


def test_recover_text_and_json_print_the_same_result(pending: Any) -> None:
    url = pending.commit.url
    dry = errortable_run("recover", url, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    data = json.loads(dry.output)
    assert data == errortable.recover(url, dry_run=True).to_dict()
    assert data["rolled_forward"] == [pending.commit.instant]
    text = errortable_run("recover", url, "--dry-run")
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0].split() == ["instant", "action", "why", "error"]
    instant, action, *why = lines[1].split()
    # what recovery did (the result's lists) and why, the JSON's content
    assert (instant, action) == (pending.commit.instant, "rolled_forward")
    assert " ".join(why) == data["why"][instant]
    done = json.loads(errortable_run("recover", url, "--json").output)
    assert done["rolled_forward"] == [pending.commit.instant]
    assert json.loads(errortable_run("recover", url, "--json").output)["rolled_forward"] == []
    assert errortable_run("recover", url).output.strip() == "(no rows)"


@pytest.fixture
def written(tmp_path: Path) -> Any:
    return full_write(Table(str(tmp_path / "w" / "events")), [batch(2, {"cast": 2, "check": 1})])


@pytest.mark.parametrize(("args", "library"), [
    (["stats", "{url}"], lambda url: errortable.stats(url).to_dict()),
    (["show", "{url}"], lambda url: errortable.show(url)),
    (["replay", "{url}", "--where", "reason = 'check'", "--dry-run"],
     lambda url: errortable.replay(url, "reason = 'check'", dry_run=True).to_dict()),
    (["expire", "{url}", "--older-than", "30d", "--dry-run"],
     lambda url: errortable.expire(url, "30d", dry_run=True).to_dict()),
])
def test_every_errortable_json_is_the_library_result(written: Any, args: list[str],
                                                     library: Any) -> None:
    url = written.commit.url
    out = errortable_run(*(a.format(url=url) for a in args), "--json")
    assert out.exit_code == 0, out.output
    printed, expected = json.loads(out.output), json.loads(json.dumps(library(url),
                                                                      default=str))
    if isinstance(printed, dict):  # an expire's cutoff is "now minus the duration"
        printed.pop("cutoff", None)
        expected.pop("cutoff", None)
    assert printed == expected
    text = errortable_run(*(a.format(url=url) for a in args))
    assert text.exit_code == 0 and text.output.strip()


def test_output_prints_to_dict_or_hands_the_same_data_to_text(
        capsys: pytest.CaptureFixture[str]) -> None:
    results = [RollbackResult("a", deleted=pa.array(["x"])), RollbackResult("b", noop=True)]
    assert as_data(results) == [r.to_dict() for r in results]
    output(results, True)
    assert json.loads(capsys.readouterr().out) == [r.to_dict() for r in results]
    seen: list[Any] = []
    output(results, False, seen.append)
    assert seen == [[r.to_dict() for r in results]]
    output({"url": "http://x", "table": "t"}, False)
    assert capsys.readouterr().out.split() == ["url", "http://x", "table", "t"]
