"""Every core busy: a JSON-lines or CSV file of at least two minimal ranges is read by more
than one task (a 36 MB JSON-lines file on local[2] was one task: a file under
`split_bytes` was never cut). The split plan cuts each file that may be read in byte
ranges into ranges of equal size, none below the minimal range, two per core for the
source as a whole; a file that cannot be (compressed, UTF-16, a JSON document) stays
whole, and a `split_bytes` the user gives is kept as given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from markerstore import config
from markerstore.cli import cli
from markerstore.ingest import pipeline
from markerstore.ingest.pipeline import MIN_SPLIT_BYTES, balanced, ingest
from markerstore.ingest.sources import list_tasks
from tests.support.readback import assert_records

MB = 1_000_000


def _plan(path: Path, size: int, cores: int, **options: str) -> list[tuple[int, int | None]]:
    """The ranges (start, end) of a file of `size` bytes (its bytes are not read)."""
    with path.open("wb") as handle:
        handle.truncate(size)
    settings = config.resolve(options)
    tasks = list_tasks(str(path), split_bytes=settings[config.INGEST_SPLIT_BYTES],
                       json_documents=settings[config.INGEST_JSON_MULTILINE],
                       whole_files=settings[config.INGEST_ENCODING].startswith("utf-16"))
    return [(t.start, t.end) for t in balanced(tasks, cores, settings)]


@pytest.mark.parametrize("name", ["events.jsonl", "events.csv"])
def test_a_mid_sized_file_is_cut_so_that_every_core_is_busy(tmp_path: Path, name: str
                                                           ) -> None:
    path = tmp_path / name
    assert _plan(path, 36 * MB, 2) == [(0, 18 * MB), (18 * MB, None)]
    assert len(_plan(path, 36 * MB, 4)) == 2  # two minimal ranges: two tasks
    assert len(_plan(path, 200 * MB, 4)) == 8  # two a core
    assert _plan(path, 2 * MIN_SPLIT_BYTES - 1, 2) == [(0, None)]  # under two minimal ranges
    ranges = _plan(path, 100 * MB, 2)
    sizes = [(end or 100 * MB) - start for start, end in ranges]
    assert len(ranges) == 4 and max(sizes) - min(sizes) <= 1 and min(sizes) >= MIN_SPLIT_BYTES
    # what cannot be read in ranges, or was told how, stays as it is
    for other, options in ((f"{name}.gz", {}), (name, {"encoding": "utf-16"}),
                           (name, {config.INGEST_SPLIT_BYTES: str(64 << 20)})):
        assert _plan(tmp_path / other, 36 * MB, 2, **options) == [(0, None)], other
    if name.endswith(".jsonl"):
        assert _plan(path, 36 * MB, 2, multiLine="true") == [(0, None)]


def _events(path: Path, rows: int) -> None:
    if path.suffix == ".csv":
        path.write_text("id,name\n" + "".join(f"{i},name {i:08d}\n" for i in range(rows)))
    else:
        path.write_text("".join(json.dumps({"id": i, "name": f"name {i:08d}"}) + "\n"
                                for i in range(rows)))


@pytest.mark.spark
@pytest.mark.parametrize("name", ["events.jsonl", "events.csv"])
def test_one_file_of_two_minimal_ranges_runs_on_both_cores(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Through Spark (the tests' local[2]) and the CLI, with a minimal range of 256 KiB so
    that the file stays small: two source splits or more (two a core), two Spark tasks,
    every record once."""
    monkeypatch.setattr(pipeline, "MIN_SPLIT_BYTES", 256 * 1024)
    source = tmp_path / name
    _events(source, 30_000)
    assert source.stat().st_size > 2 * 256 * 1024
    result = ingest(str(source), str(tmp_path / "api"), schema="id BIGINT, name STRING",
                    spark=spark, markers="direct", progress=False)
    out = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "cli"), "--json",
                                   "--schema", "id BIGINT, name STRING", "--markers", "direct",
                                   "--no-progress"])
    assert out.exit_code == 0, out.output
    for summary in (result.summary(), json.loads(out.stdout)):
        assert summary["source_splits"] >= 2 and summary["spark_tasks"] == 2, summary
        assert summary["rows_written"] == 30_000 and summary["error_records"] == 0
    for table in ("api", "cli"):
        assert_records(str(tmp_path / table), 30_000, rows=30_000, errors={})
