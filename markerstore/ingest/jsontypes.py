"""The schema of JSON records inferred from a sample of them, by the rules of Spark's
JSON inference (``JsonInferSchema``, its defaults: ``prefersDecimal`` false, no
timestamps inferred from text).

A value's type: a boolean is BOOLEAN; an integer BIGINT, or DECIMAL(p,0) past BIGINT's
range (DOUBLE past 38 digits, and STRING, its JSON text, past what a double holds: about
309 digits, where Spark's double is infinite and a DOUBLE column refuses the value);
any other number DOUBLE (with ``prefersDecimal``, a
DECIMAL of its digits and scale; with ``primitivesAsString``, a number or boolean is
STRING, its JSON text); text STRING; an array an ARRAY
of its elements' type; an object a STRUCT of the members of every sampled object, in
the order they first appear. The values of a column (or member, or array element) merge
as Spark merges them: BIGINT and DECIMAL into the wider DECIMAL, either with DOUBLE into
DOUBLE, two structs member by member, two arrays by their elements, and any other pair
into STRING (which the ingest reads as the value's JSON text). A column of nulls only is
STRING, and so is an object with no members: Spark drops such a member (SPARK-8093), but
then each record that has it would hold a member the schema has not, and a STRUCT with
no field cannot be written.

The ingest reads a value as its JSON text only for a column that is STRING itself, not
for a STRING inside an ARRAY or STRUCT (where Spark does too). So where two values that
do not merge, or an empty object, sit inside a column's arrays or structs, the whole
column is STRING: its values are kept as their JSON text, not lost to cast errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from markerstore.ingest.schema import MAX_DECIMAL_PRECISION

LONG_DIGITS = 20  # the precision Spark merges a BIGINT with a DECIMAL at
_LONG = range(-(2**63), 2**63)
# What two values that do not merge become before the column is settled: JSON text.
_TEXT = pa.large_string()


@dataclass(frozen=True)
class JsonRules:
    """Spark's options of JSON inference: `decimals` (prefersDecimal), `texts`
    (primitivesAsString: every number and boolean is STRING, read as its JSON text)."""

    decimals: bool = False
    texts: bool = False


def json_schema(records: Sequence[dict[str, Any]], rules: JsonRules = JsonRules()
                ) -> pa.Schema:
    """The schema of the sampled objects (numbers with a fraction parsed as Decimal):
    one column per member name."""
    struct = _struct_of(records, rules)
    return pa.schema([pa.field(f.name, _column(f.type)) for f in struct])


def _struct_of(objects: Sequence[dict[str, Any]], rules: JsonRules) -> pa.StructType:
    names: dict[str, None] = {}
    for value in objects:
        names.update(dict.fromkeys(value))
    return pa.struct([pa.field(name, _merge_all(_type_of(o[name], rules)
                                                for o in objects if name in o))
                      for name in names])


def _type_of(value: Any, rules: JsonRules) -> pa.DataType:
    if value is None:
        return pa.null()
    if rules.texts and isinstance(value, (bool, int, float, Decimal)):
        return _TEXT
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        if value in _LONG:
            return pa.int64()
        digits = len(str(abs(value)))
        if digits <= MAX_DECIMAL_PRECISION:
            return pa.decimal128(digits, 0)
        return pa.float64() if _finite_double(value) else _TEXT
    if isinstance(value, Decimal) and rules.decimals and value.is_finite():
        _, places, exponent = value.as_tuple()
        precision, scale = len(places), -int(exponent)
        if scale >= 0 and max(precision, scale) <= MAX_DECIMAL_PRECISION:
            return pa.decimal128(max(precision, scale), scale)  # 0.05: (2, 2), as Spark
        return pa.float64()
    if isinstance(value, (float, Decimal)):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, list):
        return pa.list_(_merge_all(_type_of(v, rules) for v in value))
    if isinstance(value, dict):
        return _struct_of([value], rules) if value else _TEXT
    return _TEXT


def _finite_double(value: int) -> bool:
    """Whether a double holds `value` (rounded, as Spark reads it): below about 1.8e308."""
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _merge_all(types: Iterable[pa.DataType]) -> pa.DataType:
    merged: pa.DataType = pa.null()
    for arrow_type in types:
        merged = _merge(merged, arrow_type)
    return merged


def _merge(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if a == b:
        return a
    if pa.types.is_null(a) or pa.types.is_null(b):
        return b if pa.types.is_null(a) else a
    numbers = (pa.types.is_int64, pa.types.is_decimal, pa.types.is_float64)
    if any(k(a) for k in numbers) and any(k(b) for k in numbers):
        if pa.types.is_float64(a) or pa.types.is_float64(b):
            return pa.float64()
        (whole_a, scale_a), (whole_b, scale_b) = _digits(a), _digits(b)
        scale = max(scale_a, scale_b)
        whole = max(whole_a, whole_b)
        if whole + scale > MAX_DECIMAL_PRECISION:
            return pa.float64()
        return pa.decimal128(whole + scale, scale)
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        members = {f.name: f.type for f in a}
        for field in b:
            members[field.name] = _merge(members.get(field.name, pa.null()), field.type)
        return pa.struct([pa.field(n, t) for n, t in members.items()])
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(_merge(a.value_type, b.value_type))
    return _TEXT


def _digits(arrow_type: pa.DataType) -> tuple[int, int]:
    """(digits before the point, after it) of a BIGINT or DECIMAL, as Spark widens them."""
    if pa.types.is_int64(arrow_type):
        return LONG_DIGITS, 0
    return arrow_type.precision - arrow_type.scale, arrow_type.scale


def _column(arrow_type: pa.DataType) -> pa.DataType:
    """A column's type settled: STRING where JSON text is anywhere in it, else its type
    with NULL (values that were all null) as STRING."""
    return pa.string() if _holds_text(arrow_type) else _nulls_as_text(arrow_type)


def _holds_text(arrow_type: pa.DataType) -> bool:
    if arrow_type == _TEXT:
        return True
    if pa.types.is_list(arrow_type):
        return _holds_text(arrow_type.value_type)
    return pa.types.is_struct(arrow_type) and any(_holds_text(f.type) for f in arrow_type)


def _nulls_as_text(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_null(arrow_type):
        return pa.string()
    if pa.types.is_list(arrow_type):
        return pa.list_(_nulls_as_text(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(f.name, _nulls_as_text(f.type)) for f in arrow_type])
    return arrow_type
