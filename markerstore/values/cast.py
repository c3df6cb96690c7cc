"""Converting values to a target Arrow type while finding exactly the values that do not
convert: the one cast of text (or any Arrow column) as Spark's readers read it
(:func:`cast`), and the one search for the rows that fail it (:func:`cast_rows`), which
errortable's Validator and the ingest's vectorized pass both use. A column is cast at
once; where that fails, DuckDB's TRY_CAST hints at the failing rows, and the rest is cast
in slices, a slice that fails halved until the failing values are single, each with
Arrow's message. Python values (a JSON record's) convert by :func:`from_python`, found
failing by the same halving (:func:`by_halves`).
"""

from __future__ import annotations

import base64
import decimal
from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from markerstore import duck
from markerstore.values import datetimes, numbers
from markerstore.values.formats import ValueFormats
from markerstore.values.json import Base64Text, JsonFloat

CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                OverflowError, TypeError, ValueError)

Failure = tuple[str, str]  # (error class, message)


MESSAGE_MAX_CHARS = 10_000  # more than a message keeps (records.HEADLINE_MAX_CHARS)


def failure(exc: BaseException) -> Failure:
    """(class, message) of a failed conversion; a message holding a huge value (Arrow's
    quote the value) is cut first, so the value is not copied again and again."""
    text = str(exc)
    if len(text) > MESSAGE_MAX_CHARS:
        text = f"{text[:MESSAGE_MAX_CHARS]} ... [{len(text) - MESSAGE_MAX_CHARS} chars dropped]"
    return type(exc).__name__, " ".join(text.split())


def by_halves(n: int, target: pa.DataType, convert: Callable[[int, int], pa.Array]
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
        except CAST_ERRORS as exc:
            if length == 1:
                failures[offset] = failure(exc)
                pieces.append((offset, pa.nulls(1, target)))
                continue
            half = length // 2
            stack.append((offset + half, length - half))
            stack.append((offset, half))
    if len(pieces) == 1:
        return pieces[0][1], failures
    pieces.sort(key=lambda p: p[0])
    return pa.concat_arrays([p[1] for p in pieces]), failures


def is_textual(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


DUCK_TYPES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.uint8(): "UTINYINT", pa.uint16(): "USMALLINT", pa.uint32(): "UINTEGER",
    pa.uint64(): "UBIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN", pa.date32(): "DATE",
}


LONGEST_CAST_TEXT = 4096  # characters: no number, date, time or boolean is longer


def too_long(source: pa.Array, target: pa.DataType) -> list[int]:
    """The text values of `source` too long to be a value of `target` (a number, date,
    time, boolean or decimal): they fail their cast without Arrow or DuckDB parsing them,
    whose messages and copies would cost several times a huge value's size."""
    if not is_textual(source.type) or is_textual(target) or pa.types.is_binary(target) \
            or pa.types.is_large_binary(target) or not len(source):
        return []
    if _longest(source) <= LONGEST_CAST_TEXT:  # the common case, from the offsets alone
        return []
    long = pc.greater(pc.binary_length(source), LONGEST_CAST_TEXT)
    return [int(i) for i in pc.indices_nonzero(pc.fill_null(long, False)).to_pylist()]


def _longest(source: pa.Array) -> int:
    """An upper bound of the byte length of `source`'s values (text): the longest span
    between two offsets (a null's span is counted too, though it is usually empty)."""
    kind = np.int64 if pa.types.is_large_string(source.type) else np.int32
    offsets = np.frombuffer(source.buffers()[1], dtype=kind)[
        source.offset:source.offset + len(source) + 1]
    return int(np.diff(offsets).max())


def too_long_failure(target: pa.DataType) -> Failure:
    return "ArrowInvalid", (f"a text longer than {LONGEST_CAST_TEXT} bytes cannot be a "
                            f"{target}")


def duck_type(target: pa.DataType) -> str | None:
    """The DuckDB type whose TRY_CAST hints at the rows an Arrow cast to `target` rejects."""
    if target in DUCK_TYPES:
        return DUCK_TYPES[target]
    if pa.types.is_timestamp(target):
        return "TIMESTAMP" if target.tz is None else "TIMESTAMPTZ"
    if pa.types.is_decimal(target) and target.precision <= 38:
        return f"DECIMAL({target.precision}, {target.scale})"
    return None


def decimal_hint_text(source: pa.Array, locale: str) -> pa.Array:
    """The text DuckDB's TRY_CAST to a DECIMAL fails exactly where :func:`cast` fails with
    `locale`: a number of the locale as plain text, anything else as a text no cast reads."""
    plain = numbers.normalized(source, locale)
    valid = pc.fill_null(numbers.numbers_of(source, locale), True)
    return pc.if_else(valid, plain, pa.scalar("not a number", source.type))


def cast(source: pa.Array, target: pa.DataType, formats: ValueFormats | None = None
         ) -> pa.Array:
    """Arrow's safe cast of text to integers as of text to other numbers: a sign ``+``
    is read (``+5`` is 5, as ``+1.5`` is 1.5), and hexadecimal is not (``0x10`` is no
    decimal integer; Arrow reads it as 16): such a value fails with Arrow's own message
    for text that is not an integer. Text to a date or timestamp for which `formats`
    has a pattern is read by it (:mod:`markerstore.values.datetimes`)."""
    pattern = formats.pattern_for(target) if formats is not None else None
    if pattern is not None and is_textual(source.type):
        return datetimes.parse(source, pattern, target)
    if formats is not None and is_textual(source.type):
        if pa.types.is_decimal(target):  # as the locale writes numbers
            return numbers.parse(source, target, formats.locale)
        if pa.types.is_timestamp(target):
            try:  # the common case: Arrow's ISO 8601 reads every value
                return pc.cast(source, target, safe=True)
            except CAST_ERRORS:  # past microseconds: cut, as Spark; the cast below decides
                source = datetimes.iso_micros(source)
    if is_textual(source.type) and pa.types.is_integer(target):
        if pc.any(pc.starts_with(source, "+")).as_py():  # a literal scan, then the regex
            source = pc.replace_substring_regex(source, r"^\+([0-9]+)$", r"\1")
        hexadecimal = pc.or_(pc.starts_with(source, "0x"), pc.starts_with(source, "0X"))
        if pc.any(hexadecimal).as_py():
            value = source.filter(hexadecimal)[0].as_py()
            raise pa.ArrowInvalid(f"Failed to parse string: '{value}' as a scalar of type "
                                  f"{target}")
    result = pc.cast(source, target, safe=True)
    if pa.types.is_floating(target) and not pa.types.is_integer(source.type):
        _refuse_overflow(source, result, target)
    return result


_INFINITY_TEXT = r"^\s*[+-]?(?i:inf|infinity)\s*$"


def _refuse_overflow(source: pa.Array, result: pa.Array, target: pa.DataType) -> None:
    """A finite number that the floating point type cannot hold is a cast error, as an
    integer out of range is (Arrow makes it an infinity): ``1e39`` as a FLOAT, ``1e400``
    as a DOUBLE. An infinity the source says (``inf``, ``-Infinity``) stays one."""
    infinite = pc.is_inf(result)
    if not pc.any(infinite).as_py():
        return
    said = pc.match_substring_regex(source, _INFINITY_TEXT) if is_textual(source.type) \
        else pc.is_inf(pc.cast(source, pa.float64()))
    overflow = pc.and_(infinite, pc.invert(pc.fill_null(said, False)))
    if pc.any(overflow).as_py():
        value = source.filter(overflow)[0].as_py()
        raise pa.ArrowInvalid(f"Float value {value!r:.40} is out of range for {target}")


def prepare(source: pa.Array, target: pa.DataType, formats: ValueFormats | None
            ) -> pa.Array:
    """`source` as `formats` says to read it before its cast: a floating point column's NaN
    and infinity tokens (Spark's ``nanValue``, ``positiveInf``, ``negativeInf``) as Arrow
    reads them (a DECIMAL's text is read by its locale in :func:`cast`). Without
    `formats`, `source` itself."""
    if formats is None or not is_textual(source.type):
        return source
    tokens = formats.float_tokens() if pa.types.is_floating(target) else None
    return numbers.fold_float_tokens(source, tokens) if tokens else source


def arrow_converter(source: pa.Array, target: pa.DataType,
                    formats: ValueFormats | None = None) -> Callable[[int, int], pa.Array]:
    def convert(offset: int, length: int) -> pa.Array:
        part = source.slice(offset, length)
        return part if part.type == target else cast(part, target, formats)

    return convert


def plain_types(target: pa.DataType) -> tuple[type, ...] | None:
    """The Python types pa.array converts to `target` as they are (a value of another
    type is converted on its own; None: no screening for this type)."""
    if pa.types.is_boolean(target):
        return (bool,)
    if pa.types.is_integer(target):
        return (int,)
    if pa.types.is_floating(target):
        return (float, int)
    if is_textual(target):
        return (str,)
    return None


def python_converter(values: list[Any], target: pa.DataType,
                     formats: ValueFormats | None = None) -> Callable[[int, int], pa.Array]:
    def convert(offset: int, length: int) -> pa.Array:
        return from_python(values[offset:offset + length], target, formats)

    return convert


def from_python(values: list[Any], target: pa.DataType,
                formats: ValueFormats | None = None) -> pa.Array:
    """`values` as an Array of `target`, as pa.array converts them, but for what pa.array
    takes that a record does not say: a boolean as a number (true as 1.0), a fraction as
    an integer (1.5 as 1), a number as a date or time (20210201 as days from 1970), which
    fail as Arrow fails a value of the wrong type; and an
    integer for a floating point column is its nearest value, as any JSON number is."""
    if not pa.types.is_boolean(target):
        for value in values:
            if type(value) is bool:
                raise pa.ArrowTypeError(f"Expected {target}, got bool: "
                                        f"{str(value).lower()}")
    if pa.types.is_temporal(target):  # a number is no date: pa.array counts days from 1970
        for value in values:
            if type(value) in (int, float, JsonFloat):
                raise pa.ArrowTypeError(f"Expected {target} as text, got a number: {value!r}")
    if pa.types.is_integer(target):
        for value in values:
            if isinstance(value, float) and not value.is_integer():
                raise pa.ArrowInvalid(f"Float value {value!r} was truncated converting to "
                                      f"{target}")
    if _has(target, _numeric):
        # An integer for a double reads as its nearest double, as a decimal fraction does
        # (pa.array refuses one past 2**53; one past the double range is an
        # OverflowError), and a JSON number for a DECIMAL as its text says, in an array
        # or struct too.
        values = [_numbers_as(v, target) for v in values]
    if pa.types.is_binary(target) or pa.types.is_large_binary(target):
        values = [_base64(v) if isinstance(v, Base64Text) else v for v in values]
    texts = formats is not None and formats.reads(target) and any(
        type(v) is str for v in values)
    try:
        if texts:  # read as `formats` says (a pattern, a token), never by pa.array
            raise pa.ArrowInvalid("text")
        if target == pa.float32():  # through float64: an overflow is an error (cast)
            return cast(pa.array(values, type=pa.float64()), target)
        return pa.array(values, type=target)
    except CAST_ERRORS:
        if is_textual(target) or not all(v is None or isinstance(v, str) for v in values):
            raise
        text = prepare(pa.array(values, pa.string()), target, formats)
        return cast(text, target, formats)


def _base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or a character past ASCII
        raise pa.ArrowInvalid(f"'{text}' is not base64 (RFC 4648), which a JSON string "
                              "for a BINARY column is") from None


def _numeric(arrow_type: pa.DataType) -> bool:
    return pa.types.is_floating(arrow_type) or pa.types.is_decimal(arrow_type)


def _has(arrow_type: pa.DataType, kind: Callable[[pa.DataType], bool]) -> bool:
    """Whether `arrow_type`, or a type inside its arrays and structs, is of `kind`."""
    if kind(arrow_type):
        return True
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _has(arrow_type.value_type, kind)
    return pa.types.is_struct(arrow_type) and any(_has(f.type, kind) for f in arrow_type)


def _numbers_as(value: Any, arrow_type: pa.DataType) -> Any:
    """`value` with each integer where `arrow_type` has a floating point type as a float,
    and each JSON number with a fraction where it has a DECIMAL as a Decimal of its
    text; anything else as it is (what does not fit the type fails in pa.array)."""
    if type(value) is int and pa.types.is_floating(arrow_type):
        return float(value)
    if isinstance(value, JsonFloat) and pa.types.is_decimal(arrow_type):
        return decimal.Decimal(value.text)
    if isinstance(value, list) and (pa.types.is_list(arrow_type)
                                    or pa.types.is_large_list(arrow_type)):
        return [_numbers_as(v, arrow_type.value_type) for v in value]
    if isinstance(value, dict) and pa.types.is_struct(arrow_type):
        types = {f.name: f.type for f in arrow_type}
        return {k: _numbers_as(v, types[k]) if k in types else v for k, v in value.items()}
    return value


def cast_rows(source: pa.Array, target: pa.DataType, formats: ValueFormats | None = None,
              *, confirm: bool = True) -> tuple[pa.Array, dict[int, Failure]]:
    """`source` cast to `target` (:func:`prepare`, then :func:`cast`), and the rows that do
    not cast, each with its failure (null in the result). The whole column is cast at once
    (the common case: every row casts); if that fails, a text too long to be a value fails
    without being parsed, DuckDB's TRY_CAST hints at the failing rows of a text column
    (not where `formats` has a Spark pattern for `target`: DuckDB knows none), and the
    rest is cast by halves (:func:`by_halves`).

    `confirm`: each row the hint names is cast alone with Arrow, which decides (its
    failure is Arrow's message, and a row DuckDB is stricter about keeps Arrow's value).
    Without, a row the hint names fails as it is, with :data:`HINTED`: for a caller whose
    failing rows are only suspects that a reference parser decides (the ingest's
    vectorized pass), a false alarm costs a reference parse and no confirmation is paid.
    """
    if source.type == target:
        return source, {}
    source = prepare(source, target, formats)
    n = len(source)
    long = too_long(source, target)
    if long:  # no huge text is parsed (or quoted in a message) to fail its cast
        source = _cleared(source, long)
    else:
        try:
            return cast(source, target, formats), {}
        except CAST_ERRORS:
            pass
    failures = dict.fromkeys(long, too_long_failure(target))
    suspects = _hinted(source, target, formats)
    cleared = _cleared(source, suspects) if suspects else source
    array, found = by_halves(n, target, arrow_converter(cleared, target, formats))
    failures.update(found)
    if not confirm:
        failures.update(dict.fromkeys(suspects, HINTED))
        return array, failures
    recovered: dict[int, Any] = {}
    rows_of: dict[Any, list[int]] = {}  # a value casts alike wherever it is
    for row, value in zip(suspects, source.take(pa.array(suspects, pa.int64())).to_pylist(),
                          strict=True):
        rows_of.setdefault(value, []).append(row)
    for same in rows_of.values():
        try:
            value = cast(source.slice(same[0], 1), target, formats)[0]
            recovered.update((row, value) for row in same)
        except CAST_ERRORS as exc:
            found_one = failure(exc)
            failures.update((row, found_one) for row in same)
    if recovered:  # DuckDB was stricter than Arrow for these: keep Arrow's answer
        rows = sorted(recovered)
        array = pc.replace_with_mask(array, _rows_mask(n, rows),
                                     pa.array([recovered[r] for r in rows], target))
    return array, failures


HINTED: Failure = ("ArrowInvalid", "DuckDB's TRY_CAST rejects the value (not cast with Arrow)")


def _rows_mask(n: int, rows: list[int]) -> pa.Array:
    """A boolean array of `n` rows, true at `rows`."""
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(rows, dtype=np.int64)] = True
    return pa.array(mask)


def _cleared(source: pa.Array, rows: list[int]) -> pa.Array:
    """`source` with `rows` null."""
    return pc.if_else(_rows_mask(len(source), rows), pa.scalar(None, source.type), source)


def _hinted(source: pa.Array, target: pa.DataType, formats: ValueFormats | None
            ) -> list[int]:
    """The rows of a text column DuckDB's TRY_CAST to `target` rejects, ascending (a
    hint: Arrow decides); none where DuckDB has no such type, cannot run the query, or
    `formats` reads `target` by a Spark pattern."""
    sql_type = duck_type(target)
    if formats is not None and formats.pattern_for(target) is not None:
        sql_type = None
    if sql_type is None or not is_textual(source.type) or len(source) == 0:
        return []
    if pa.types.is_decimal(target) and formats is not None:
        source = decimal_hint_text(source, formats.locale)
    con = duck.local()  # this thread's, single-threaded: Spark runs a task per core
    con.register("__cast_hint", pa.table({"i": np.arange(len(source), dtype=np.int64),
                                          "v": source}))
    try:
        found = con.sql(f"SELECT i FROM __cast_hint WHERE v IS NOT NULL AND "
                        f"TRY_CAST(v AS {sql_type}) IS NULL ORDER BY i").to_arrow_table()
    except duckdb.Error:
        return []
    finally:
        con.unregister("__cast_hint")
    return found.column("i").to_numpy().tolist()
