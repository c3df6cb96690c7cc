"""A number the column's floating point type cannot hold is a cast error, never an
infinity in a row: Arrow (and Java's Float.parseFloat, so Spark) turns ``1e39`` read as
FLOAT and ``1e400`` read as DOUBLE into infinity, which is a wrong row. An infinity the
source says (JSON's ``Infinity`` under allowNonNumericNumbers, CSV's ``inf``) stays one;
the largest finite values are read."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.support.ingest_run import reasons, run

DDL = "id BIGINT, f FLOAT, d DOUBLE"
FLOAT32_MAX = 3.4028234663852886e38


def test_json_numbers_out_of_float_range_are_cast_errors(tmp_path: Path) -> None:
    lines = [b'{"id": 1, "f": 1.5}', b'{"id": 2, "f": 1e39}', b'{"id": 3, "f": -3.5e38}',
             b'{"id": 4, "f": 3.4e38}', b'{"id": 5, "f": Infinity}',
             b'{"id": 6, "f": ' + b"1" * 42 + b"}", b'{"id": 7, "f": 1e-50}',
             b'{"id": 8, "d": 1.7976931348623157e308}']
    rows, errors = run(tmp_path / "in.json", b"\n".join(lines) + b"\n", DDL)
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == [1, 4, 5, 7, 8]
    assert by_id[4]["f"] == pytest.approx(3.4e38, rel=1e-6) and by_id[4]["f"] <= FLOAT32_MAX
    assert by_id[5]["f"] == math.inf and by_id[7]["f"] == 0.0  # underflow: the nearest value
    assert by_id[8]["d"] == 1.7976931348623157e308
    assert reasons(errors) == [("cast", "2"), ("cast", "3"), ("cast", "6")]
    assert all("out of range for float" in e["message"] for e in errors)


@pytest.mark.parametrize("rows_before", [0, 200])  # alone, and in a vectorized block
def test_csv_numbers_out_of_range_are_cast_errors(tmp_path: Path, rows_before: int) -> None:
    good = b"".join(b"%d,1.5,2.5\n" % (100 + i) for i in range(rows_before))
    data = (b"id,f,d\n" + good + b"1,1e39,1\n2,inf,-Infinity\n3,-3.4e38,1e400\n"
            b"4,3e38,-1e308\n5,-1e39,nan\n")
    rows, errors = run(tmp_path / "in.csv", data, DDL)
    by_id = {r["id"]: r for r in rows if r["id"] < 100}
    assert sorted(by_id) == [2, 4] and len(rows) == rows_before + 2
    assert (by_id[2]["f"], by_id[2]["d"]) == (math.inf, -math.inf)
    assert by_id[4]["f"] == pytest.approx(3e38, rel=1e-6) and by_id[4]["d"] == -1e308
    first = rows_before + 2  # the header is line 1
    assert reasons(errors) == [("cast", str(first)), ("cast", str(first + 2)),
                               ("cast", str(first + 4))]
    messages = sorted(e["message"] for e in errors)
    assert any("'1e400' is out of range for double" in m for m in messages)
    assert sum("out of range for float" in m for m in messages) == 2
