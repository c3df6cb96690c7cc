"""A block of JSON lines read as :func:`errortable.capture.parsing.parse_json_block` reads them,
with the lines that fail decided and recorded as columns.

Each line is stripped as Python's ``str.strip`` strips it (a blank one is no record), and
lines of the same text are decided once. A text whose first character starts no JSON
value (nor is a byte order mark, and which holds at most 512 brackets) fails as Python's
decoder fails it, ``Expecting value: line 1 column 1 (char 0)``, without being decoded:
its scanner stops at the first character. Every other distinct text is read by
:func:`markerstore.values.json.load_object`, as before. The error records of the failures are
then built as columns (:func:`errortable.capture.errorrows.parse_error_table`), so a block of
lines that are no JSON (a file of another format) costs no Python per line: a few
microseconds a line were spent decoding, raising and describing each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from errortable.capture import records as R
from errortable.capture.errorrows import ParseFailures, parse_error_table
from errortable.capture.parsing import (
    BlockParse,
    Failure,
    ParseOptions,
    failure_record,
    failures_table,
)
from errortable.capture.protectrows import protected_parse_table
from errortable.config import ErrorTableConfig
from markerstore.values.json import MAX_DEPTH, load_object

# What str.strip removes (a blank line is no record), and a JSON value's first character
# as Python's scanner reads one (null, true, false, NaN, Infinity, -Infinity, numbers).
PY_SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
VALUE_STARTS = '"{[-0123456789ntfNI'
EXPECTING = ("parse", "JSONDecodeError", "Expecting value: line 1 column 1 (char 0)")


def _no_value(texts: pa.Array) -> np.ndarray:
    """Which texts (stripped, not empty) Python's decoder refuses at their first
    character, as load_object would reach it: no byte order mark first, and not so many
    brackets that the nesting is measured first."""
    first = pc.utf8_slice_codeunits(texts, 0, 1)
    starts = pa.array([*VALUE_STARTS, "\ufeff"], texts.type)
    quick = pc.and_(pc.invert(pc.is_in(first, value_set=starts)), _few_brackets(texts))
    return pc.fill_null(quick, False).to_numpy(zero_copy_only=False)


def _few_brackets(texts: pa.Array) -> pa.Array:
    """Not so many brackets that load_object measures the nesting first."""
    return pc.less_equal(pc.add(pc.count_substring(texts, "["),
                                pc.count_substring(texts, "{")), MAX_DEPTH)


# A JSON number as Python's scanner reads one (a fraction or an exponent only when digits
# follow), the JSON white space after it, and the character after that (none: the end).
_NUMBER = (r"^(?P<num>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?P<exp>[eE][-+]?(?P<digits>[0-9]+))?)"
           r"(?P<ws>[ \t\r]*)(?P<rest>.?)")
NUMBER_CHARS = 200  # no such number (exponent of 2 digits at most) overflows a double


def _numbers(texts: pa.Array) -> tuple[np.ndarray, list[tuple[str, str, str]]]:
    """The texts that start with a JSON number, read as Python's decoder reads them: the
    number then more than white space is "Extra data" where that starts; the number alone
    is no object. Short numbers only (no int or float conversion can fail), no line break
    (the position is on line 1). Their failures (-1: not decided here)."""
    found = pc.extract_regex(texts, _NUMBER)
    valid = np.asarray(pc.and_(pc.is_valid(found), pc.and_(
        pc.invert(pc.match_substring(texts, "\n")), _few_brackets(texts)))
        .to_numpy(zero_copy_only=False), bool)
    number, exponent, digits, space, rest = (pc.fill_null(found.field(f), "")
                                             for f in ("num", "exp", "digits", "ws", "rest"))
    short = pc.and_(pc.less_equal(pc.utf8_length(number), NUMBER_CHARS),
                    pc.less_equal(pc.utf8_length(digits), 2))
    valid &= np.asarray(pc.fill_null(short, False).to_numpy(zero_copy_only=False), bool)
    at = pc.add(pc.utf8_length(number), pc.utf8_length(space)).to_numpy(
        zero_copy_only=False)
    ends = pc.equal(rest, "").to_numpy(zero_copy_only=False)
    fraction = pc.or_(pc.match_substring(number, "."), pc.not_equal(exponent, ""))
    floats = fraction.to_numpy(zero_copy_only=False)
    failures: list[tuple[str, str, str]] = []
    for ok, pos, end, is_float in zip(valid.tolist(), at.tolist(), ends.tolist(),
                                      floats.tolist(), strict=True):
        if not ok:
            failures.append(("", "", ""))
        elif end:
            failures.append((R.PARSE, "InvalidJson", "expected a JSON object, got "
                             + ("JsonFloat" if is_float else "int")))
        else:
            failures.append((R.PARSE, "JSONDecodeError",
                             f"Extra data: line 1 column {pos + 1} (char {pos})"))
    return valid, failures


def _decide(distinct: pa.Array, options: ParseOptions
            ) -> tuple[list[Any], list[int], list[BaseException | None],
                       dict[tuple[str, str, str], str | None]]:
    """Each distinct text's object, or the number of its failure (-1 for an object), its
    exception (None where the first character decided), and the distinct failures with
    their texts under a PII policy."""
    quick = _no_value(distinct)
    values: list[Any] = [None] * len(distinct)
    kind = [0 if q else -1 for q in quick.tolist()]
    raised: list[BaseException | None] = [None] * len(distinct)
    kinds: dict[tuple[str, str, str], str | None] = {EXPECTING: EXPECTING[2]}
    numbers, failures = _numbers(distinct)
    numbers &= ~quick
    for j in np.flatnonzero(numbers).tolist():  # a few distinct failures: their kinds
        key = failures[j]
        if key not in kinds:
            kinds[key] = key[2]  # a JSONDecodeError's (or a ShapeError's) own text
        kind[j] = list(kinds).index(key)
    quick |= numbers
    slow = np.flatnonzero(~quick)
    for j, text in zip(slow.tolist(), distinct.take(pa.array(slow)).to_pylist(),
                       strict=True):
        try:
            values[j] = load_object(text, options.allow_non_numeric_numbers,
                                    options.text_columns, options.binary_columns)
        except (ValueError, RecursionError) as exc:  # UnicodeEncodeError too
            exc.__traceback__ = exc.__context__ = None
            raised[j] = exc
            key = (R.PARSE, type(exc).__name__, " ".join(str(exc).split()))
            if key not in kinds:
                kinds[key] = R.safe_exception_text(exc)
            kind[j] = list(kinds).index(key)
    return values, kind, raised, kinds


def parse_json_array(lines: pa.Array,
                     context: R.CaptureContext | Mapping[str, Any] | None = None, *,
                     config: ErrorTableConfig | None = None,
                     line_numbers: Sequence[int] | np.ndarray | None = None,
                     offsets: Sequence[int] | np.ndarray | None = None,
                     options: ParseOptions | None = None) -> BlockParse:
    """:func:`errortable.capture.parsing.parse_json_block` of an Arrow array of lines (text):
    the same records, line numbers and error records."""
    n = len(lines)
    numbers = np.arange(1, n + 1, dtype=np.int64) if line_numbers is None else \
        np.asarray(line_numbers, dtype=np.int64)
    places = None if offsets is None else np.asarray(offsets, dtype=np.int64)
    stripped = pc.utf8_trim(lines, characters=PY_SPACES)
    present = np.flatnonzero(pc.fill_null(pc.not_equal(stripped, ""), False)
                             .to_numpy(zero_copy_only=False))
    texts = stripped.take(pa.array(present, pa.int64()))
    encoded = texts.dictionary_encode()
    values, kind, raised, kinds = _decide(encoded.dictionary, options or ParseOptions())
    which = encoded.indices.to_numpy(zero_copy_only=False)
    row_kind = np.asarray(kind, dtype=np.int32)[which] if len(which) else \
        np.zeros(0, np.int32)
    good = np.flatnonzero(row_kind < 0)
    result = BlockParse([values[j] for j in which[good].tolist()],
                        numbers[present[good]].tolist(), pa.table({}))
    bad = np.flatnonzero(row_kind >= 0)
    at = present[bad]
    found = ParseFailures(
        pa.array(numbers[at]), pa.nulls(len(at), pa.int64()) if places is None else
        pa.array(places[at]), texts.take(pa.array(bad, pa.int64())).cast(pa.string()),
        pa.nulls(len(at), pa.string()), pa.array(row_kind[bad]),
        [r for r, _, _ in kinds], [c for _, c, _ in kinds], [m for _, _, m in kinds],
        safe=list(kinds.values()))
    builder = R.RecordBuilder(config)
    base = R.CaptureContext.of(context).base()

    def one_by_one(rows: list[int]) -> list[Failure]:
        texts = found.texts.take(pa.array(rows, pa.int64())).to_pylist()
        return [Failure(int(numbers[at[r]]), text, raised[int(which[bad[r]])] or
                        _exception(text, options or ParseOptions()), None,
                        None if places is None else int(places[at[r]]))
                for r, text in zip(rows, texts, strict=True)]

    table = parse_error_table(builder, base, found)
    if table is None:  # a PII policy: as columns, but the rows its sweep changes
        table = protected_parse_table(builder, base, found, lambda rows: [
            failure_record(builder, base, f) for f in one_by_one(rows)])
    if table is None:  # a base key these records set: one by one
        table = failures_table(one_by_one(list(range(len(at)))), config, base)
    result.errors = table
    return result


def _exception(text: str, options: ParseOptions) -> BaseException:
    """The exception of a text decided on the column, for a record built one by one:
    load_object's own, decoding it after all."""
    try:
        load_object(text, options.allow_non_numeric_numbers, options.text_columns,
                    options.binary_columns)
    except (ValueError, RecursionError) as exc:
        return exc
    raise AssertionError(f"{text!r} was decided as a failure, and decodes")
