"""The error table publishes as its main table does: with Delta on, `<table>_errors` is a
Delta table whose rows are the committed error rows (read by delta-rs), one version per
error commit; an expire is a version removing the expired files before they go."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest

import errortable
from errortable import ErrorTables
from markerstore import Table
from markerstore.commit import WriteJob
from markerstore.commit.driver import ErrorTableSpec
from tests.support.commit_checks import open_table, run_job_tasks, split
from tests.support.formats import assert_delta_matches, delta_table

pytest.importorskip("deltalake")

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.int64()), ("payload", pa.string())])
CHECKS = {"not_tenth": "id % 10 <> 0"}


def _write(table: Table, start: int) -> None:
    job = WriteJob(table, partition_by=["day"], conflict_mode="append",
                   error_table=ErrorTableSpec(SCHEMA, "id", CHECKS),
                   error_tables=ErrorTables()).start()
    job.commit(run_job_tasks(job, split(200, 2, start=start)))


def test_the_error_table_is_a_delta_table_too(where: Any) -> None:
    table = open_table(where, markerstore__table__formats="delta",
                       markerstore__write__error__table__enabled="true")
    _write(table, 0)
    _write(table, 1000)
    errors = Table(table.storage.url() + "_errors", table.storage.storage_options)
    assert errors.formats() == ("delta",)
    assert_delta_matches(table)
    assert_delta_matches(errors)
    delta_rows = delta_table(errors).to_pyarrow_table()
    view = errortable.query(table.storage.url(), "SELECT count(*) FROM errors",
                            table.storage.storage_options).fetchall()[0][0]
    assert delta_rows.num_rows == view == 40  # every tenth id of 400
    # An expire is one more version, removing the expired files before they are deleted.
    later = datetime.now(timezone.utc) + timedelta(days=2)
    result = errortable.expire(errors, "1d", now=later)
    assert len(result.expired) == 2 and result.files_deleted
    delta = delta_table(errors)
    assert delta.version() + 1 == len(errors.completed()) == 3
    assert delta.to_pyarrow_table().num_rows == 0
    assert delta.file_uris() == []


def test_an_avro_error_table_publishes_no_format(local_where: Any) -> None:
    table = open_table(local_where, markerstore__table__formats="delta",
                       markerstore__write__error__table__enabled="true",
                       markerstore__write__error__table__format="avro")
    _write(table, 0)
    errors = Table(table.storage.url() + "_errors", table.storage.storage_options)
    assert errors.formats() == ()
    assert not errors.storage.exists(errors.storage.path("_delta_log"))
    assert_delta_matches(table)
    view = errortable.query(table.storage.url(), "SELECT count(*) FROM errors",
                            table.storage.storage_options).fetchall()[0][0]
    assert view == 20
