"""The columns of one target type converted together (markerstore.values.columnwise) give each
column what converting it alone gives: the same values, the same failures with the same
messages, each row's failures in the schema's order; and a block of many columns costs a
conversion per type, not per column."""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errortable
from errortable.capture import records as R
from errortable.capture import validator as capture
from errortable.config import ErrorTableConfig
from markerstore.values import cast as C
from markerstore.values.formats import ValueFormats

TYPES = [pa.int64(), pa.int32(), pa.float64(), pa.bool_(), pa.date32(),
         pa.timestamp("us", tz="UTC"), pa.decimal128(10, 2), pa.string()]
TEXTS = ["1", "-7", "+5", "0x10", "2.5", "1e400", "true", "no", "2024-02-30", "2024-01-31",
         "2024-01-31T10:00:00Z", "123.45", "80,000.65", "x" * 5000, "", " 7", "NaN"]
VALUES: list[Any] = [1, -3, 2**70, 2.5, True, None, "1", "x", "2024-01-31",
                     decimal.Decimal("1.25"), [1], {"a": 1}]


def _column_by_column(validator: errortable.Validator, sources: list[Any],
                      convert: Any) -> tuple[list[pa.Array], dict[int, list[Any]]]:
    """What the Validator computed before: each column converted alone, each row's
    failures in the schema's order."""
    arrays, failures = [], {}
    for f, source in zip(validator._fields, sources, strict=True):
        array, failed = convert(source, f.type)
        arrays.append(array)
        for row, exc in failed.items():
            failures.setdefault(row, []).append((f.name, exc))
    return arrays, failures


def _expected(schema: pa.Schema, failures: dict[int, list[Any]]) -> list[tuple[str, str]]:
    """(message, failed columns) of the cast error record of each failed row, as the
    Validator writes them."""
    rows = []
    for items in failures.values():
        text = "; ".join(f"column {c!r} to {schema.field(c).type}: {e[1]}" for c, e in items)
        rows.append((R.format_message(items[0][1][0], f"cannot cast {text}", None,
                                      ErrorTableConfig().stacktrace_max_chars),
                     ",".join(c for c, _ in items)))
    return sorted(rows)


def _found(errors: pa.Table) -> list[tuple[str, str]]:
    return sorted((r["message"], dict(r["context"])["column"]) for r in errors.to_pylist())


def _kept(expected: list[pa.Array], schema: pa.Schema, rows: int,
          failures: dict[int, list[Any]]) -> list[dict[str, Any]]:
    keep = pa.array([i for i in range(rows) if i not in failures], pa.int64())
    return pa.Table.from_arrays(expected, schema=schema).take(keep).to_pylist()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), width=st.integers(1, 12), rows=st.integers(0, 6))
def test_text_columns_cast_together_as_alone(data: Any, width: int, rows: int) -> None:
    types = data.draw(st.lists(st.sampled_from(TYPES), min_size=width, max_size=width))
    schema = pa.schema([(f"c{i}", t) for i, t in enumerate(types)])
    columns = [pa.array(data.draw(st.lists(st.none() | st.sampled_from(TEXTS), min_size=rows,
                                           max_size=rows)), pa.string()) for _ in types]
    validator = errortable.Validator(schema, formats=ValueFormats())
    expected, failures = _column_by_column(validator, columns, validator._cast_text)
    table = pa.table(dict(zip(schema.names, columns, strict=True)))
    good, errors = validator.split_text(table, None, None, lambda r: ["{}"] * len(r))
    assert good.to_pylist() == _kept(expected, schema, rows, failures)
    assert _found(errors) == _expected(schema, failures)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), width=st.integers(1, 10), rows=st.integers(0, 6))
def test_python_values_convert_together_as_alone(data: Any, width: int, rows: int) -> None:
    types = data.draw(st.lists(st.sampled_from(TYPES), min_size=width, max_size=width))
    schema = pa.schema([(f"c{i}", t) for i, t in enumerate(types)])
    records = [{name: data.draw(st.sampled_from(VALUES)) for name in schema.names}
               for _ in range(rows)]
    validator = errortable.Validator(schema)
    sources = [[r.get(name) for r in records] for name in schema.names]
    expected, failures = _column_by_column(validator, sources, validator._convert_values)
    good, errors = validator.split_records_arrow(records)
    assert good.to_pylist() == _kept(expected, schema, rows, failures)
    assert _found(errors) == _expected(schema, failures)


@pytest.mark.parametrize("width", [10, 1000])
def test_a_block_costs_a_cast_per_type_not_per_column(monkeypatch: pytest.MonkeyPatch,
                                                      width: int) -> None:
    """1,000 integer and 1,000 date columns: two casts, as for 10 of each (a cast cost
    about 100 us whatever its length, so a block of 20 records of 100,000 columns took
    10 s)."""
    calls: list[pa.DataType] = []
    real = C.cast

    def counting(source: pa.Array, target: pa.DataType, formats: Any = None) -> pa.Array:
        calls.append(target)
        return real(source, target, formats)

    monkeypatch.setattr(capture.C, "cast", counting)
    schema = pa.schema([(f"i{j}", pa.int64()) for j in range(width)]
                       + [(f"d{j}", pa.date32()) for j in range(width)])
    table = pa.table({**{f"i{j}": pa.array([str(j), None, "-4"]) for j in range(width)},
                      **{f"d{j}": pa.array(["2024-01-02"] * 3) for j in range(width)}})
    good, errors = errortable.Validator(schema).split_text(table, None, None, lambda r: [])
    assert good.num_rows == 3 and errors.num_rows == 0
    assert sorted(map(str, calls)) == ["date32[day]", "int64"]
    assert good.column(f"i{width - 1}").to_pylist() == [width - 1, None, -4]
