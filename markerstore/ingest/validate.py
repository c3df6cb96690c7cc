"""The Validator's row stages, vectorized: which clean rows fail null, key, partition or a
named check. Those rows become suspects too, and the reference (the Validator itself)
builds their error records, so the reason and message are exactly its own."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.ingest.reader import connection

_BAD_FOLDER = r"[/\\\x00-\x1f\x7f]"


def _textual(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _stage_mask(validator: Any, table: pa.Table) -> pa.Array | None:
    """True for the rows that fail the null, key or partition stage (the same Arrow
    expressions as errortable.Validator's stages)."""
    schema: pa.Schema = validator.target_schema
    masks = [pc.is_null(table.column(f.name)) for f in schema if not f.nullable]
    key = validator.key
    if key is not None:
        column = table.column(key)
        masks.append(pc.is_null(column))
        if _textual(column.type):
            masks.append(pc.equal(pc.utf8_trim_whitespace(column), ""))
    for name in validator.partition_by:
        column = table.column(name)
        masks.append(pc.is_null(column))
        if _textual(column.type):
            masks.append(pc.match_substring_regex(column, _BAD_FOLDER))
            masks.append(pc.is_in(column, value_set=pa.array(["", ".", ".."], column.type)))
    if not masks:
        return None
    out = pc.fill_null(masks[0], False)
    for mask in masks[1:]:
        out = pc.or_(out, pc.fill_null(mask, False))
    return out


def _check_mask(checks: dict[str, str], table: pa.Table) -> pa.Array:
    """True for the rows where a named check is FALSE (SQL CHECK semantics, DuckDB), or
    for every row when a check raises at run time (the reference finds which)."""
    if not checks:
        return pa.array(np.zeros(table.num_rows, dtype=bool))
    failing = " OR ".join(f"(({expr}) IS FALSE)" for expr in checks.values())
    con = connection()
    con.register("record", table)
    try:
        result = con.sql(f"SELECT coalesce({failing}, false) AS f FROM record"
                         ).to_arrow_table()
    except duckdb.Error:
        return pa.array(np.ones(table.num_rows, dtype=bool))
    finally:
        con.unregister("record")
    return result.column("f").combine_chunks()


def failing_rows(validator: Any, table: pa.Table) -> np.ndarray:
    """Positions of the rows of `table` (target schema, cast) that some stage rejects."""
    if table.num_rows == 0:
        return np.zeros(0, np.int64)
    checks = dict(validator.checks or {})
    mask = _check_mask(checks, table)
    stages = _stage_mask(validator, table)
    if stages is not None:
        mask = pc.or_(mask, stages)
    return np.flatnonzero(mask.to_numpy(zero_copy_only=False))
