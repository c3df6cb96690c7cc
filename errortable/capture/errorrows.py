"""Error rows of a Validator batch: one ErrorRecord per failed row, built as Arrow columns.

The fast path (:meth:`ErrorRows.table`) never makes a Python dict per row: rows that
failed alike share one :class:`Failure`, whose context entries and message are computed
once; the per-row entries (record key, partition path, source line or offset) are Arrow
columns; the `context` map is assembled by interleaving these columns. When a PII policy
is on, :meth:`ErrorRows.dicts` builds each record with the RecordBuilder, which applies
the policy to every value.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from errortable import schema as S
from errortable.capture import records as R


@dataclass
class Failure:
    """Why a row failed: the same object is shared by every row that failed alike."""

    reason: str
    detail: str
    error_class: str
    text: str
    columns: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)
    safe_text: str | None = None  # the message under a PII policy (None: withheld)


@dataclass
class RawRows:
    """The original rows (an Arrow batch, or dicts, or typed rows whose originals are known
    only as JSON: `payloads` gives the JSON of the rows asked for, with or without their
    `batch` of text), read only for the rows that failed."""

    batch: pa.RecordBatch | None = None
    records: Sequence[Mapping[str, Any]] | None = None
    payloads: Callable[[list[int]], list[str]] | None = None

    def column(self, name: str, indices: list[int]) -> list[Any]:
        if self.batch is not None:
            if name not in self.batch.schema.names:
                return [None] * len(indices)
            return self.batch.column(name).take(pa.array(indices, pa.int64())).to_pylist()
        if self.records is None:  # typed rows: no value differs from its original
            return [None] * len(indices)
        return [self.records[i].get(name) for i in indices]

    def rows(self, indices: list[int]) -> list[Any]:
        if self.payloads is not None:
            return [json.loads(p) for p in self.payloads(indices)]
        if self.batch is not None:
            return self.batch.take(pa.array(indices, pa.int64())).to_pylist()
        assert self.records is not None
        return [dict(self.records[i]) for i in indices]

    @staticmethod
    def value(row: Any, name: str) -> Any:
        return row.get(name) if isinstance(row, dict) else None


@dataclass
class ErrorRows:
    """Builds the error rows of one batch for a Validator's key and partition columns."""

    key: str | None
    partition_by: list[str]
    builder: R.RecordBuilder
    json_rows: Callable[[pa.RecordBatch], list[str | None] | None] | None = None

    def _row_strings(self, rows: pa.Array, table: pa.Table, raw: RawRows, name: str
                     ) -> pa.Array:
        """The same as strings, computed on Arrow arrays."""
        cast = as_strings(table.column(name).take(rows))
        if cast.null_count == 0:
            return cast
        original = raw.column(name, rows.to_pylist())
        fallback = pa.array([None if v is None else str(v) for v in original], pa.string())
        return pc.coalesce(cast, fallback)

    def table(self, rows: list[int], failed: dict[int, Failure], table: pa.Table,
                     raw: RawRows, ctx: R.CaptureContext, schema: str | None,
                     line_numbers: Sequence[int] | None) -> pa.Table:
        """Error records built column by column (no dict per row): the fast path, used when
        no PII policy needs to see each record."""
        if not rows:
            return S.empty_table()
        k = len(rows)
        base = {key: v for key, v in ctx.base().items() if key not in ROW_KEYS}
        at = pa.array(rows, pa.int64())
        optional: list[tuple[str, pa.Array]] = []
        if self.key is not None:
            found = self._row_strings(at, table, raw, self.key)
            optional.append((R.RECORD_KEY, found))
            optional.append((R.RECORD_KEY_FIELD, pc.if_else(
                found.is_valid(), pa.scalar(self.key), pa.scalar(None, pa.string()))))
        if self.partition_by:
            parts = [pc.binary_join_element_wise(f"{p}=", self._row_strings(at, table, raw, p),
                                                 "") for p in self.partition_by]
            optional.append((R.PARTITION_PATH, pc.binary_join_element_wise(*parts, "/")))
        if line_numbers is not None:
            optional.append((R.SOURCE_LINE, as_strings(
                pa.array(np.asarray(line_numbers, dtype=np.int64)).take(at))))
        elif ctx.first_line is not None:
            optional.append((R.SOURCE_LINE, as_strings(pc.add(at, ctx.first_line))))
        if ctx.first_offset is not None:
            optional.append((R.SOURCE_OFFSET, as_strings(pc.add(at, ctx.first_offset))))
        cap = self.builder.config.stacktrace_max_chars
        index: dict[int, int] = {}
        unique: list[tuple[list[str], list[str], str]] = []
        per_row: list[int] = []
        for row in rows:
            failure = failed[row]
            at = index.get(id(failure))
            if at is None:
                at = index[id(failure)] = len(unique)
                unique.append(tail(failure, cap))
            per_row.append(at)
        which = pa.array(per_row, pa.int32())
        messages = pa.array([u[2] for u in unique], pa.string()).take(which)
        context = context_column(k, base, unique, which, optional)
        uid = self.builder.uid
        ts = R.now_ts()
        return pa.Table.from_arrays([
            pa.array(uid.many(k), pa.string()), pa.array([ts] * k, pa.string()),
            pa.array([schema] * k, pa.string()), pa.array(self.payloads(rows, raw), pa.string()),
            messages, context], schema=S.arrow_schema())

    def payloads(self, rows: list[int], raw: RawRows) -> list[str | None]:
        """`record` of each failed row: the original row as JSON (one call over the Arrow
        rows when the validator gives one, else Python's json)."""
        if raw.payloads is not None:
            return list(raw.payloads(rows))
        if raw.batch is None:
            assert raw.records is not None
            return [R.to_json(raw.records[i]) for i in rows]
        subset = raw.batch.take(pa.array(rows, pa.int64()))
        if self.json_rows is not None:
            found = self.json_rows(subset)
            if found is not None:
                return found
        return [R.to_json(r) for r in subset.to_pylist()]

    def dicts(self, rows: list[int], failed: dict[int, Failure], table: pa.Table,
                       raw: RawRows, ctx: R.CaptureContext, schema: str | None,
                       line_numbers: Sequence[int] | None) -> list[dict[str, Any]]:
        if not rows:
            return []
        base = ctx.base()
        ts = R.now_ts()
        originals = raw.rows(rows)
        keys = table.column(self.key).take(pa.array(rows)).to_pylist() if self.key else None
        parts = {p: table.column(p).take(pa.array(rows)).to_pylist() for p in self.partition_by}
        result = []
        for pos, row in enumerate(rows):
            failure = failed[row]
            context = dict(base)
            context.update(failure.extra)
            if self.key is not None:
                key = keys[pos] if keys is not None else None
                if key is None:
                    key = raw.value(originals[pos], self.key)
                if key is not None:
                    context[R.RECORD_KEY] = str(key)
                    context[R.RECORD_KEY_FIELD] = self.key
            if self.partition_by:
                values = [parts[p][pos] if parts[p][pos] is not None
                          else raw.value(originals[pos], p) for p in self.partition_by]
                if all(v is not None for v in values):
                    context[R.PARTITION_PATH] = "/".join(
                        f"{p}={v}" for p, v in zip(self.partition_by, values, strict=True))
            if line_numbers is not None:
                context[R.SOURCE_LINE] = str(line_numbers[row])
            elif ctx.first_line is not None:
                context[R.SOURCE_LINE] = str(ctx.first_line + row)
            if ctx.first_offset is not None:
                context[R.SOURCE_OFFSET] = str(ctx.first_offset + row)
            result.append(self.builder.build(
                reason=failure.reason, detail=failure.detail, error_class=failure.error_class,
                text=failure.text, record=originals[pos], schema=schema, context=context,
                columns=failure.columns, ts=ts, safe_text=failure.safe_text))
        return result


ROW_KEYS = frozenset({R.REASON, R.ERROR_CLASS, R.FINGERPRINT, R.COLUMN, R.CHECK,
                       R.FAILED_CHECKS, R.RECORD_KEY, R.RECORD_KEY_FIELD, R.PARTITION_PATH,
                       R.SOURCE_LINE, R.SOURCE_OFFSET})


def as_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Values as strings (Arrow's cast, or Python's str for types Arrow cannot cast)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if _is_textual(values.type):
        return pc.cast(values, pa.string())
    try:
        return pc.cast(values, pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return pa.array([None if v is None else str(v) for v in values.to_pylist()],
                        pa.string())


# A column of a map's slot: one text for every row, an array of a text per row, or
# (texts, indices): the row's text is texts[indices[row]].
Column: TypeAlias = "str | pa.Array | tuple[pa.Array, np.ndarray]"


def context_column(k: int, base: Mapping[str, str],
                    unique: list[tuple[list[str], list[str], str]], which: pa.Array,
                    optional: list[tuple[str, pa.Array]]) -> pa.Array:
    """The `context` map of k error rows without a Python loop over rows: every entry kind
    is a slot (a column of keys and one of values; a null value means the row has no such
    entry): the base entries, then each failure's own entries, then the optional ones."""
    slots: list[tuple[Column, Column]] = list(base.items())
    width = max(len(u[0]) for u in unique)
    rows = which.to_numpy(zero_copy_only=False)
    for j in range(width):
        keys = pa.array([u[0][j] if j < len(u[0]) else None for u in unique], pa.string())
        values = pa.array([u[1][j] if j < len(u[1]) else None for u in unique], pa.string())
        slots.append(((keys, rows), (values, rows)))
    slots += optional
    return interleave_map(k, slots)


def repeated(value: str, k: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), k)


def _gather(k: int, columns: Sequence[Column]) -> tuple[pa.Array, np.ndarray]:
    """The texts of `columns` in one array, and where each column's text of each row is
    in it (one row of positions a column)."""
    pieces: list[pa.Array] = []
    where = np.empty((len(columns), k), np.int64)
    start = 0
    for c, column in enumerate(columns):
        if isinstance(column, str):
            pieces.append(pa.array([column], pa.string()))
            where[c] = start
        elif isinstance(column, tuple):
            pieces.append(column[0].cast(pa.string()))
            where[c] = start + np.asarray(column[1], np.int64)
        else:
            pieces.append(column.cast(pa.string()))
            where[c] = start + np.arange(k, dtype=np.int64)
        start += len(pieces[-1])
    return pa.concat_arrays(pieces), where


def interleave_map(k: int, slots: Sequence[tuple[Column, Column]]) -> pa.Array:
    """A map column of k rows from slots (keys, values: each a :data:`Column`): row i
    holds the entries of the slots in order, the slots whose value is null left out. The
    entries are gathered row by row with one take of the keys and one of the values
    (positions computed with numpy; a text for every row is stored once)."""
    keys, key_at = _gather(k, [key for key, _ in slots])
    values, value_at = _gather(k, [value for _, value in slots])
    order = value_at.T.ravel()  # row after row, slot after slot
    present = np.asarray(values.is_valid().to_numpy(zero_copy_only=False))[order] \
        if len(order) else np.zeros(0, bool)
    counts = present.reshape(k, len(slots)).sum(axis=1) if k else np.zeros(0, np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.MapArray.from_arrays(
        pa.array(offsets), keys.take(pa.array(key_at.T.ravel()[present])),
        values.take(pa.array(order[present])))


PARSE_KEYS = frozenset({R.SOURCE_LINE, R.SOURCE_OFFSET, R.RECORD_BASE64, R.RECORD_BYTES,
                         R.RECORD_FORMAT, R.REASON, R.ERROR_CLASS, R.FINGERPRINT})


@functools.lru_cache(maxsize=8192)
def parse_fingerprint(reason: str, error_class: str, message: str) -> str:
    return R.fingerprint(reason, R.exception_detail(error_class, message))


def _strings(values: Sequence[Any]) -> pa.Array:
    return pa.array([None if v is None else str(v) for v in values], pa.string())


@dataclass
class ParseFailures:
    """Records that failed to parse, as columns (one row each): where each starts (its
    line, its byte offset or null), its text, its source schema (or null), its extra
    context entries (a column each, null where a record has none), and which of the
    distinct failures it had (`kinds`: positions in `reasons`, `classes` and `messages`,
    a message being the exception's text with its white space collapsed)."""

    lines: pa.Array
    offsets: pa.Array
    texts: pa.Array
    schemas: pa.Array
    kinds: pa.Array
    reasons: list[str]
    classes: list[str]
    messages: list[str]
    extra: dict[str, pa.Array] = field(default_factory=dict)
    safe: list[str | None] | None = None  # each failure's text under a PII policy

    @classmethod
    def of(cls, failures: Sequence[Any]) -> ParseFailures:
        """From ``errortable.capture.parsing.Failure`` objects."""
        distinct: dict[tuple[str, str, str], int] = {}
        safe: list[str | None] = []
        kinds = []
        for f in failures:
            key = (f.reason, type(f.exc).__name__, " ".join(str(f.exc).split()))
            kinds.append(distinct.setdefault(key, len(distinct)))
            if len(safe) < len(distinct):
                safe.append(R.safe_exception_text(f.exc))
        reasons, classes, messages = (list(x) for x in zip(*distinct, strict=True)) \
            if distinct else ([], [], [])
        extra = {key: _strings([f.extra.get(key) for f in failures])
                 for key in dict.fromkeys(key for f in failures for key in f.extra)}
        return cls(pa.array([f.line for f in failures], pa.int64()),
                   pa.array([f.offset for f in failures], pa.int64()),
                   pa.array([f.text for f in failures], pa.string()),
                   pa.array([f.schema for f in failures], pa.string()),
                   pa.array(kinds, pa.int32()), reasons, classes, messages, extra, safe)


def parse_error_table(builder: R.RecordBuilder, base: Mapping[str, str],
                      failures: Sequence[Any] | ParseFailures) -> pa.Table | None:
    """The error records of records that failed to parse (``errortable.capture.parsing.Failure``
    objects, or :class:`ParseFailures`), column by column: the records
    ``RecordBuilder.build`` makes one by one for them (the raw text as a JSON string, the
    exception's class and message). None when the builder has a PII policy or the base
    context holds a key these records set (the caller then builds them one by one)."""
    if builder.protects or PARSE_KEYS & set(base):
        return None
    found = failures if isinstance(failures, ParseFailures) else ParseFailures.of(failures)
    k = len(found.lines)
    if k == 0:
        return S.empty_table()
    cap = builder.config.stacktrace_max_chars
    kinds = found.kinds.to_numpy(zero_copy_only=False)

    def per_kind(values: Sequence[str]) -> tuple[pa.Array, np.ndarray]:
        return pa.array(values, pa.string()), kinds

    slots: list[tuple[Column, Column]] = list(base.items())
    slots.append((R.SOURCE_LINE, pc.cast(found.lines, pa.string())))
    slots.append((R.SOURCE_OFFSET, pc.cast(found.offsets, pa.string())))
    slots += list(found.extra.items())
    slots += [(R.RECORD_FORMAT, "raw"), (R.REASON, per_kind(found.reasons)),
              (R.ERROR_CLASS, per_kind(found.classes)),
              (R.FINGERPRINT, per_kind([
                  parse_fingerprint(r, c, t) for r, c, t in
                  zip(found.reasons, found.classes, found.messages, strict=True)]))]
    messages = pa.array([R.format_message(c, t, None, cap)
                         for c, t in zip(found.classes, found.messages, strict=True)],
                        pa.string())
    return pa.Table.from_arrays([
        builder.uid.array(k), repeated(R.now_ts(), k), found.schemas,
        json_strings(found.texts), messages.take(pa.array(kinds)),
        interleave_map(k, slots)], schema=S.arrow_schema())


# Python's JSON encoder (ensure_ascii off) escapes a quote, a backslash and the control
# characters, these by their short escapes, the others as \u00XX.
_SHORT_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t",
                  "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = '[\\x00-\\x1f"\\\\]'
_OTHER_CONTROLS = "[\\x00-\\x07\\x0b\\x0e-\\x1f]"


def json_strings(texts: pa.Array) -> pa.Array:
    """Each text as a JSON string, exactly as ``records.to_json`` writes it, computed on
    the whole column (quotes around it, and its quotes, backslashes and control
    characters escaped)."""
    texts = texts.cast(pa.string())
    if len(texts) and pc.any(pc.match_substring_regex(texts, _NEEDS_ESCAPE)).as_py():
        for char, escaped in _SHORT_ESCAPES.items():  # the backslash first
            texts = pc.replace_substring(texts, char, escaped)
        if pc.any(pc.match_substring_regex(texts, _OTHER_CONTROLS)).as_py():
            for code in [*range(0x08), 0x0B, *range(0x0E, 0x20)]:
                texts = pc.replace_substring(texts, chr(code), f"\\u{code:04x}")
    quote = pa.scalar('"', pa.string())
    return pc.binary_join_element_wise(quote, texts, quote, pa.scalar("", pa.string()))


def tail(failure: Failure, cap: int) -> tuple[list[str], list[str], str]:
    """The context entries and the message a failure adds to each of its rows."""
    keys = [R.REASON, R.ERROR_CLASS, R.FINGERPRINT]
    values = [failure.reason, failure.error_class, R.fingerprint(failure.reason, failure.detail)]
    if failure.columns:
        keys.append(R.COLUMN)
        values.append(",".join(failure.columns))
    for key, value in failure.extra.items():
        keys.append(key)
        values.append(value)
    return keys, values, R.format_message(failure.error_class, failure.text, None, cap)


def _is_textual(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)
