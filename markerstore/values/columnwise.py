"""Converting the columns of a batch a type at a time: the columns that go to one target
type are converted together, as one column of all their values, then cut apart again.

A conversion is value by value (a value converts, or fails with its own message, wherever
it is), so this gives each column what converting it alone gives, with the same failures.
What it saves is the cost each conversion has whatever its length: a few Arrow calls, a
DuckDB query where one fails. A block of 16 MiB holds about 20 records of 100,000
columns: converting them column by column cost about 100 us a column for 20 values, so
the time per value grew with the width (quadratic in the columns); a type at a time it is
a slice per column.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import pyarrow as pa

from markerstore.values.cast import Failure

T = TypeVar("T")
# (the values of a group's columns, one column after another; the target type) ->
# (the converted values, the failures by position)
Convert = Callable[[list[T], pa.DataType], tuple[pa.Array, dict[int, Failure]]]


def convert_columns(fields: Sequence[pa.Field], sources: Sequence[T], n: int,
                    convert: Convert[T], key: Callable[[pa.Field, T], Hashable]
                    ) -> tuple[list[pa.Array], dict[int, list[tuple[str, Failure]]]]:
    """Each of `sources` (`n` values each) converted to the type of its field by
    `convert`, the sources of one `key` (and so one target type) together: the arrays in
    the fields' order, and each failed row's failures as (column, failure), in the
    fields' order."""
    groups: dict[Hashable, list[int]] = {}
    for i, (f, source) in enumerate(zip(fields, sources, strict=True)):
        groups.setdefault((f.type, key(f, source)), []).append(i)
    arrays: list[pa.Array] = [pa.nulls(0)] * len(fields)
    failed: dict[int, dict[int, Failure]] = {}  # by field, of the fields with a failure
    for members in groups.values():
        array, failures = convert([sources[i] for i in members], fields[members[0]].type)
        for j, i in enumerate(members):
            arrays[i] = array.slice(j * n, n)
        for at, exc in failures.items():
            j, row = divmod(at, n)
            failed.setdefault(members[j], {})[row] = exc
    per_row: dict[int, list[tuple[str, Failure]]] = {}
    for i in sorted(failed):
        for row, exc in failed[i].items():
            per_row.setdefault(row, []).append((fields[i].name, exc))
    return arrays, per_row
