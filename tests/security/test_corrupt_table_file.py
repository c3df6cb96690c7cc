"""``.markerstore/table.json`` (the table's stable id) corrupt: ``markerstore verify`` reports
it as a finding and exits 1, in text and JSON; an absent one (a table older than ids) is
fine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.table import TABLE_FILE
from tests.support.files import marked_write


def table_with_a_commit(path: Path) -> Table:
    table = Table(str(path))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p/a.parquet"])
    table.commit(instant, ["p/a.parquet"])
    return table


@pytest.mark.parametrize("payload", [b"{not json", b"[]", b'{"table_id": "../../x"}'])
def test_verify_reports_a_corrupt_table_file(tmp_path: Path, payload: bytes) -> None:
    table = table_with_a_commit(tmp_path / "t")
    table.storage.put(table.storage.path(TABLE_FILE), payload)

    out = CliRunner().invoke(cli, ["verify", table.path, "--json"])
    assert out.exit_code == 1, out.output
    rows = json.loads(out.output)
    assert [(r["kind"], r["path"]) for r in rows] == [("corrupt_table_file", TABLE_FILE)]
    assert "table_id" in rows[0]["action"] or "not JSON" in rows[0]["action"]
    out = CliRunner().invoke(cli, ["verify", table.path])
    assert out.exit_code == 1 and "corrupt_table_file" in out.output
    assert "consistent" not in out.output


def test_a_table_without_an_id_is_consistent(tmp_path: Path) -> None:
    table = table_with_a_commit(tmp_path / "t")
    table.storage.delete(table.storage.path(TABLE_FILE))
    out = CliRunner().invoke(cli, ["verify", table.path])
    assert out.exit_code == 0 and ": consistent (" in out.output, out.output
