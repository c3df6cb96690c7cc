"""The named-check stage of :class:`errortable.capture.validator.Validator`: SQL boolean expressions
evaluated by DuckDB over the cast rows, with SQL CHECK semantics (a row fails when the
expression is FALSE; NULL passes). A row is reported by the first failing check, and
lists every failing check when there are several. A check that raises at run time (a cast
inside it, say) is evaluated again slice by slice to find the raising rows, which fail
that check with DuckDB's error as the message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from errortable.capture import records as R
from errortable.capture.errorrows import Failure as RowFailure

ROW_COLUMN = "__errortable_row"


def check_columns(checks: dict[str, str], names: list[str]) -> list[str]:
    """The columns of `names` the check expressions may read: every name spelled as a
    word of one (DuckDB's tokens, any case; all of them where one reads ``*`` or
    ``COLUMNS``). DuckDB binds a table of 30,000 columns in seconds, so a block is
    registered with these alone."""
    words: set[str] = set()
    for expr in checks.values():
        tokens = duckdb.tokenize(expr)
        for i, (start, kind) in enumerate(tokens):
            end = tokens[i + 1][0] if i + 1 < len(tokens) else len(expr)
            text = expr[start:end].strip()
            if text == "*" or text.lower() == "columns":
                return list(names)
            if kind in (duckdb.token_type.identifier, duckdb.token_type.keyword):
                if len(text) > 1 and text[0] == text[-1] == '"':
                    text = text[1:-1].replace('""', '"')
                words.add(text.lower())
    return [name for name in names if name.lower() in words]


def check_stage(validator: Any, table: pa.Table, failed: dict[int, RowFailure]) -> None:
    """Record in `failed` the rows of `table` not failed yet that fail a check. Every row
    is evaluated (no copy of the rows left): a row failed before keeps its failure."""
    if len(failed) >= table.num_rows:
        return
    read = validator.check_columns
    if len(read) < table.num_columns:
        table = table.select(read)
    subset = table.append_column(ROW_COLUMN, pa.array(np.arange(table.num_rows,
                                                                 dtype=np.int64)))
    with validator._lock:
        con = validator._connection()
        con.register("record", subset)
        try:
            _run_checks(validator.checks, con, failed)
        finally:
            con.unregister("record")


def _run_checks(checks: dict[str, str], con: duckdb.DuckDBPyConnection,
                failed: dict[int, RowFailure]) -> None:
    names = list(checks)
    flags = ", ".join(f"(({checks[c]}) IS FALSE)" for c in names)
    any_false = " OR ".join(f"(({checks[c]}) IS FALSE)" for c in names)
    grouped: list[tuple[tuple[bool, ...], list[int]]]
    try:
        # One row per combination of failing checks, with the rows that have it.
        result = con.sql(f"SELECT {flags}, list({ROW_COLUMN}) FROM record "
                         f"WHERE {any_false} GROUP BY ALL").fetchall()
        grouped = [(tuple(r[:-1]), list(r[-1])) for r in result]
    except duckdb.Error:
        grouped = [(tuple(values), [row]) for row, *values in
                   _run_checks_one_by_one(checks, con, failed)]
    for values, group in grouped:
        failing = tuple(c for c, v in zip(names, values, strict=True) if v)
        if not failing:
            continue
        first = failing[0]
        extra = {R.CHECK: first}
        if len(failing) > 1:
            extra[R.FAILED_CHECKS] = ",".join(failing)
        failure = RowFailure(R.CHECK_REASON, first, "CheckFailed",
                             f"check {first!r} failed: {checks[first]}", extra=extra,
                             safe_text=f"check {first!r} failed: {checks[first]}")
        failed.update((row, failure) for row in group if row not in failed)


def _run_checks_one_by_one(checks: dict[str, str], con: duckdb.DuckDBPyConnection,
                           failed: dict[int, RowFailure]) -> list[tuple[Any, ...]]:
    """A check raised at run time: find the raising rows one check at a time; they fail
    that check, with DuckDB's error as the message."""
    table = con.sql("SELECT * FROM record").to_arrow_table()
    flags: dict[int, list[bool]] = {}
    names = list(checks)
    row_ids = table.column(ROW_COLUMN).to_pylist()
    for index, name in enumerate(names):
        expr = checks[name]

        def evaluate(off: int, ln: int, expr: str = expr) -> pa.Array:
            con.register("slice", table.slice(off, ln))
            try:
                values = con.sql(f"SELECT (({expr}) IS FALSE) FROM slice").fetchall()
            finally:
                con.unregister("slice")
            return pa.array([v[0] for v in values], pa.bool_())

        array, raised = _convert_duck(table.num_rows, evaluate)
        for pos, value in enumerate(array.to_pylist()):
            if value:
                flags.setdefault(row_ids[pos], [False] * len(names))[index] = True
        for pos, exc in raised.items():
            row = row_ids[pos]
            if row not in failed:
                failed[row] = RowFailure(
                    R.CHECK_REASON, name, type(exc).__name__,
                    f"check {name!r} raised: {' '.join(str(exc).split())}",
                    extra={R.CHECK: name, R.FAILED_CHECKS: name},
                    safe_text=f"check {name!r} raised {type(exc).__name__} (its text is "
                              "withheld)")
    return [(row, *values) for row, values in flags.items()]


def _convert_duck(n: int, evaluate: Callable[[int, int], pa.Array]
                  ) -> tuple[pa.Array, dict[int, BaseException]]:
    pieces: list[tuple[int, pa.Array]] = []
    failures: dict[int, BaseException] = {}
    stack = [(0, n)]
    while stack:
        offset, length = stack.pop()
        if length == 0:
            continue
        try:
            pieces.append((offset, evaluate(offset, length)))
        except duckdb.Error as exc:
            if length == 1:
                failures[offset] = exc
                pieces.append((offset, pa.array([False])))
                continue
            half = length // 2
            stack.append((offset + half, length - half))
            stack.append((offset, half))
    pieces.sort(key=lambda p: p[0])
    arrays = [p[1] for p in pieces]
    return (pa.concat_arrays(arrays) if arrays else pa.array([], pa.bool_())), failures
