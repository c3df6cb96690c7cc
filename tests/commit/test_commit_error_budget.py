"""The error budget: a write whose bad rows exceed max_fraction or max_records is rolled
back in its job commit, data and error rows alike, and fails with one line of counts."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import errortable
from errortable import ErrorTables
from markerstore import Table, config
from markerstore.commit import WriteJob
from markerstore.commit.driver import ErrorTableSpec
from markerstore.errors import ConfigError, ErrorBudgetExceeded
from markerstore.timeline import COMPLETED, ROLLEDBACK
from tests.support.commit_checks import assert_clean, data_files, open_table, run_job_tasks, split
from tests.support.readback import assert_records

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.int64()), ("payload", pa.string())])
CHECKS = {"not_tenth": "id % 10 <> 0", "small_id": "id < 990"}  # 100 + 9 bad of 1,000
ENABLED = {"markerstore__write__error__table__enabled": "true"}


def _write(table: Table) -> tuple[WriteJob, list[Any]]:
    job = WriteJob(table, partition_by=["day"], conflict_mode="append",
                   error_table=ErrorTableSpec(SCHEMA, "id", CHECKS),
                   error_tables=ErrorTables()).start()
    return job, run_job_tasks(job, split(1000, 2))


def _error_table(table: Table) -> Table:
    return Table(table.storage.url() + "_errors", table.storage.storage_options)


def _error_files(table: Table) -> list[str]:
    return data_files(_error_table(table))


@pytest.mark.parametrize("budget", [
    {"markerstore__write__error__table__max_records": "50"},
    {"markerstore__write__error__table__max_fraction": "0.05"},
])
def test_a_write_over_its_error_budget_leaves_no_data_and_no_error_row(
        location: Any, budget: dict[str, str]) -> None:
    table = open_table(location, **ENABLED, **budget)
    job, results = _write(table)
    assert sum(sum(r.summary.error_records.values()) for r in results) == 109
    assert _error_files(table)  # the error files are written before job commit
    with pytest.raises(ErrorBudgetExceeded) as raised:
        job.commit(results)
    message = str(raised.value)
    assert "\n" not in message
    assert "109 of 1000 rows are bad (check 109)" in message
    assert ("max_records=50" in message) == ("max_records" in str(budget))
    assert ("10.90% of rows" in message) == ("max_fraction" in str(budget))
    assert "commonest message:" in message and "not_tenth" in message
    assert raised.value.error_records == {"check": 109} and raised.value.rows_in == 1000
    assert raised.value.commonest_message is not None
    assert "not_tenth" in raised.value.commonest_message
    assert table.state(job.instant) == ROLLEDBACK
    assert job.error_commit.table.state(job.error_commit.instant) == ROLLEDBACK
    assert data_files(table) == []
    assert _error_files(table) == []
    assert errortable.read(_error_table(table).path,
                           table.storage.storage_options).fetchall() == []
    assert_clean(table)


def test_a_write_within_its_budget_commits_data_and_error_rows(location: Any) -> None:
    table = open_table(location, **ENABLED,
                       markerstore__write__error__table__max_records="109",
                       markerstore__write__error__table__max_fraction="0.11")
    job, results = _write(table)
    result = job.commit(results)
    assert table.state(job.instant) == COMPLETED
    assert_records(table, 1000, rows=891, errors={"check": 109})
    assert result.rows_written == 891 and result.error_records == {"check": 109}


def test_fail_fast_fails_on_the_first_bad_row(tmp_path: Any) -> None:
    table = Table(str(tmp_path / "t"), None, {
        "markerstore.write.error.table.enabled": "true",
        "markerstore.write.error.table.max_records": 0})
    job = WriteJob(table, error_table=ErrorTableSpec(SCHEMA, "id", {"one": "id <> 7"}),
                   error_tables=ErrorTables()).start()
    results = run_job_tasks(job, split(100, 1))
    with pytest.raises(ErrorBudgetExceeded, match=r"1 of 100 rows are bad \(check 1\)"):
        job.commit(results)
    assert data_files(table) == [] and _error_files(table) == []


def test_the_budget_defaults_to_no_limit_and_bad_values_are_refused() -> None:
    settings = config.resolve({})
    assert settings[config.ERROR_MAX_FRACTION] is None
    assert settings[config.ERROR_MAX_RECORDS] is None
    for key, value in ((config.ERROR_MAX_FRACTION, "1.5"), (config.ERROR_MAX_FRACTION, "x"),
                       (config.ERROR_MAX_RECORDS, "-1"), (config.ERROR_MAX_RECORDS, "2.5")):
        with pytest.raises(ConfigError, match=key):
            config.resolve({key: value})
    assert config.resolve({config.ERROR_MAX_FRACTION: "0.25"})[config.ERROR_MAX_FRACTION] == 0.25


def test_ingest_flags_set_the_budget_options(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Any) -> None:
    from click.testing import CliRunner

    import markerstore.ingest.pipeline as pipeline
    from markerstore.cli.main import cli

    seen: dict[str, Any] = {}

    class Result:
        def summary(self) -> dict[str, Any]:
            return {"instant": "x"}

    def fake_ingest(source: str, table: str, **kwargs: Any) -> Result:
        seen.update(kwargs["options"])
        return Result()

    monkeypatch.setattr(pipeline, "ingest", fake_ingest)
    out = CliRunner().invoke(cli, ["ingest", str(tmp_path / "in.json"), str(tmp_path / "t"),
                                   "--max-error-fraction", "0.01", "--max-errors", "5"])
    assert out.exit_code == 0, out.output
    assert seen == {config.ERROR_MAX_FRACTION: 0.01, config.ERROR_MAX_RECORDS: 5}
    bad = CliRunner().invoke(cli, ["ingest", "a", "b", "--max-error-fraction", "2"])
    assert bad.exit_code == 2
