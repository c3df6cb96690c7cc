"""Vectorized parsing of a block of JSON or CSV lines into the target schema.

A block's lines are parsed in one pass by C++ engines: DuckDB's JSON functions for JSON
lines, cast to the target types with DuckDB and Arrow (:func:`parse_json`); Arrow's CSV
reader for CSV records, whose fields stay text for the Validator to cast as the
per-record path does (:func:`csv_text`, then errortable's ``Validator.split_text``).
Only the lines this pass is sure of become rows here: a line is *clean* when it
is plainly well formed and every value has the JSON type (or CSV text) that the
reference parser (errortable's ``parse_json_lines`` / ``parse_csv_lines`` and the
Validator's casts) converts to the same value. Every other line is a *suspect*: the task
hands suspects to the reference parser, which decides them exactly (an error record with
the raw line, or a row after all). So a block with k suspects costs one vectorized pass
plus O(k) Python, and the answers are the reference's by construction.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from markerstore import duck
from markerstore.ingest.csvfields import plain_fields, split_plain
from markerstore.ingest.csvsplit import re2_char
from markerstore.values.cast import DUCK_TYPES
from markerstore.values.cast import cast_rows as cast_rows_of
from markerstore.values.csv import Dialect
from markerstore.values.formats import ValueFormats

_INTS = {t: name for t, name in DUCK_TYPES.items() if pa.types.is_integer(t)}
PARSE_VALUES = 1 << 19  # JSON values DuckDB parses at a time (docs/RELIABILITY.md)
PATTERN_FIELDS = 10_000  # the widest CSV record the vectorized pass reads by a pattern
# The widest schema the vectorized JSON pass takes: DuckDB looks each column up in each
# line by a scan of its members and binds one expression per column, both growing with
# the width (per value 3.7 us at 1,000 columns, 6.7 at 3,000; binding 1 s and 5 s), so
# past this the reference parser, linear in the columns (about 4-6 us a value), is
# faster (docs/BENCHMARKS.md, "Wide records").
JSON_QUERY_COLUMNS = 1_000
SPLIT_FIELDS = 1_000  # from this width, records of plain fields are split, not parsed
_MAX_EXACT = 2 ** 53  # the largest JSON integer pyarrow converts to a double exactly
_MAX_FLOAT32 = 3.4028234663852886e38
# Extensions DuckDB's JSON parser accepts and Python's json does not (DuckDB rejects a
# lone surrogate escape and control characters in strings itself), and what the reference
# (markerstore.values.json) refuses inside a value it would otherwise ignore: a nested array or
# object (nesting depth, a key twice) and a large exponent (a number no double holds).
_JSON_LAX = (r"\\u[dD][89a-fA-F]|,\s*[}\]]|(?i:[:\[,]\s*-?(?:inf|nan))|[:\[,]\s*[\[{]|"
             r"\d[eE][-+]?\d{3}")
_SPACES = (r"\s\x1c-\x1f\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
           r"\x{205f}\x{3000}")


@dataclass
class Parsed:
    """The clean rows of a block (in the target schema; from :func:`csv_text`, the header's
    columns as text) with their line indices in the block, and the indices of the suspect
    lines (ascending)."""

    table: pa.Table
    rows: np.ndarray
    suspects: np.ndarray


# Exactly the characters Python's str.strip removes (the reference parsers skip a line
# that strips to nothing): a blank line is no record.
_BLANK = "^[" + "".join(f"\\x{{{c:x}}}" for c in range(0x3001) if chr(c).isspace()) + "]*$"


def blank_lines(lines: pa.Array, fmt: str = "json") -> int:
    """How many of `lines` are no record: in JSON lines, a line of white space only (as
    Python's str.strip sees it); in CSV, an empty one (RFC 4180: spaces are part of a
    field, so a line of spaces is a record)."""
    if len(lines) == 0:
        return 0
    blank = pc.match_substring_regex(lines, _BLANK) if fmt == "json" else \
        pc.equal(pc.utf8_length(lines), 0)
    return int(pc.sum(pc.cast(blank, pa.int64())).as_py() or 0)


def complement(n: int, rows: np.ndarray) -> np.ndarray:
    mask = np.ones(n, dtype=bool)
    mask[rows] = False
    return np.flatnonzero(mask)


def everything_suspect(schema: pa.Schema, n: int) -> Parsed:
    return Parsed(_empty(schema), np.zeros(0, np.int64), np.arange(n, dtype=np.int64))


@functools.lru_cache(maxsize=4)
def _empty(schema: pa.Schema) -> pa.Table:
    """The empty table of `schema`, made once for every block (a few microseconds a
    column)."""
    return schema.empty_table()


def _json_kind(f: pa.Field) -> str | None:
    t = f.type
    if any(ch in f.name for ch in "\"\\'"):
        return None
    if t in _INTS:
        return "int"
    if t in (pa.float64(), pa.float32()):
        return "float"
    if t == pa.bool_():
        return "bool"
    if t == pa.string():
        return "string"
    if t == pa.date32() or pa.types.is_timestamp(t) or pa.types.is_decimal(t):
        return "text"  # a JSON string, cast by Arrow as the reference does
    if t == pa.binary():
        return "base64"  # a JSON string of base64, decoded as the reference decodes it
    return None


_DUCK_VALUE = {"float": "DOUBLE", "bool": "BOOLEAN", "string": "VARCHAR", "text": "VARCHAR",
               "base64": "VARCHAR"}
# Base64 as RFC 4648 writes it (padded): DuckDB's from_base64 and Python's decoder agree
# on it; other text goes to the reference parser, which decides.
_BASE64 = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


def _json_column(j: int, f: pa.Field, kind: str) -> tuple[str, str]:
    """(condition, value) SQL of column `f`: ty[j] is the JSON type of its value (NULL
    when the key is missing), t."name" the value as DuckDB's JSON transform reads it."""
    ty, v = f"ty[{j}]", f't."{f.name}"'
    empty = f"({ty} IS NULL OR {ty} = 'NULL')"
    if kind == "int":
        return f"({empty} OR ({ty} IN ('BIGINT', 'UBIGINT') AND {v} IS NOT NULL))", v
    if kind == "float":
        bound = _MAX_FLOAT32 if f.type == pa.float32() else "'inf'::DOUBLE"
        # An integer is exact as a double below 2**53 (pyarrow refuses the others).
        cond = (f"({empty} OR ({ty} = 'DOUBLE' AND isfinite({v}) AND abs({v}) <= {bound}) "
                f"OR ({ty} IN ('BIGINT', 'UBIGINT') AND abs({v}) < {_MAX_EXACT}))")
        return cond, (v if f.type == pa.float64() else f"TRY_CAST({v} AS FLOAT)")
    if kind == "bool":
        return f"({empty} OR {ty} = 'BOOLEAN')", v
    if kind == "base64":
        return (f"({empty} OR ({ty} = 'VARCHAR' AND regexp_full_match({v}, '{_BASE64}')))",
                f"CASE WHEN regexp_full_match({v}, '{_BASE64}') THEN from_base64({v}) END")
    return f"({empty} OR {ty} = 'VARCHAR')", v


def json_query(schema: pa.Schema, extra_ok: bool) -> str | None:
    """The DuckDB query over ``blk(i, line)`` giving ``i``, ``ok`` and one column per
    target column (text for the Arrow-cast types); None if a column's type is not one
    the vectorized pass handles, or the schema has more than :data:`JSON_QUERY_COLUMNS`
    columns (then every line goes to the reference parser, whose time is linear in the
    columns). Per line: the JSON type of every value, the values (one JSON transform) and
    the keys."""
    if len(schema) > JSON_QUERY_COLUMNS:
        return None
    kinds = [_json_kind(f) for f in schema]
    if any(k is None for k in kinds):
        return None
    paths = "[" + ", ".join(f"'$.\"{f.name}\"'" for f in schema) + "]"
    typed = "{" + ", ".join(f'"{f.name}": "{_INTS.get(f.type) or _DUCK_VALUE[str(k)]}"'
                            for f, k in zip(schema, kinds, strict=True)) + "}"
    # As many keys as target columns present: no unknown key and no key twice.
    present = "len(list_filter(ty, lambda x: x IS NOT NULL))"
    keys = "len(k) = len(list_distinct(k))" if extra_ok else f"len(k) = {present}"
    conds, values = [keys], []
    for j, (f, kind) in enumerate(zip(schema, kinds, strict=True), start=1):
        cond, value = _json_column(j, f, str(kind))
        conds.append(cond)
        values.append(f'{value} AS "c{j}"')
    # Python's json rejects what DuckDB's parser allows: a trailing comma, inf and nan.
    lax = (f"AND NOT regexp_matches(line, '{_JSON_LAX}') " if extra_ok else
           "AND NOT regexp_matches(line, ',\\s*}$') ")
    return (f"WITH p AS (SELECT i, json_keys(line) AS k, json_type(line, {paths}) AS ty, "
            f"json_transform(line, '{typed}') AS t "
            f"FROM blk WHERE starts_with(line, '{{') AND ends_with(line, '}}') {lax}"
            f"AND json_valid(line)) "
            f"SELECT i, {_all(conds)} AS ok, {', '.join(values)} FROM p")


def _all(conditions: Sequence[str]) -> str:
    """`conditions` joined by AND as a balanced tree: DuckDB's parser nests a chain of
    ANDs one level per operand, and refuses more than 1,000 levels (a wide schema)."""
    if len(conditions) == 1:
        return conditions[0]
    half = len(conditions) // 2
    return f"({_all(conditions[:half])} AND {_all(conditions[half:])})"


_bound = threading.local()


def _relation(con: duckdb.DuckDBPyConnection, query: str) -> duckdb.DuckDBPyRelation:
    """`query` over ``blk`` as a relation of this thread's connection, bound once: reading
    it again runs it over the block registered then (binding the long JSON query anew
    costs about 3 ms a block)."""
    cache: tuple[duckdb.DuckDBPyConnection, dict[str, duckdb.DuckDBPyRelation]] | None = \
        getattr(_bound, "relations", None)
    if cache is None or cache[0] is not con:
        cache = _bound.relations = (con, {})
    relations = cache[1]
    relation = relations.get(query)
    if relation is None:
        relation = relations[query] = con.sql(query)
    return relation


_MARK_CHUNK = 1 << 20


def json_values(lines: pa.Array) -> np.ndarray:
    """An upper bound of the JSON values of each line: its commas and opening brackets,
    plus one. One pass over the block's bytes: the marks' positions (about one in ten
    bytes of ordinary JSON, every other byte at most), then where each line starts among
    them."""
    n = len(lines)
    if lines.null_count or not pa.types.is_large_string(lines.type):
        lines = pc.fill_null(lines.cast(pa.large_string()), "")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + n + 1]
    data = lines.buffers()[2]
    if data is None or n == 0:
        return np.ones(n, dtype=np.int64)
    first, last = int(offsets[0]), int(offsets[-1])
    text = np.frombuffer(data, dtype=np.uint8)[first:last]
    marks = np.empty(len(text), dtype=bool)
    for at in range(0, len(text), _MARK_CHUNK):  # comparisons (a table lookup per byte
        part, out = text[at:at + _MARK_CHUNK], marks[at:at + _MARK_CHUNK]  # is twice as
        np.equal(part, ord(","), out=out)  # slow), a chunk at a time: one byte per byte
        out |= part == ord("[")
        out |= part == ord("{")
    return np.diff(np.searchsorted(np.flatnonzero(marks), offsets - first)) + 1


def parse_json(lines: pa.Array, schema: pa.Schema, query: str | None,
               formats: ValueFormats | None = None) -> Parsed:
    """The clean rows of a block of JSON lines, and its suspects. DuckDB's JSON parsing
    holds about 150 bytes for each value (70 times the text of `[0,0,...]`), so it is
    given the block :data:`PARSE_VALUES` values at a time (counted by commas and opening
    brackets), and a line with more is a suspect (the reference parser holds a few times
    a record)."""
    n = len(lines)
    if query is None or n == 0:
        return everything_suspect(schema, n)
    values = json_values(lines)
    short = np.flatnonzero(values <= PARSE_VALUES)
    ends = np.cumsum(values[short])
    con = duck.local()  # this thread's, single-threaded: Spark runs a task per core
    found = []
    start = 0
    while start < len(short):
        before = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + PARSE_VALUES,
                                                  side="right")))
        rows = short[start:stop]
        first, k = int(rows[0]), len(rows)
        run = int(rows[-1]) - first == k - 1  # no line left out between: a slice, no copy
        con.register("blk", pa.table({"i": rows, "line": lines.slice(first, k) if run else
                                      lines.take(pa.array(rows))}))
        try:
            result = _relation(con, query).to_arrow_table()
        except duckdb.Error:  # what DuckDB cannot take, the reference parser decides
            result = None
        finally:
            con.unregister("blk")
        if result is not None:
            found.append(result.filter(pc.fill_null(result.column("ok"), False)))
        start = stop
    if not found:
        return everything_suspect(schema, n)
    result = found[0] if len(found) == 1 else pa.concat_tables(found)
    rows = result.column("i").to_numpy()
    columns = [result.column(f"c{j}") for j in range(1, len(schema) + 1)]
    return _finish(schema, columns, rows, n, formats)


def _finish(schema: pa.Schema, columns: Sequence[pa.ChunkedArray], rows: np.ndarray,
            n: int, formats: ValueFormats | None = None) -> Parsed:
    """Columns to the target types (Arrow casts, as the reference); rows a cast rejects
    become suspects."""
    bad = np.zeros(len(rows), dtype=bool)
    arrays = []
    for f, column in zip(schema, columns, strict=True):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if array.type != f.type:
            array, failed = cast_rows(array, f.type, formats)
            bad[failed] = True
        arrays.append(array)
    table = pa.Table.from_arrays(arrays, schema=schema)
    if bad.any():
        keep = np.flatnonzero(~bad)
        table, rows = table.take(pa.array(keep)), rows[keep]
    return Parsed(table, rows, complement(n, rows))


def cast_rows(source: pa.Array, target: pa.DataType, formats: ValueFormats | None = None
              ) -> tuple[pa.Array, np.ndarray]:
    """`source` cast to `target` as the reference parser casts it (the Validator's
    :func:`markerstore.values.cast.cast_rows`), and the rows that do not cast (null in the
    result), ascending. The rows DuckDB's hint rejects are not confirmed one by one: they
    are suspects, which the reference parser decides."""
    array, failures = cast_rows_of(source, target, formats, confirm=False)
    return array, np.array(sorted(failures), dtype=np.int64)


def csv_pattern(width: int, delimiter: str = ",", escape: str = '"', quote: str = '"'
                ) -> str:
    """A CSV record of exactly `width` well-formed fields (quoted or plain, no control
    characters other than a CR or LF inside a quoted field) separated by `delimiter`: what
    errortable's parser and Arrow's CSV reader (with ``newlines_in_values``) read alike,
    a quoted line break kept as written. With an escape other than the quote, a plain
    field holds none and a quoted one holds it only before a quote or itself (Arrow drops
    an escape before any other character; errortable's parser keeps it)."""
    d, q = re2_char(delimiter), re2_char(quote)
    inside = "\\x00-\\x09\\x0b\\x0c\\x0e-\\x1f"  # control characters but CR and LF
    if escape == quote:
        quoted = f"(?:[^{q}{inside}]|{q}{q})*"
        plain = f"[^{q}{d}\\x00-\\x1f]*"
    else:
        e = re2_char(escape)
        quoted = f"(?:[^{q}{e}{inside}]|{e}[{q}{e}])*"
        plain = f"[^{q}{d}{e}\\x00-\\x1f]*"
    field = f"(?:{plain}|{q}{quoted}{q})"
    return "^" + d.join([field] * width) + "$"


def arrow_dialect(delimiter: str, escape: str, newlines_in_values: bool, quote: str = '"'
                  ) -> pcsv.ParseOptions:
    """Arrow's CSV parse options for a separator, a quote and an escape (the quote: RFC
    4180's doubled quote; another character: Arrow's escape character, a doubled quote
    then no quote)."""
    rfc = escape == quote
    return pcsv.ParseOptions(delimiter=delimiter, quote_char=quote,
                             newlines_in_values=newlines_in_values, double_quote=rfc,
                             escape_char=False if rfc else escape)


def _is_space(text: str) -> bool:
    """Whether `text` holds a character the reference's white space includes."""
    found = pc.match_substring_regex(pa.array([text], pa.string()), f"[{_SPACES}]")
    return bool(found[0].as_py())


def _well_formed(lines: pa.Array, width: int, dialect: Dialect) -> pa.Array:
    """Whether each line is `width` well-formed fields (:func:`csv_pattern`). Lines of
    plain fields are counted (:func:`~markerstore.ingest.csvfields.plain_fields`); the
    pattern, whose size grows with the width, reads only the others, and only up to
    :data:`PATTERN_FIELDS` fields (RE2 refuses a pattern of 20,000): a wider line with a
    quoted field is a suspect."""
    plain = plain_fields(lines, width, dialect)
    if width > PATTERN_FIELDS or len(lines) == 0:
        return plain
    others = np.flatnonzero(pc.invert(plain).to_numpy(zero_copy_only=False))
    if len(others) == 0:
        return plain
    pattern = csv_pattern(width, dialect.delimiter, dialect.escape, dialect.quote)
    matched = pc.match_substring_regex(lines.take(pa.array(others)), pattern)
    mask = plain.to_numpy(zero_copy_only=False).copy()
    mask[others] = matched.to_numpy(zero_copy_only=False)
    return pa.array(mask)


def _clean_csv(lines: pa.Array, width: int, dialect: Dialect, null_value: str,
               empty_value: str) -> np.ndarray:
    """The lines that Arrow reads as errortable's parser does (the rest are suspects):
    `width` well-formed fields, not white space only; no quoted empty field where that
    reads otherwise than null; no white space at all where it is ignored around values."""
    d, q = re2_char(dialect.delimiter), re2_char(dialect.quote)
    try:
        clean = _well_formed(lines, width, dialect)
        if width < 2 or _is_space(dialect.delimiter):  # else a delimiter is no space
            clean = pc.and_(clean, pc.match_substring_regex(lines, f"[^{_SPACES}]"))
    except pa.ArrowInvalid:  # a pattern too large for RE2 after all
        return np.zeros(0, np.int64)
    if empty_value != null_value:
        clean = pc.and_(clean, pc.invert(pc.match_substring_regex(
            lines, f"(^|{d}){q}{q}({d}|$)")))
    if dialect.ignore_leading or dialect.ignore_trailing:
        clean = pc.and_(clean, pc.invert(pc.match_substring_regex(lines, "[ ]")))
    return np.flatnonzero(pc.fill_null(clean, False).to_numpy(zero_copy_only=False))


def csv_text(lines: pa.Array, schema: pa.Schema, header: Sequence[str] | None,
             extra_ok: bool, null_value: str = "", empty_value: str = "", *,
             dialect: Dialect) -> Parsed:
    """The clean records of a block of CSV records (after the header) as text, and its
    suspects: a record whose fields are plain (no control character) or quoted (a CR or LF
    kept as written, no other control character), read by Arrow with Spark's null rules
    (an empty plain field, and a field equal to `null_value`, quoted or not, are null;
    ``""`` is `empty_value`, so a record holding one is a suspect unless that is null
    too). The table holds the header's columns, as strings: the values errortable's parser
    gives these records (:func:`markerstore.values.csv.field_values`); with no clean record,
    it is the target schema's empty table."""
    n = len(lines)
    names = list(header or [])
    target = set(schema.names)
    if n == 0 or not names or len(set(names)) != len(names) or (
            not extra_ok and not set(names) <= target):
        return everything_suspect(schema, n)
    rows = _clean_csv(lines, len(names), dialect, null_value, empty_value)
    if len(rows) == 0:
        return everything_suspect(schema, n)
    texts = lines.take(pa.array(rows))
    if len(names) >= SPLIT_FIELDS and bool(pc.all(plain_fields(texts, len(names),
                                                                 dialect)).as_py()):
        table = split_plain(texts, names, dialect.delimiter, null_value)
        return Parsed(table, rows, complement(n, rows))
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(rows)], pa.int32()),
                                                     texts.cast(pa.string())), "\n")
    # Arrow's reader takes an ASCII delimiter: another one is read as a control character
    # that no clean record holds (csv_pattern), and turned back into itself in the values.
    delimiter = dialect.delimiter if dialect.delimiter.isascii() else _STAND_IN
    if delimiter != dialect.delimiter:
        joined = pc.replace_substring(joined, dialect.delimiter, _STAND_IN)
    data = joined.cast(pa.large_binary())[0].as_buffer()
    table = pcsv.read_csv(
        pa.BufferReader(data),
        # One Arrow block for the whole text: a record never straddles two.
        read_options=pcsv.ReadOptions(column_names=names, use_threads=False,
                                      block_size=max(1 << 20, data.size + 1)),
        parse_options=arrow_dialect(delimiter, dialect.escape,
                                    newlines_in_values=True, quote=dialect.quote),
        convert_options=pcsv.ConvertOptions(
            column_types={c: pa.string() for c in names},
            null_values=list(dict.fromkeys(["", null_value])),
            strings_can_be_null=True, quoted_strings_can_be_null=True))
    if table.num_rows != len(rows):
        return everything_suspect(schema, n)
    if delimiter != dialect.delimiter:
        table = pa.table([pc.replace_substring(c, _STAND_IN, dialect.delimiter)
                          for c in table.columns], names=table.column_names)
    return Parsed(table, rows, complement(n, rows))


_STAND_IN = "\x1f"  # for a delimiter beyond ASCII: no clean record holds a control character
