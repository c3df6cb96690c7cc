"""TIMESTAMP columns written from a Spark session in another time zone than UTC.

Spark hands a session's batches over with its zone (``timestamp[us,
tz=America/New_York]``); the instants are what the columns hold. Delta's ``timestamp`` is
UTC (the protocol; delta-rs takes no other zone), Iceberg's ``timestamptz`` too (the
spec), and a TIMESTAMP partition folder holds the session's wall-clock time, as Spark
names its folders. Both writers (``markerstore.spark.write`` and ``format("markerstore")``)
write such a table; delta-rs (pyarrow and DataFusion) and pyiceberg read the same
instants back, whatever zone the session had, including the hour a clock falls back
(two instants, one wall-clock time) and one it springs forward over; TIMESTAMP_NTZ stays
the wall-clock time it was."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from tests.formats.readback import delta, every_reader, iceberg
from tests.support.entry_points import ENTRIES, write_with

pytestmark = pytest.mark.spark
pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")

ZONE = "spark.sql.session.timeZone"
UTC = dt.timezone.utc


def _at(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


# (id, instant, partition instant, wall-clock time without a zone)
DATA = [
    (1, _at(2024, 3, 10, 6, 30), _at(2024, 1, 15, 17), dt.datetime(2024, 3, 10, 2, 30)),
    (2, _at(2024, 3, 10, 7, 30), _at(2024, 1, 15, 17), None),   # 03:30 EDT: after the gap
    (3, _at(2024, 11, 3, 5, 30), _at(2024, 7, 4, 16), dt.datetime(2024, 11, 3, 1, 30)),
    (4, _at(2024, 11, 3, 6, 30), _at(2024, 7, 4, 16, 0, 0, 250000), None),  # 01:30 twice
    (5, None, _at(2024, 7, 4, 16), dt.datetime(1969, 12, 31, 23, 59, 59, 999999)),
]


def _by_id(data: Any) -> dict[int, tuple[Any, ...]]:
    """Each row's values by id, timestamps as UTC instants (as engines name zones
    differently) and wall-clock times as they are."""
    def instant(value: Any) -> Any:
        return None if value is None else value.astimezone(UTC)

    return {r["id"]: (instant(r["at"]), instant(r["day"]), r["wall"])
            for r in data.to_pylist()}


def test_timestamps_from_a_session_in_another_zone_are_utc_instants_in_both_formats(
        spark: Any, tmp_path: Path) -> None:
    options = {"markerstore.table.formats": "delta,iceberg"}
    spark.conf.set(ZONE, "America/New_York")
    try:
        df = spark.createDataFrame(DATA, "id INT, at TIMESTAMP, day TIMESTAMP, "
                                         "wall TIMESTAMP_NTZ").coalesce(1)
        urls = {entry: str(tmp_path / entry) for entry in ENTRIES}
        results = {entry: write_with(entry, spark, df, url, partition_by="day",
                                     options=options) for entry, url in urls.items()}
    finally:
        spark.conf.set(ZONE, "UTC")
    expected = {i: (at, day, wall) for i, at, day, wall in DATA}
    for entry, url in urls.items():
        for reader, data in every_reader(url).items():
            assert _by_id(data) == expected, f"{entry}: {reader}"
        kinds = {f.name: f.type.type for f in delta(url).schema().fields}
        assert kinds == {"id": "integer", "at": "timestamp", "day": "timestamp",
                         "wall": "timestamp_ntz"}
        types = {f.name: str(f.field_type) for f in iceberg(url).schema().fields}
        assert types == {"id": "int", "at": "timestamptz", "day": "timestamptz",
                         "wall": "timestamp"}
    for entry, result in results.items():  # the format writer's: ms.last_commit's
        assert result.published.startswith("published: delta v0, iceberg snapshot "), entry
