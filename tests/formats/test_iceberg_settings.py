"""An Iceberg identifier or catalog property that cannot work is refused when the write
starts, in one line, before anything is written.

An Iceberg table identifier is a namespace and a name (``namespace.table``: the Iceberg
REST spec's ``namespace`` and ``name``, pyiceberg's ``Catalog.identifier_to_tuple``); one
identifier names one table of a catalog; the catalog's properties are pyiceberg's own
names, and one it does not know is a typo that would otherwise be ignored (the table
then published into the embedded catalog instead). The catalog is read back by pyiceberg
alone."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from errortable import ErrorTables
from markerstore import Table, TableFormatError
from markerstore.commit import WriteJob
from markerstore.commit.driver import ErrorTableSpec
from tests.formats.readback import iceberg, iceberg_arrow
from tests.support.commit_checks import batches, run_job_tasks

pytest.importorskip("pyiceberg")

IDENTIFIER = "markerstore.table.iceberg.identifier"
CATALOG = "markerstore.table.iceberg.catalog."


def _table(path: Path, **options: str) -> Table:
    return Table(str(path), None, {"markerstore.table.formats": "iceberg", **options})


def _write(table: Table, **job: Any) -> Any:
    started = WriteJob(table, partition_by=["day"], conflict_mode="append", **job).start()
    return started.commit(run_job_tasks(started, {0: batches(20)}))


def _refused(table: Table, **job: Any) -> str:
    """The one-line refusal of a write, having checked it wrote nothing at all."""
    with pytest.raises(TableFormatError) as refused:
        _write(table, **job)
    assert table.timeline() == []
    folder = Path(table.storage.root)
    assert not (folder / "metadata").exists() and not (folder / ".markerstore/iceberg").exists()
    assert "\n" not in str(refused.value)
    return str(refused.value)


@pytest.mark.parametrize("identifier", ["no_namespace", "a..b", "markerstore.", ".events"])
def test_an_identifier_without_a_namespace_or_a_name_is_refused(
        tmp_path: Path, identifier: str) -> None:
    message = _refused(_table(tmp_path / "events", **{IDENTIFIER: identifier}))
    assert f"{IDENTIFIER}={identifier!r}" in message and "namespace.table" in message


def test_one_identifier_in_a_shared_catalog_is_one_table(tmp_path: Path) -> None:
    shared = {CATALOG + "uri": f"sqlite:///{tmp_path}/shared.db", IDENTIFIER: "lake.events"}
    first = _table(tmp_path / "a" / "events", **shared)
    _write(first)
    second = _table(tmp_path / "b" / "events", **shared)
    message = _refused(second)
    assert "lake.events" in message and str(tmp_path / "a" / "events") in message
    properties = {"type": "sql", "uri": f"sqlite:///{tmp_path}/shared.db"}
    assert iceberg("", "lake.events", properties).location().endswith("/a/events")
    assert iceberg_arrow("", "lake.events", properties).num_rows == 20


def test_an_unknown_catalog_property_is_named_with_the_closest(tmp_path: Path) -> None:
    table = _table(tmp_path / "events", **{CATALOG + "url": f"sqlite:///{tmp_path}/c.db"})
    message = _refused(table)
    assert f"'url' ({CATALOG}url)" in message and f"did you mean {CATALOG}uri?" in message
    assert not (tmp_path / "c.db").exists()


def test_an_error_table_whose_identifier_another_table_holds_is_refused(
        tmp_path: Path) -> None:
    """The error table publishes under the main table's namespace and its own folder's
    name: a write whose error table could not publish is refused before it starts."""
    shared = {CATALOG + "uri": f"sqlite:///{tmp_path}/shared.db"}
    holder = _table(tmp_path / "elsewhere", **shared, **{IDENTIFIER: "lake.events_errors"})
    _write(holder)
    table = _table(tmp_path / "events", **shared, **{
        IDENTIFIER: "lake.events", "markerstore.write.error.table.enabled": "true"})
    schema = pa.schema([("id", pa.int64()), ("day", pa.int64()), ("payload", pa.string())])
    message = _refused(table, error_table=ErrorTableSpec(schema, "id"),
                       error_tables=ErrorTables())
    assert "lake.events_errors" in message
    assert not os.path.exists(tmp_path / "events_errors" / "metadata")
