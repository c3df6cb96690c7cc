"""Each format publishes on its own, and one that cannot is loud, never silent.

A truncated ``_delta_log`` JSON (a version cut short: delta-rs cannot read the log) does
not fail the write (its commit is markerstore's completed instant) and does not hold
Iceberg back: pyiceberg reads the new rows at once. The write's result says
``delta pending (<why>)``, ``markerstore report`` shows the format and, once the log reads
again, its backlog, ``markerstore verify`` exits 1 with a finding, and the next write
publishes what Delta missed."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.main import cli
from markerstore.commit import WriteJob
from tests.formats.readback import delta_arrow, delta_sql, iceberg_arrow
from tests.support.commit_checks import batches, open_table, run_job_tasks

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")


def _write(table: Table, start: int) -> Any:
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    return job.commit(run_job_tasks(job, {0: batches(30, start=start)}))


def _cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), prog_name="markerstore",
                              catch_exceptions=False)


def _ids(data: pa.Table) -> list[int]:
    return sorted(data.column("id").to_pylist())


def test_a_corrupt_delta_log_holds_back_neither_iceberg_nor_the_write(
        local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta,iceberg")
    url = table.storage.url()
    _write(table, 0)
    _write(table, 100)
    latest = table.storage.path("_delta_log/00000000000000000001.json")
    whole = table.storage.get(latest)
    table.storage.put(latest, whole[: len(whole) // 2])  # a version cut short

    result = _write(table, 200)
    everything = list(range(30)) + list(range(100, 130)) + list(range(200, 230))
    assert _ids(iceberg_arrow(url)) == everything
    formats = {f.name: f for f in result.formats}
    assert formats["iceberg"].ok and formats["iceberg"].position
    assert not formats["delta"].ok and formats["delta"].reason
    assert result.published.startswith("published: delta pending (")
    assert ", iceberg snapshot " in result.published
    verified = _cli("verify", url, "--json", "--no-record")
    assert verified.exit_code == 1
    assert [(f["kind"], f["path"]) for f in json.loads(verified.output)] == [
        ("format_error", "delta")]

    table.storage.put(latest, whole)  # the log reads again: its backlog shows
    report = json.loads(_cli("report", url, "--json").output)
    shown = {f["format"]: f for f in report["recovery"]["formats"]}
    assert shown["delta"]["backlog"] == 1 and shown["delta"]["oldest_pending"] == \
        result.instant
    assert shown["iceberg"]["backlog"] == 0
    assert not report["verdict"]["healthy"]
    assert "format_backlog" in {f["kind"] for f in report["verdict"]["findings"]}
    verified = _cli("verify", url, "--json", "--no-record")
    assert verified.exit_code == 1
    assert [(f["kind"], f["path"], f["instant"]) for f in json.loads(verified.output)] == [
        ("format_missing_instant", "delta", result.instant)]

    retried = _write(table, 300)  # the next write publishes what Delta missed
    assert "pending" not in retried.published
    assert _ids(delta_arrow(url)) == _ids(delta_sql(url)) == everything + list(range(300, 330))
    assert _cli("verify", url, "--no-record").exit_code == 0
    assert json.loads(_cli("report", url, "--json").output)["verdict"]["healthy"]


def test_an_empty_commit_before_the_formats_have_a_table_waits_without_a_warning(
        local_where: Any, caplog: pytest.LogCaptureFixture) -> None:
    """An empty commit cannot create a format's table (no schema): it waits, pending with
    its reason, for the first commit with files, which creates the table and publishes
    both. Pending by design, so it is said at INFO, not as a warning every write."""
    table = open_table(local_where, markerstore__table__formats="delta,iceberg")
    job = WriteJob(table, partition_by=["day"], conflict_mode="append").start()
    with caplog.at_level("INFO", logger="markerstore"):
        empty = job.commit([])
    assert {f.name: (f.ok, f.waiting) for f in empty.formats} == {
        "delta": (False, True), "iceberg": (False, True)}
    assert all("has no file to give" in (f.reason or "") for f in empty.formats)
    assert not [r for r in caplog.records if r.levelname == "WARNING"
                and "not published" in r.getMessage()]
    assert [r for r in caplog.records if "not published" in r.getMessage()]
    result = _write(table, 0)
    assert all(f.ok for f in result.formats)
    assert _ids(iceberg_arrow(table.storage.url())) == list(range(30))
