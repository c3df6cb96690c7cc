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
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from errortable import schema as S
from errortable.capture import records as R
from errortable.capture.checks import ROW_COLUMN, check_columns, check_stage
from errortable.capture.errorrows import ErrorRows, RawRows
from errortable.capture.errorrows import Failure as RowFailure
from errortable.config import ErrorTableConfig
from markerstore import duck
from markerstore.errors import ConfigError
from markerstore.paths import control_class
from markerstore.values import cast as C
from markerstore.values.cast import Failure
from markerstore.values.columnwise import convert_columns
from markerstore.values.formats import ValueFormats

EXTRA_COLUMNS = ("error", "ignore")


def schema_json(schema: pa.Schema) -> str:
    """A source schema as the `schema` column stores it: JSON with name, type, nullable."""
    return json.dumps({"type": "arrow", "fields": [
        {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema]},
        separators=(",", ":"))


class Validator:
    """Validates records against a target schema, a record key, partition columns and
    named SQL checks; picklable (its DuckDB connection is made lazily per process).

    `extra_columns`: what a source column (or JSON field) that the target schema lacks
    does: "error" (the default: an Arrow batch with such a column is a ConfigError, a
    record with such a field is an error record of reason "schema"), or "ignore" (dropped).
    `formats`: how text values read (datetime patterns, NaN and infinity tokens, decimal
    grouping: :class:`markerstore.values.formats.ValueFormats`); None: as Arrow casts them.
    """

    def __init__(self, target_schema: pa.Schema, key: str | None = None,
                 partition_by: Sequence[str] | None = None,
                 checks: Mapping[str, str] | None = None, *,
                 config: ErrorTableConfig | None = None, extra_columns: str = "error",
                 formats: ValueFormats | None = None) -> None:
        if not isinstance(target_schema, pa.Schema):
            raise ConfigError(f"target_schema must be a pyarrow.Schema, got "
                              f"{type(target_schema).__name__}")
        names = list(target_schema.names)
        counts = Counter(names)  # a set and a count per name: linear in the columns
        dupes = sorted(n for n, k in counts.items() if k > 1)
        if dupes:
            raise ConfigError(f"target schema has duplicate columns: {', '.join(dupes)}")
        if ROW_COLUMN in counts:
            raise ConfigError(f"column name {ROW_COLUMN!r} is reserved")
        if key is not None and key not in counts:
            raise ConfigError(f"record key column {key!r} is not in the target schema "
                              f"(columns: {', '.join(names)})")
        partition_by = list(partition_by or [])
        unknown = [c for c in partition_by if c not in counts]
        if unknown:
            raise ConfigError(f"partition column(s) {', '.join(map(repr, unknown))} are not in "
                              f"the target schema (columns: {', '.join(names)})")
        if len(set(partition_by)) != len(partition_by):
            raise ConfigError(f"partition columns repeat: {partition_by}")
        if extra_columns not in EXTRA_COLUMNS:
            raise ConfigError(f"extra_columns must be one of {EXTRA_COLUMNS}, "
                              f"got {extra_columns!r}")
        self.target_schema = target_schema
        self._fields = list(target_schema)  # a pa.Schema makes each Field anew, each time
        self.key = key
        self.partition_by = partition_by
        self.checks = dict(checks or {})
        self.extra_columns = extra_columns
        self.formats = formats
        self.config = config or ErrorTableConfig()
        self._builder = R.RecordBuilder(self.config)
        self._lock = threading.Lock()
        self._validate_checks()

    # --- pickling: no lock ---------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        # This thread's single-threaded connection: Spark runs one task per core.
        return duck.local()

    def _validate_checks(self) -> None:
        self.check_columns = check_columns(self.checks, self.target_schema.names)
        if not self.checks:
            return
        con = duck.cursor()
        con.register("record", self.target_schema.empty_table().select(
            self.check_columns).append_column(ROW_COLUMN, pa.array([], pa.int64())))
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
        raw = RawRows(batch=batch)
        return self._finish(n, columns, failures, {}, raw, ctx, schema_json(batch.schema),
                            None)

    def split_records(self, records: Sequence[Mapping[str, Any]],
                      context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                      line_numbers: Sequence[int] | None = None, schema: str | None = None
                      ) -> tuple[pa.RecordBatch, list[dict[str, Any]]]:
        """The same for Python dicts (parsed JSON/CSV lines): values are converted to the
        target types (strings are cast as Arrow casts them, so CSV text works)."""
        good, errors = self.split_records_arrow(records, context, line_numbers=line_numbers,
                                                schema=schema)
        return good, S.arrow_to_records(errors)

    def split_records_arrow(self, records: Sequence[Mapping[str, Any]],
                            context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                            line_numbers: Sequence[int] | None = None,
                            schema: str | None = None) -> tuple[pa.RecordBatch, pa.Table]:
        """:meth:`split_records` with the error records as an Arrow table."""
        ctx = R.CaptureContext.of(context)
        n = len(records)
        if line_numbers is not None and len(line_numbers) != n:
            raise ValueError(f"{len(line_numbers)} line numbers for {n} records")
        target_names = set(self.target_schema.names)
        pre: dict[int, RowFailure] = {}
        if self.extra_columns == "error":
            alike: dict[tuple[str, ...], RowFailure] = {}  # one object per set of fields
            for i, record in enumerate(records):
                extra = record.keys() - target_names
                if extra:
                    unknown = tuple(sorted(extra))
                    pre[i] = alike.get(unknown) or alike.setdefault(unknown, RowFailure(
                        "schema", "unknown:" + ",".join(unknown), "SchemaError",
                        f"field(s) {', '.join(map(repr, unknown))} are not in the target "
                        "schema", list(unknown), safe_text=f"field(s) "
                        f"{', '.join(map(repr, unknown))} are not in the target schema"))
        fields = self._fields
        arrays, failures = convert_columns(
            fields, [[r.get(f.name) for r in records] for f in fields], n,
            lambda group, target: self._convert_values(
                [value for values in group for value in values], target), _one_kind)
        columns = {f.name: a for f, a in zip(fields, arrays, strict=True)}
        raw = RawRows(records=records)
        return self._finish(n, columns, failures, pre, raw, ctx, schema, line_numbers)

    def split_typed(self, table: pa.Table,
                    context: R.CaptureContext | Mapping[str, Any] | None,
                    line_numbers: Sequence[int] | None,
                    payloads: Callable[[list[int]], list[str]]
                    ) -> tuple[pa.RecordBatch, pa.Table]:
        """Rows already cast to the target schema (the typed rows of parsed lines): the
        null, key, partition and check stages; `payloads(rows)` is the original records of
        `rows` as JSON, the `record` of their error rows."""
        columns = {f.name: table.column(f.name) for f in self.target_schema}
        return self._finish(table.num_rows, columns, {}, {}, RawRows(payloads=payloads),
                            R.CaptureContext.of(context), None, line_numbers)

    def split_text(self, table: pa.Table,
                   context: R.CaptureContext | Mapping[str, Any] | None,
                   line_numbers: Sequence[int] | None,
                   payloads: Callable[[list[int]], list[str]]
                   ) -> tuple[pa.RecordBatch, pa.Table]:
        """Rows of text (the fields of parsed CSV records as strings, null where the reader
        read null; a column the target schema lacks is not read): each column cast as
        :meth:`split_records` casts a string, so a value that does not cast fails its row
        with the same error record; then the null, key, partition and check stages.
        `payloads(rows)` is the original records of `rows` as JSON."""
        n = table.num_rows
        batch = table.combine_chunks().to_batches()[0] if n else None  # one chunk a column
        index = {} if batch is None else {name: i for i, name in
                                          enumerate(batch.schema.names)}
        columns = {f.name: pa.nulls(n, f.type) for f in self._fields if f.name not in index}
        fields = [f for f in self._fields if f.name in index]
        sources = [] if batch is None else [batch.column(index[f.name]) for f in fields]
        arrays, failures = convert_columns(  # a type at a time (markerstore.values.columnwise)
            fields, sources, n,
            lambda group, target: self._cast_text(
                group[0] if len(group) == 1 else pa.concat_arrays(group), target),
            lambda _, source: source.type)
        columns.update((f.name, a) for f, a in zip(fields, arrays, strict=True))
        raw = RawRows(batch=batch, payloads=payloads)
        return self._finish(n, columns, failures, {}, raw, R.CaptureContext.of(context),
                            None, line_numbers)

    def _cast_column(self, source: pa.Array, target: pa.DataType
                     ) -> tuple[pa.Array, dict[int, Failure]]:
        """One column cast with Arrow's semantics as `formats` reads text, finding exactly
        the rows that fail, each with Arrow's message
        (:func:`markerstore.values.cast.cast_rows`)."""
        return C.cast_rows(source, target, self.formats)

    _cast_text = _cast_column  # a text column casts as any other

    def _convert_values(self, values: list[Any], target: pa.DataType
                        ) -> tuple[pa.Array, dict[int, Failure]]:
        """Python values to `target`, finding exactly the values that do not convert: each
        value converts alone as in a slice (pa.array, or Arrow's cast of a string), so the
        values of an unexpected Python type are taken apart, the strings among them cast
        together (DuckDB's hint finds the failing ones) and the rest one by one, and the
        plain values converted in one call (halving a failing slice, as before)."""
        n = len(values)
        plain = C.plain_types(target)
        odd = [] if plain is None else [i for i, v in enumerate(values)
                                        if v is not None and type(v) not in plain]
        if not odd:
            return C.by_halves(n, target, C.python_converter(values, target, self.formats))
        cleared = list(values)
        for i in odd:
            cleared[i] = None
        array, failures = C.by_halves(n, target,
                                      C.python_converter(cleared, target, self.formats))
        strings = [i for i in odd if type(values[i]) is str]
        others = [i for i in odd if type(values[i]) is not str]
        parts: list[pa.Array] = []
        where: list[int] = []
        if strings:  # the whole column first: where every one casts, no DuckDB hint
            cast, failed = self._cast_text(pa.array([values[i] for i in strings],
                                                    pa.string()), target)
            parts.append(cast)
            where += strings
            failures.update((strings[j], exc) for j, exc in failed.items())
        for i in others:
            one, failed = C.by_halves(1, target,
                                      C.python_converter([values[i]], target, self.formats))
            parts.append(one)
            where.append(i)
            if failed:
                failures[i] = failed[0]
        index = np.arange(n, dtype=np.int64)
        index[where] = np.arange(n, n + len(where), dtype=np.int64)
        return pa.concat_arrays([array, *parts]).take(pa.array(index)), failures

    # --- stages -------------------------------------------------------------------------
    def _check_castable(self, f: pa.Field, source_type: pa.DataType) -> None:
        try:
            pc.cast(pa.nulls(0, source_type), f.type)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ConfigError(f"column {f.name!r}: {source_type} cannot be cast to {f.type} "
                              f"at all ({exc})") from None

    def _finish(self, n: int, columns: dict[str, pa.Array],
                cast_failures: dict[int, list[tuple[str, Failure]]],
                failed: dict[int, RowFailure], raw: RawRows, ctx: R.CaptureContext,
                schema: str | None, line_numbers: Sequence[int] | None
                ) -> tuple[pa.RecordBatch, pa.Table]:
        alike: dict[tuple[tuple[str, Failure], ...], RowFailure] = {}
        for row, items in cast_failures.items():
            if row in failed:
                continue
            failure = alike.get(tuple(items))
            if failure is None:  # one object for the rows that failed alike
                cols = [c for c, _ in items]
                types = {c: str(self.target_schema.field(c).type) for c in cols}
                text = "; ".join(f"column {c!r} to {types[c]}: {e[1]}" for c, e in items)
                failure = alike[tuple(items)] = RowFailure(
                    R.CAST, ",".join(f"{c}:{types[c]}" for c in cols), items[0][1][0],
                    f"cannot cast {text}", cols, safe_text="cannot cast " + "; ".join(
                        f"column {c!r} to {types[c]} (the value is withheld)"
                        for c, e in items))
            failed[row] = failure
        table = pa.Table.from_arrays([columns[f.name] for f in self._fields],
                                     schema=self.target_schema)
        self._null_stage(table, failed)
        self._key_stage(table, failed)
        self._partition_stage(table, failed)
        if self.checks:
            check_stage(self, table, failed)
        keep = np.ones(n, dtype=bool)
        keep[list(failed)] = False
        good_table = table if not failed else table.filter(pa.array(keep))
        batches = good_table.combine_chunks().to_batches()
        good_batch = batches[0] if len(batches) == 1 else \
            pa.RecordBatch.from_pylist([], schema=self.target_schema)
        rows = sorted(failed)
        builder = ErrorRows(self.key, self.partition_by, self._builder, self._json_rows)
        if self._builder.protects:
            errors = S.records_to_arrow(builder.dicts(rows, failed, table, raw, ctx, schema,
                                                      line_numbers))
        else:
            errors = builder.table(rows, failed, table, raw, ctx, schema, line_numbers)
        assert good_batch.num_rows + errors.num_rows == n, "a row was lost or duplicated"
        return good_batch, errors

    def _json_rows(self, rows: pa.RecordBatch) -> list[str | None] | None:
        """Rows as JSON objects with DuckDB's to_json, one call for all (None if DuckDB
        cannot convert one of the types: the caller then uses Python's json)."""
        with self._lock:
            con = self._connection()
            try:  # a type DuckDB does not take (a half float) fails here already
                con.register("__payload", rows)
                column = con.sql("SELECT to_json(p) FROM __payload p").to_arrow_table()
            except duckdb.Error:
                return None
            finally:
                con.unregister("__payload")
        return [None if v is None else str(v) for v in column.column(0).to_pylist()]

    def _null_stage(self, table: pa.Table, failed: dict[int, RowFailure]) -> None:
        for f in self._fields:
            if not f.nullable:
                _mark(failed, pc.is_null(table.column(f.name)), RowFailure(
                    R.NULL, f.name, "NullValueError",
                    f"column {f.name!r} is not nullable but is null", [f.name],
                    safe_text=f"column {f.name!r} is not nullable but is null"))

    def _key_stage(self, table: pa.Table, failed: dict[int, RowFailure]) -> None:
        if self.key is None:
            return
        column = table.column(self.key)
        _mark(failed, pc.is_null(column), RowFailure(
            R.KEY, f"{self.key}:null", "RecordKeyError",
            f"record key column {self.key!r} is null", [self.key],
            safe_text=f"record key column {self.key!r} is null"))
        if C.is_textual(column.type):
            _mark(failed, pc.equal(pc.utf8_trim_whitespace(column), ""), RowFailure(
                R.KEY, f"{self.key}:empty", "RecordKeyError",
                f"record key column {self.key!r} is empty", [self.key],
                safe_text=f"record key column {self.key!r} is empty"))

    def _partition_stage(self, table: pa.Table, failed: dict[int, RowFailure]) -> None:
        for name in self.partition_by:
            column = table.column(name)
            _mark(failed, pc.is_null(column), RowFailure(
                R.PARTITION, f"{name}:null", "PartitionValueError",
                f"partition column {name!r} is null", [name],
                safe_text=f"partition column {name!r} is null"))
            if not C.is_textual(column.type):
                continue
            bad = pc.or_kleene(
                pc.match_substring_regex(column, r"[/\\" + control_class("re2") + "]"),
                pc.is_in(column, value_set=pa.array(["", ".", ".."], column.type)))
            text = (f"partition column {name!r} holds a value that is not a valid folder "
                    "name (empty, '.', '..', or with a slash or control character)")
            _mark(failed, bad, RowFailure(R.PARTITION, f"{name}:invalid", "PartitionValueError",
                                          text, [name], safe_text=text))


def _one_kind(field: pa.Field, values: Any) -> None:
    """Python values convert by their target type alone (see convert_columns)."""
    return None


def _mark(failed: dict[int, RowFailure], mask: pa.Array | pa.ChunkedArray,
          failure: RowFailure) -> None:
    """`failure` (one object, shared) for the rows of `mask` not failed yet."""
    for row in _true_rows(mask):
        failed.setdefault(row, failure)


def _true_rows(mask: pa.Array | pa.ChunkedArray) -> list[int]:
    indices = pc.indices_nonzero(pc.fill_null(mask, False))
    return [int(i) for i in indices.to_pylist()]


