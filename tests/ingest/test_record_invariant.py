"""One source record, one committed row or one committed error record: the check counts
what the committed files hold (tests/support/readback.py), so a writer that loses a
record and counts it anyway fails it. The mutant below is that writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from markerstore import Table
from markerstore.cli import sample
from markerstore.cli.demo import read_back
from markerstore.ingest.pipeline import ingest
from tests.support.mutants import workers_import, write_mutant
from tests.support.readback import assert_records, committed

pytestmark = pytest.mark.spark


def test_a_writer_that_drops_error_records_fails_the_read_back(spark: Any, tmp_path: Path
                                                                ) -> None:
    """The error file writer drops the first error record of each batch and counts it
    anyway. Run by Spark's Python workers (the mutant first on their PYTHONPATH), every
    counter still says rows in = rows written + error rows; the read-back of the
    committed files does not, and neither does the demo's proof."""
    info = sample.generate(str(tmp_path / "src"), rows=3000, files=2, bad_fraction=0.02)
    bad = {k: v for k, v in info.bad.items() if v}
    url = str(tmp_path / "events")
    with workers_import(spark, write_mutant(tmp_path / "mutant")):
        result = ingest(str(tmp_path / "src"), url, schema=sample.SCHEMA_DDL,
                        checks=sample.CHECKS, key=sample.KEY,
                        partition_by=sample.PARTITION_BY, spark=spark, progress=False,
                        markers="direct")
    # What the writers say: every record accounted for.
    assert result.rows_read == info.rows and result.error_records == bad
    # What the committed files hold: one error record short per block (a file is a block).
    found = committed(url)
    assert found.rows == info.good
    assert info.rows - found.records == len(info.paths)
    with pytest.raises(AssertionError, match="source records, but the committed files"):
        assert_records(url, info.rows, errors=bad)
    with pytest.raises(click.ClickException, match="not proved"):
        read_back(Table(url), result.commit.instant, info.rows, bad)

