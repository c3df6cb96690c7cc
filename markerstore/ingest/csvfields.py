"""CSV records of plain fields (no quote, escape or control character), read in time
linear in their width: the vectorized pass's pattern for a record grows with its fields
(RE2 refuses one of 20,000) and Arrow's CSV reader costs about 20 us a column a block
at 100,000 columns, where a block of 16 MiB holds about 20 such records; counting
delimiters and splitting at them costs the same per field at any width."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore.ingest.csvsplit import re2_char
from markerstore.values.csv import Dialect


def plain_fields(lines: pa.Array, width: int, dialect: Dialect) -> pa.Array:
    """Whether each line is `width` plain fields: no quote, escape or control character,
    and `width - 1` delimiters (what :func:`markerstore.ingest.parse.csv_pattern`
    matches in such a line), in time linear in the line whatever the width."""
    inside = f"[{re2_char(dialect.quote)}{re2_char(dialect.escape)}\\x00-\\x1f]"
    return pc.fill_null(pc.and_(pc.invert(pc.match_substring_regex(lines, inside)),
                                pc.equal(pc.count_substring(lines, dialect.delimiter),
                                         width - 1)), False)


def split_plain(lines: pa.Array, names: list[str], delimiter: str, null_value: str
                ) -> pa.Table:
    """Records of plain fields (:func:`plain_fields`) as Arrow's CSV reader reads them:
    each field's text, null where it is empty or `null_value`; split at the delimiter into
    one array of every field, column after column, each column a slice of it (Arrow's
    reader costs about 20 us a column a block at 100,000 columns)."""
    width, k = len(names), len(lines)
    fields = pc.split_pattern(lines, delimiter).flatten()  # record after record
    by_column = np.arange(k * width, dtype=np.int64).reshape(k, width).T.ravel()
    fields = fields.take(pa.array(by_column)).cast(pa.string())
    null = pc.or_(pc.equal(fields, ""), pc.equal(fields, null_value))
    fields = pc.if_else(null, pa.scalar(None, pa.string()), fields)
    return pa.Table.from_arrays([fields.slice(j * k, k) for j in range(width)], names=names)
