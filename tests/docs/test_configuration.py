"""docs/CONFIGURATION.md's option table is what the option definitions generate."""

from __future__ import annotations

import pytest

from markerstore import config
from tests.docs.configuration import PAGE, render, shown, table


def test_the_page_holds_the_generated_table() -> None:
    page = PAGE.read_text()
    assert render(page) == page, ("docs/CONFIGURATION.md is out of date with the option "
                                  "definitions: run `python -m tests.docs.configuration`")


def test_every_key_is_a_row_and_a_changed_doc_is_seen() -> None:
    rows = table().splitlines()[2:]
    assert len(rows) == len(config.describe())
    assert [row.split("`")[1] for row in rows] == sorted(row["key"] for row in config.describe())
    page = PAGE.read_text()
    stale = page.replace("Marker mechanism: direct", "Marker mechanism: direkt", 1)
    assert stale != page and render(stale) == page


@pytest.mark.parametrize(("key", "default", "cell"), [
    ("markerstore.ingest.task_bytes", 256 * 1024 * 1024, "`256 MiB`"),
    ("markerstore.heartbeat.interval_ms", 2 * 1024 * 1024, "`2097152`"),
    ("markerstore.ingest.csv.nullValue", "", "(empty)"),
    ("markerstore.write.uuid", None, "(none)"),
    ("markerstore.write.error.table.enabled", False, "`False`"),
])
def test_a_default_is_shown_as_a_reader_reads_it(key: str, default: object, cell: str) -> None:
    assert shown(key, default) == cell
