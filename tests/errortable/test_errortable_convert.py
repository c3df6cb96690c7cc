"""Validator._convert_values (values of an unexpected Python type converted apart, strings
cast together with DuckDB's hint, a failing value cast once) gives exactly what converting
slice by slice gives (markerstore.values.cast.by_halves): the same values, the same failing
rows with the same messages."""

from __future__ import annotations

import decimal
import random
from typing import Any

import pyarrow as pa
import pytest

from errortable import Validator
from errortable.capture.records import UidSource
from markerstore.values import cast as C

ODD: list[Any] = [None, 1, -1, 0, 2**31, 2**63, 2**70, -(2**64), 1.5, -0.0, 2.0, 1e308,
                  float("nan"), float("inf"), True, False, "12", " 12", "1.5", "1e3", "x",
                  "", "true", "TRUE", "0", "nan", "2026-01-01", "twelve", "n/a", "1,5",
                  {"a": 1}, [1, 2], decimal.Decimal("1.25"), "é", "3" * 40]
TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint32(), pa.float32(), pa.float64(),
         pa.bool_(), pa.string(), pa.date32(), pa.timestamp("us", tz="UTC"),
         pa.decimal128(10, 2), pa.binary()]


@pytest.mark.parametrize("target", TYPES, ids=str)
def test_convert_values_is_conversion_by_halves(target: pa.DataType) -> None:
    rng = random.Random(str(target))
    plain = {pa.int8(): [1, 2, None], pa.int32(): [5, -7], pa.int64(): [10**12],
             pa.uint32(): [3], pa.float32(): [1.25, 3], pa.float64(): [0.1, 7],
             pa.bool_(): [True, False], pa.string(): ["a", "b"]}.get(target, ["1"])
    values = [rng.choice(ODD) if rng.random() < 0.4 else rng.choice(plain)
              for _ in range(400)] + ODD
    validator = Validator(pa.schema([pa.field("v", target)]))
    array, failures = validator._convert_values(values, target)
    expected, expected_failures = C.by_halves(len(values), target,
                                              C.python_converter(values, target))
    assert failures == expected_failures
    assert array.type == expected.type
    assert [repr(v) for v in array.to_pylist()] == [repr(v) for v in expected.to_pylist()]


def test_many_uids_are_the_uids_of_as_many_calls() -> None:
    source = UidSource()
    first = source()
    batch = source.many(3)
    assert batch[0][:-12] == first[:-12]
    assert [int(u[-12:], 16) for u in [first, *batch, source()]] == [0, 1, 2, 3, 4]
    assert source.many(0) == []
