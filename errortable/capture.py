"""Splitting records into good rows and error records, per Arrow batch (no pyspark here).

The Spark write path calls :meth:`Validator.split` once per Arrow batch inside
``mapInArrow``; the JSON/CSV helpers turn raw lines into records (and parse errors) for
:meth:`Validator.split_records`. Each input row ends up in exactly one of the two outputs,
so rows in = rows written + error rows. A row is checked in stages and reported once, by
the first stage it fails: cast (each column to the target type; the failing rows are found
exactly, the others kept), null (a non-nullable column), key, partition, then the named
checks. Checks are SQL boolean expressions evaluated by DuckDB over the cast rows, with
SQL CHECK semantics: a row fails when the expression is FALSE (NULL passes; write
``x IS NOT NULL AND x > 0`` to reject nulls). Everything that can be validated without
data (the schema, key, partition columns, check expressions) is validated when the
Validator is built, so a bad check is an error before anything is written.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from errortable import records as R
from errortable import schema as S
from errortable.config import ErrorTableConfig
from markerstore.errors import ConfigError

ROW_COLUMN = "__errortable_row"
EXTRA_COLUMNS = ("error", "ignore")
_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                OverflowError, TypeError, ValueError)


def schema_json(schema: pa.Schema) -> str:
    """A source schema as the `schema` column stores it: JSON with name, type, nullable."""
    return json.dumps({"type": "arrow", "fields": [
        {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]},
        separators=(",", ":"))


@dataclass
class _Failure:
    reason: str
    detail: str
    error_class: str
    text: str
    columns: list[str] = field(default_factory=list)
    extra: dict[str, str] = field(default_factory=dict)


Failure = tuple[str, str]  # (error class, message)


def _failure(exc: BaseException) -> Failure:
    return type(exc).__name__, " ".join(str(exc).split())


def _convert(n: int, target: pa.DataType, convert: Callable[[int, int], pa.Array]
             ) -> tuple[pa.Array, dict[int, Failure]]:
    """Convert rows [0, n) slice by slice, halving a slice that fails until the failing rows
    are single: O(k log n) conversions for k bad rows. Failed rows become nulls."""
    if n == 0:
        return convert(0, 0), {}
    pieces: list[tuple[int, pa.Array]] = []
    failures: dict[int, Failure] = {}
    stack = [(0, n)]
    while stack:
        offset, length = stack.pop()
        try:
            pieces.append((offset, convert(offset, length)))
        except _CAST_ERRORS as exc:
            if length == 1:
                failures[offset] = _failure(exc)
                pieces.append((offset, pa.nulls(1, target)))
                continue
            half = length // 2
            stack.append((offset + half, length - half))
            stack.append((offset, half))
    if len(pieces) == 1:
        return pieces[0][1], failures
    pieces.sort(key=lambda p: p[0])
    return pa.concat_arrays([p[1] for p in pieces]), failures


def _is_textual(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


class Validator:
    """Validates records against a target schema, a record key, partition columns and
    named SQL checks; picklable (its DuckDB connection is made lazily per process).

    `extra_columns`: what a source column (or JSON field) that the target schema lacks
    does: "error" (the default: an Arrow batch with such a column is a ConfigError, a
    record with such a field is an error record of reason "schema"), or "ignore" (dropped).
    """

    def __init__(self, target_schema: pa.Schema, key: str | None = None,
                 partition_by: Sequence[str] | None = None,
                 checks: Mapping[str, str] | None = None, *,
                 config: ErrorTableConfig | None = None, extra_columns: str = "error") -> None:
        if not isinstance(target_schema, pa.Schema):
            raise ConfigError(f"target_schema must be a pyarrow.Schema, got "
                              f"{type(target_schema).__name__}")
        names = list(target_schema.names)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"target schema has duplicate columns: {', '.join(dupes)}")
        if ROW_COLUMN in names:
            raise ConfigError(f"column name {ROW_COLUMN!r} is reserved")
        if key is not None and key not in names:
            raise ConfigError(f"record key column {key!r} is not in the target schema "
                              f"(columns: {', '.join(names)})")
        partition_by = list(partition_by or [])
        unknown = [c for c in partition_by if c not in names]
        if unknown:
            raise ConfigError(f"partition column(s) {', '.join(map(repr, unknown))} are not in "
                              f"the target schema (columns: {', '.join(names)})")
        if len(set(partition_by)) != len(partition_by):
            raise ConfigError(f"partition columns repeat: {partition_by}")
        if extra_columns not in EXTRA_COLUMNS:
            raise ConfigError(f"extra_columns must be one of {EXTRA_COLUMNS}, "
                              f"got {extra_columns!r}")
        self.target_schema = target_schema
        self.key = key
        self.partition_by = partition_by
        self.checks = dict(checks or {})
        self.extra_columns = extra_columns
        self.config = config or ErrorTableConfig()
        self._builder = R.RecordBuilder(self.config)
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()
        self._validate_checks()

    # --- pickling: no connection, no lock -------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_con"] = None
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = duckdb.connect()
        return self._con

    def _validate_checks(self) -> None:
        con = duckdb.connect()
        con.register("record", self.target_schema.empty_table())
        columns = ", ".join(self.target_schema.names)
        for name, expr in self.checks.items():
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"a check needs a non-empty name, got {name!r}")
            if not isinstance(expr, str) or not expr.strip():
                raise ConfigError(f"check {name!r} needs a SQL boolean expression, "
                                  f"got {expr!r}")
            where = f"check {name!r} ({expr})"
            query = f"SELECT ({expr}) AS v FROM record"
            try:
                if len(con.extract_statements(query)) != 1:
                    raise ConfigError(f"{where} is not one SQL expression")
                relation = con.sql(query)
                types = [str(t) for t in relation.types]
                rows = relation.fetchall()
            except duckdb.Error as exc:
                message = " ".join(str(exc).split())
                raise ConfigError(f"{where} is not a valid SQL boolean expression over the "
                                  f"columns {columns}: {message}") from None
            if types != ["BOOLEAN"]:
                raise ConfigError(f"{where} is of type {types[0] if types else '?'}, "
                                  "not BOOLEAN")
            if rows:
                raise ConfigError(f"{where} is an aggregate; checks are evaluated per record")

    # --- public ----------------------------------------------------------------------------
    def split(self, batch: pa.RecordBatch | pa.Table,
              context: R.CaptureContext | Mapping[str, Any] | None = None
              ) -> tuple[pa.RecordBatch, list[dict[str, Any]]]:
        """(good rows as a batch in the target schema, error records as dicts) for one
        Arrow batch."""
        good, errors = self.split_arrow(batch, context)
        return good, S.arrow_to_records(errors)

    def split_arrow(self, batch: pa.RecordBatch | pa.Table,
                    context: R.CaptureContext | Mapping[str, Any] | None = None
                    ) -> tuple[pa.RecordBatch, pa.Table]:
        """(good rows, error records as an Arrow table in the ErrorRecord schema): the fast
        path, for :meth:`TaskErrorWriter.write_arrow`."""
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else \
                pa.RecordBatch.from_pylist([], schema=batch.schema)
        ctx = R.CaptureContext.of(context)
        n = batch.num_rows
        source_names = set(batch.schema.names)
        extra = sorted(source_names - set(self.target_schema.names))
        if extra and self.extra_columns == "error":
            raise ConfigError(f"source column(s) {', '.join(extra)} are not in the target "
                              "schema; add them to it or pass extra_columns='ignore'")
        columns: dict[str, pa.Array] = {}
        failures: dict[int, list[tuple[str, Failure]]] = {}
        for f in self.target_schema:
            if f.name not in source_names:
                if not f.nullable:
                    raise ConfigError(f"non-nullable target column {f.name!r} is missing "
                                      "from the source batch")
                columns[f.name] = pa.nulls(n, f.type)
                continue
            source = batch.column(f.name)
            if source.type != f.type:
                self._check_castable(f, source.type)
            array, failed = self._cast_column(source, f.type)
            columns[f.name] = array
            for row, exc in failed.items():
                failures.setdefault(row, []).append((f.name, exc))
        raw = _RawRows(batch=batch)
        return self._finish(n, columns, failures, {}, raw, ctx, schema_json(batch.schema),
                            None)

    def split_records(self, records: Sequence[Mapping[str, Any]],
                      context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                      line_numbers: Sequence[int] | None = None, schema: str | None = None
                      ) -> tuple[pa.RecordBatch, list[dict[str, Any]]]:
        """The same for Python dicts (parsed JSON/CSV lines): values are converted to the
        target types (strings are cast as Arrow casts them, so CSV text works)."""
        ctx = R.CaptureContext.of(context)
        n = len(records)
        if line_numbers is not None and len(line_numbers) != n:
            raise ValueError(f"{len(line_numbers)} line numbers for {n} records")
        target_names = set(self.target_schema.names)
        pre: dict[int, _Failure] = {}
        if self.extra_columns == "error":
            for i, record in enumerate(records):
                unknown = sorted(set(record) - target_names)
                if unknown:
                    pre[i] = _Failure("schema", "unknown:" + ",".join(unknown), "SchemaError",
                                      f"field(s) {', '.join(map(repr, unknown))} are not in "
                                      "the target schema", unknown)
        columns: dict[str, pa.Array] = {}
        failures: dict[int, list[tuple[str, Failure]]] = {}
        for f in self.target_schema:
            values = [r.get(f.name) for r in records]
            array, failed = _convert(n, f.type, _python_converter(values, f.type))
            columns[f.name] = array
            for row, exc in failed.items():
                failures.setdefault(row, []).append((f.name, exc))
        raw = _RawRows(records=records)
        good, errors = self._finish(n, columns, failures, pre, raw, ctx, schema, line_numbers)
        return good, S.arrow_to_records(errors)

    # --- stages -------------------------------------------------------------------------
    def _check_castable(self, f: pa.Field, source_type: pa.DataType) -> None:
        try:
            pc.cast(pa.nulls(0, source_type), f.type)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ConfigError(f"column {f.name!r}: {source_type} cannot be cast to {f.type} "
                              f"at all ({exc})") from None

    def _cast_column(self, source: pa.Array, target: pa.DataType
                     ) -> tuple[pa.Array, dict[int, Failure]]:
        """Cast one column with Arrow's semantics, finding exactly the rows that fail.

        Text columns cast to a type DuckDB also parses get a vectorized hint first: the
        rows DuckDB's TRY_CAST rejects are cast one by one with Arrow (each either fails,
        with Arrow's message, or gets its value back), the rest in one Arrow cast. Other
        columns (and any row the hint missed) are found by halving failing slices."""
        n = len(source)
        if source.type == target:
            return source, {}
        suspects = self._suspects(source, target)
        if not suspects:
            return _convert(n, target, _arrow_converter(source, target))
        mask = pc.is_in(pa.array(range(n), pa.int64()), value_set=pa.array(suspects, pa.int64()))
        cleared = pc.if_else(mask, pa.scalar(None, source.type), source)
        array, failures = _convert(n, target, _arrow_converter(cleared, target))
        recovered: dict[int, Any] = {}
        for row in suspects:
            try:
                recovered[row] = pc.cast(source.slice(row, 1), target, safe=True)[0]
            except _CAST_ERRORS as exc:
                failures[row] = _failure(exc)
        if recovered:  # DuckDB was stricter than Arrow for these: keep Arrow's answer
            rows = sorted(recovered)
            put = pc.is_in(pa.array(range(n), pa.int64()), value_set=pa.array(rows, pa.int64()))
            array = pc.replace_with_mask(array, put, pa.array([recovered[r] for r in rows],
                                                              target))
        return array, failures

    def _suspects(self, source: pa.Array, target: pa.DataType) -> list[int] | None:
        duck = _duck_type(target)
        if duck is None or not _is_textual(source.type) or len(source) == 0:
            return None
        table = pa.table({"i": pa.array(range(len(source)), pa.int64()), "v": source})
        with self._lock:
            con = self._connection()
            con.register("__cast_hint", table)
            try:
                result = con.sql(f"SELECT i FROM __cast_hint WHERE v IS NOT NULL AND "
                                 f"TRY_CAST(v AS {duck}) IS NULL ORDER BY i").fetchall()
            except duckdb.Error:
                return None
            finally:
                con.unregister("__cast_hint")
        return [int(r[0]) for r in result]

    def _finish(self, n: int, columns: dict[str, pa.Array],
                cast_failures: dict[int, list[tuple[str, Failure]]],
                failed: dict[int, _Failure], raw: _RawRows, ctx: R.CaptureContext,
                schema: str | None, line_numbers: Sequence[int] | None
                ) -> tuple[pa.RecordBatch, pa.Table]:
        for row, items in cast_failures.items():
            if row in failed:
                continue
            cols = [c for c, _ in items]
            types = {c: str(self.target_schema.field(c).type) for c in cols}
            text = "; ".join(f"column {c!r} to {types[c]}: {e[1]}" for c, e in items)
            failed[row] = _Failure(R.CAST, ",".join(f"{c}:{types[c]}" for c in cols),
                                   items[0][1][0], f"cannot cast {text}", cols)
        table = pa.table(columns, schema=self.target_schema)
        self._null_stage(table, failed)
        self._key_stage(table, failed)
        self._partition_stage(table, failed)
        if self.checks:
            self._check_stage(table, failed)
        good = [i for i in range(n) if i not in failed]
        good_table = table if len(good) == n else table.take(pa.array(good, pa.int64()))
        batches = good_table.combine_chunks().to_batches()
        good_batch = batches[0] if len(batches) == 1 else \
            pa.RecordBatch.from_pylist([], schema=self.target_schema)
        rows = sorted(failed)
        if self._builder.protects:
            errors = S.records_to_arrow(self._error_records(rows, failed, table, raw, ctx,
                                                            schema, line_numbers))
        else:
            errors = self._error_table(rows, failed, table, raw, ctx, schema, line_numbers)
        assert good_batch.num_rows + errors.num_rows == n, "a row was lost or duplicated"
        return good_batch, errors

    def _null_stage(self, table: pa.Table, failed: dict[int, _Failure]) -> None:
        for f in self.target_schema:
            if f.nullable:
                continue
            for row in _true_rows(pc.is_null(table.column(f.name))):
                if row not in failed:
                    failed[row] = _Failure(R.NULL, f.name, "NullValueError",
                                           f"column {f.name!r} is not nullable but is null",
                                           [f.name])

    def _key_stage(self, table: pa.Table, failed: dict[int, _Failure]) -> None:
        if self.key is None:
            return
        column = table.column(self.key)
        for row in _true_rows(pc.is_null(column)):
            if row not in failed:
                failed[row] = _Failure(R.KEY, f"{self.key}:null", "RecordKeyError",
                                       f"record key column {self.key!r} is null", [self.key])
        if _is_textual(column.type):
            empty = pc.equal(pc.utf8_trim_whitespace(column), "")
            for row in _true_rows(empty):
                if row not in failed:
                    failed[row] = _Failure(R.KEY, f"{self.key}:empty", "RecordKeyError",
                                           f"record key column {self.key!r} is empty",
                                           [self.key])

    def _partition_stage(self, table: pa.Table, failed: dict[int, _Failure]) -> None:
        for name in self.partition_by:
            column = table.column(name)
            for row in _true_rows(pc.is_null(column)):
                if row not in failed:
                    failed[row] = _Failure(R.PARTITION, f"{name}:null", "PartitionValueError",
                                           f"partition column {name!r} is null", [name])
            if not _is_textual(column.type):
                continue
            bad = pc.or_kleene(
                pc.match_substring_regex(column, r"[/\\\x00-\x1f\x7f]"),
                pc.is_in(column, value_set=pa.array(["", ".", ".."], column.type)))
            for row in _true_rows(bad):
                if row not in failed:
                    failed[row] = _Failure(
                        R.PARTITION, f"{name}:invalid", "PartitionValueError",
                        f"partition column {name!r} holds a value that is not a valid folder "
                        "name (empty, '.', '..', or with a slash or control character)", [name])

    def _check_stage(self, table: pa.Table, failed: dict[int, _Failure]) -> None:
        rows = [i for i in range(table.num_rows) if i not in failed]
        if not rows:
            return
        subset = table.take(pa.array(rows, pa.int64())).append_column(
            ROW_COLUMN, pa.array(rows, pa.int64()))
        with self._lock:
            con = self._connection()
            con.register("record", subset)
            try:
                self._run_checks(con, failed)
            finally:
                con.unregister("record")

    def _run_checks(self, con: duckdb.DuckDBPyConnection, failed: dict[int, _Failure]) -> None:
        names = list(self.checks)
        flags = ", ".join(f"(({self.checks[c]}) IS FALSE)" for c in names)
        any_false = " OR ".join(f"(({self.checks[c]}) IS FALSE)" for c in names)
        grouped: list[tuple[tuple[bool, ...], list[int]]]
        try:
            # One row per combination of failing checks, with the rows that have it.
            result = con.sql(f"SELECT {flags}, list({ROW_COLUMN}) FROM record "
                             f"WHERE {any_false} GROUP BY ALL").fetchall()
            grouped = [(tuple(r[:-1]), list(r[-1])) for r in result]
        except duckdb.Error:
            grouped = [(tuple(values), [row]) for row, *values in
                       self._run_checks_one_by_one(con, failed)]
        for values, group in grouped:
            failing = tuple(c for c, v in zip(names, values, strict=True) if v)
            if not failing:
                continue
            first = failing[0]
            extra = {R.CHECK: first}
            if len(failing) > 1:
                extra[R.FAILED_CHECKS] = ",".join(failing)
            failure = _Failure(R.CHECK_REASON, first, "CheckFailed",
                               f"check {first!r} failed: {self.checks[first]}", extra=extra)
            failed.update((row, failure) for row in group if row not in failed)

    def _run_checks_one_by_one(self, con: duckdb.DuckDBPyConnection,
                               failed: dict[int, _Failure]) -> list[tuple[Any, ...]]:
        """A check raised at run time (a cast inside it, say): find the raising rows one
        check at a time; they fail that check, with DuckDB's error as the message."""
        table = con.sql("SELECT * FROM record").to_arrow_table()
        flags: dict[int, list[bool]] = {}
        names = list(self.checks)
        for index, name in enumerate(names):
            expr = self.checks[name]

            def evaluate(off: int, ln: int, expr: str = expr) -> pa.Array:
                con.register("slice", table.slice(off, ln))
                try:
                    values = con.sql(f"SELECT (({expr}) IS FALSE) FROM slice").fetchall()
                finally:
                    con.unregister("slice")
                return pa.array([v[0] for v in values], pa.bool_())

            array, raised = _convert_duck(table.num_rows, evaluate)
            row_ids = table.column(ROW_COLUMN).to_pylist()
            for pos, value in enumerate(array.to_pylist()):
                if value:
                    flags.setdefault(row_ids[pos], [False] * len(names))[index] = True
            for pos, exc in raised.items():
                row = row_ids[pos]
                if row not in failed:
                    failed[row] = _Failure(
                        R.CHECK_REASON, name, type(exc).__name__,
                        f"check {name!r} raised: {' '.join(str(exc).split())}",
                        extra={R.CHECK: name, R.FAILED_CHECKS: name})
        return [(row, *values) for row, values in flags.items()]

    # --- error records -------------------------------------------------------------------
    def _row_values(self, rows: list[int], table: pa.Table, raw: _RawRows, name: str
                    ) -> list[Any]:
        """A column's values at `rows`: the cast value, else the original (a failed cast)."""
        cast = table.column(name).take(pa.array(rows, pa.int64())).to_pylist()
        if all(v is not None for v in cast):
            return cast
        original = raw.column(name, rows)
        return [c if c is not None else o for c, o in zip(cast, original, strict=True)]

    def _row_strings(self, rows: pa.Array, table: pa.Table, raw: _RawRows, name: str
                     ) -> pa.Array:
        """The same as strings, computed on Arrow arrays."""
        cast = _as_strings(table.column(name).take(rows))
        if cast.null_count == 0:
            return cast
        original = raw.column(name, rows.to_pylist())
        fallback = pa.array([None if v is None else str(v) for v in original], pa.string())
        return pc.coalesce(cast, fallback)

    def _error_table(self, rows: list[int], failed: dict[int, _Failure], table: pa.Table,
                     raw: _RawRows, ctx: R.CaptureContext, schema: str | None,
                     line_numbers: Sequence[int] | None) -> pa.Table:
        """Error records built column by column (no dict per row): the fast path, used when
        no PII policy needs to see each record."""
        if not rows:
            return S.empty_table()
        k = len(rows)
        base = {key: v for key, v in ctx.base().items() if key not in _ROW_KEYS}
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
            optional.append((R.SOURCE_LINE, _as_strings(
                pa.array(list(line_numbers), pa.int64()).take(at))))
        elif ctx.first_line is not None:
            optional.append((R.SOURCE_LINE, _as_strings(pc.add(at, ctx.first_line))))
        if ctx.first_offset is not None:
            optional.append((R.SOURCE_OFFSET, _as_strings(pc.add(at, ctx.first_offset))))
        cap = self.config.stacktrace_max_chars
        index: dict[int, int] = {}
        unique: list[tuple[list[str], list[str], str]] = []
        per_row: list[int] = []
        for row in rows:
            failure = failed[row]
            at = index.get(id(failure))
            if at is None:
                at = index[id(failure)] = len(unique)
                unique.append(_tail(failure, cap))
            per_row.append(at)
        which = pa.array(per_row, pa.int32())
        messages = pa.array([u[2] for u in unique], pa.string()).take(which)
        context = _context_column(k, base, unique, which, optional)
        uid = self._builder.uid
        ts = R.now_ts()
        return pa.Table.from_arrays([
            pa.array([uid() for _ in range(k)], pa.string()), pa.array([ts] * k, pa.string()),
            pa.array([schema] * k, pa.string()), pa.array(self._payloads(rows, raw), pa.string()),
            messages, context], schema=S.arrow_schema())

    def _payloads(self, rows: list[int], raw: _RawRows) -> list[str | None]:
        """`record` of each failed row: the original row as JSON (DuckDB's to_json over the
        Arrow rows, one call for all; Python's json for dict records)."""
        if raw.batch is None:
            assert raw.records is not None
            return [R.to_json(raw.records[i]) for i in rows]
        subset = raw.batch.take(pa.array(rows, pa.int64()))
        with self._lock:
            con = self._connection()
            con.register("__payload", subset)
            try:
                column = con.sql("SELECT to_json(p) FROM __payload p").to_arrow_table()
                return [str(v) if v is not None else None for v in column.column(0).to_pylist()]
            except duckdb.Error:
                pass
            finally:
                con.unregister("__payload")
        return [R.to_json(r) for r in subset.to_pylist()]

    def _error_records(self, rows: list[int], failed: dict[int, _Failure], table: pa.Table,
                       raw: _RawRows, ctx: R.CaptureContext, schema: str | None,
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
            result.append(self._builder.build(
                reason=failure.reason, detail=failure.detail, error_class=failure.error_class,
                text=failure.text, record=originals[pos], schema=schema, context=context,
                columns=failure.columns, ts=ts))
        return result


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


_DUCK_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER",
    pa.uint64(): "UBIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN", pa.date32(): "DATE",
}


def _duck_type(target: pa.DataType) -> str | None:
    """The DuckDB type whose TRY_CAST hints at the rows an Arrow cast to `target` rejects."""
    if target in _DUCK_TYPES:
        return _DUCK_TYPES[target]
    if pa.types.is_timestamp(target) and target.tz is None:
        return "TIMESTAMP"
    if pa.types.is_decimal(target) and target.precision <= 38:
        return f"DECIMAL({target.precision}, {target.scale})"
    return None


_ROW_KEYS = frozenset({R.REASON, R.ERROR_CLASS, R.FINGERPRINT, R.COLUMN, R.CHECK,
                       R.FAILED_CHECKS, R.RECORD_KEY, R.RECORD_KEY_FIELD, R.PARTITION_PATH,
                       R.SOURCE_LINE, R.SOURCE_OFFSET})


def _as_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
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


def _context_column(k: int, base: Mapping[str, str],
                    unique: list[tuple[list[str], list[str], str]], which: pa.Array,
                    optional: list[tuple[str, pa.Array]]) -> pa.Array:
    """The `context` map of k error rows without a Python loop over rows: every entry kind
    is a slot (a column of keys and one of values; a null value means the row has no such
    entry), the slots are interleaved row by row with one take, and the empty entries are
    filtered out."""
    slot_keys: list[pa.Array] = []
    slot_values: list[pa.Array] = []
    for key, value in base.items():
        slot_keys.append(pa.repeat(pa.scalar(key, pa.string()), k))
        slot_values.append(pa.repeat(pa.scalar(value, pa.string()), k))
    width = max(len(u[0]) for u in unique)
    for j in range(width):
        keys = pa.array([u[0][j] if j < len(u[0]) else None for u in unique], pa.string())
        values = pa.array([u[1][j] if j < len(u[1]) else None for u in unique], pa.string())
        slot_keys.append(keys.take(which))
        slot_values.append(values.take(which))
    for name, column in optional:
        slot_keys.append(pa.repeat(pa.scalar(name, pa.string()), k))
        slot_values.append(column)
    slots = len(slot_keys)
    position = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), k * slots)),
                           1)
    row = pc.divide(position, slots)  # integer division
    slot = pc.subtract(position, pc.multiply(row, slots))
    order = pc.add(pc.multiply(slot, k), row)
    keys = pa.concat_arrays(slot_keys).take(order)
    values = pa.concat_arrays(slot_values).take(order)
    present = pc.is_valid(values)
    ends = pc.cumulative_sum(pc.cast(present, pa.int32())).take(
        pc.add(pc.multiply(pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), k)),
                                       1), slots), slots - 1))
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cast(ends, pa.int32())])
    return pa.MapArray.from_arrays(offsets, keys.filter(present), values.filter(present))


def _tail(failure: _Failure, cap: int) -> tuple[list[str], list[str], str]:
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


def _true_rows(mask: pa.Array | pa.ChunkedArray) -> list[int]:
    indices = pc.indices_nonzero(pc.fill_null(mask, False))
    return [int(i) for i in indices.to_pylist()]


def _arrow_converter(source: pa.Array, target: pa.DataType) -> Callable[[int, int], pa.Array]:
    def convert(offset: int, length: int) -> pa.Array:
        part = source.slice(offset, length)
        return part if part.type == target else pc.cast(part, target, safe=True)

    return convert


def _python_converter(values: list[Any], target: pa.DataType
                      ) -> Callable[[int, int], pa.Array]:
    def convert(offset: int, length: int) -> pa.Array:
        return _from_python(values[offset:offset + length], target)

    return convert


def _from_python(values: list[Any], target: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, type=target)
    except _CAST_ERRORS:
        if _is_textual(target) or not all(v is None or isinstance(v, str) for v in values):
            raise
        return pc.cast(pa.array(values, pa.string()), target, safe=True)


@dataclass
class _RawRows:
    """The original rows (an Arrow batch, or dicts), read only for the rows that failed."""

    batch: pa.RecordBatch | None = None
    records: Sequence[Mapping[str, Any]] | None = None

    def column(self, name: str, indices: list[int]) -> list[Any]:
        if self.batch is not None:
            if name not in self.batch.schema.names:
                return [None] * len(indices)
            return self.batch.column(name).take(pa.array(indices, pa.int64())).to_pylist()
        assert self.records is not None
        return [self.records[i].get(name) for i in indices]

    def rows(self, indices: list[int]) -> list[Any]:
        if self.batch is not None:
            return self.batch.take(pa.array(indices, pa.int64())).to_pylist()
        assert self.records is not None
        return [dict(self.records[i]) for i in indices]

    @staticmethod
    def value(row: Any, name: str) -> Any:
        return row.get(name) if isinstance(row, dict) else None
