"""Text to DATE and TIMESTAMP by a user's Spark datetime pattern (the ingest's
``dateFormat``, ``timestampFormat``, ``timestampNTZFormat``), vectorized: one regular
expression (RE2) decides which values match and takes their fields apart, Arrow puts the
fields together and checks the calendar (February 30th is no date). A value that does not
match, or is no date, fails the conversion with one message naming it, as an Arrow cast
does, so the Validator's halving finds exactly the failing values. The ingest's fast pass
and the Validator convert through here alike (:func:`markerstore.values.cast.cast`).

A TIMESTAMP value without an offset is read as UTC (the ingest's session time zone).
Names of months, days and AM/PM are the pattern's locale's (:mod:`markerstore.values.locales`):
each matched text is folded (:func:`markerstore.values.locales.folded`) and looked up among the
folded names, so both passes read ``janv.``, ``JANV`` and ``janv`` as January in fr-FR; a
day name must be the date's own day (Java's resolver refuses another, so does this)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from markerstore.values import locales
from markerstore.values.patterns import DatetimePattern, names_of


def _field(parts: pa.StructArray, name: str, pattern: DatetimePattern) -> pa.Array | None:
    return parts.field(name) if name in pattern.groups else None


def _number(text: pa.Array | None, default: int) -> pa.Array:
    """A field's digits as an int64 (`default` where absent or empty: an optional
    section)."""
    if text is None:
        return pa.scalar(default, pa.int64())
    empty = pc.equal(text, "")
    return pc.if_else(empty, default, pc.cast(pc.if_else(empty, "0", text), pa.int64()))


def _pad(values: pa.Array | pa.Scalar, width: int) -> pa.Array:
    return pc.utf8_lpad(pc.cast(values, pa.string()), width=width, padding="0")


def _fold(text: pa.Array) -> pa.Array:
    """Matched names folded as :func:`markerstore.values.locales.folded` folds a name."""
    text = pc.utf8_lower(text)
    for space in locales.SPACES[1:]:
        text = pc.replace_substring(text, space, " ")
    return pc.replace_substring_regex(text, r"(.)\.$", r"\1")


def _named(parts: pa.StructArray, group: str, pattern: DatetimePattern) -> pa.Array | None:
    """The 0-based index of each value's name of `group` among the pattern's locale's
    names (null where it is none of them: that value fails), or None when the pattern
    has no such field."""
    text = _field(parts, group, pattern)
    if text is None:
        return None
    names = pa.array([locales.folded(n) for n in names_of(group, pattern.names)])
    return pc.cast(pc.index_in(_fold(text), names), pa.int64())


def _month(parts: pa.StructArray, pattern: DatetimePattern) -> pa.Array | pa.Scalar:
    for group in ("month_short", "month_long", "month_standalone", "month_standalone_long"):
        index = _named(parts, group, pattern)
        if index is not None:
            return pc.add(index, 1)
    return _number(_field(parts, "month", pattern), 1)


def _weekday(parts: pa.StructArray, pattern: DatetimePattern, wall: pa.Array
             ) -> pa.Array | None:
    """Where a day name is the date's own day (None: the pattern has no day name)."""
    for group in ("weekday", "weekday_long"):
        index = _named(parts, group, pattern)
        if index is not None:  # Monday is 0 in both
            return pc.equal(pc.day_of_week(wall), index)
    return None


def _hour(parts: pa.StructArray, pattern: DatetimePattern) -> tuple[pa.Array, pa.Array]:
    """The hour of day, and where it is valid (a 12-hour clock reads 1 to 12)."""
    hour12 = _field(parts, "hour12", pattern)
    if hour12 is None:
        hour = _number(_field(parts, "hour", pattern), 0)
        return hour, pc.less(hour, 24)
    h = _number(hour12, 12)
    half = _named(parts, "ampm", pattern)  # 0 AM, 1 PM
    pm = pc.equal(half, 1)
    hour = pc.add(pc.if_else(pc.equal(h, 12), 0, h), pc.if_else(pm, 12, 0))
    return hour, pc.and_(pc.greater_equal(h, 1), pc.less_equal(h, 12))


def _offset_minutes(text: pa.Array) -> pa.Array:
    """An offset (``Z``, ``+01``, ``+0130``, ``+01:30``) in minutes east of UTC."""
    digits = pc.replace_substring(pc.utf8_slice_codeunits(text, 1), ":", "")
    zero = pc.or_(pc.equal(pc.utf8_lower(text), "z"), pc.equal(text, ""))
    digits = pc.if_else(zero, "0000", digits)
    hours = pc.cast(pc.utf8_slice_codeunits(digits, 0, 2), pa.int64())
    minutes_text = pc.utf8_slice_codeunits(digits, 2, 4)
    minutes = pc.cast(pc.if_else(pc.equal(minutes_text, ""), "0", minutes_text), pa.int64())
    total = pc.add(pc.multiply(hours, 60), minutes)
    negative = pc.starts_with(text, "-")
    return pc.if_else(negative, pc.negate(total), total)


def _fraction_us(parts: pa.StructArray, pattern: DatetimePattern, n: int) -> pa.Array:
    """The fraction of a second in microseconds (digits past the sixth truncated)."""
    text = _field(parts, "fraction", pattern)
    if text is None:
        return pa.array([0] * n, pa.int64())
    digits = pc.utf8_slice_codeunits(pc.utf8_rpad(text, width=6, padding="0"), 0, 6)
    return pc.cast(digits, pa.int64())


def parse(source: pa.Array, pattern: DatetimePattern, target: pa.DataType) -> pa.Array:
    """`source` (text) as `target` (date32 or a timestamp) by `pattern`; an ArrowInvalid
    naming the first value that does not match or is no valid date or time."""
    n = len(source)
    matched = pc.match_substring_regex(source, pattern.regex)
    bad = pc.invert(pc.fill_null(matched, True))
    if n and pc.any(bad).as_py():
        _fail(source, bad, pattern)
    safe = pc.if_else(pc.fill_null(matched, False), source, "")
    parts = pc.extract_regex(safe, pattern.regex)
    year = _field(parts, "year", pattern)
    year2 = _field(parts, "year2", pattern)
    years = pc.add(_number(year2, 0), 2000) if year2 is not None else _number(year, 1970)
    hour, hour_ok = _hour(parts, pattern)
    month, day = _month(parts, pattern), _number(_field(parts, "day", pattern), 1)
    minute = _number(_field(parts, "minute", pattern), 0)
    second = _number(_field(parts, "second", pattern), 0)
    text = pc.binary_join_element_wise(
        _pad(years, 4), "-", _pad(month, 2), "-", _pad(day, 2), "T", _pad(hour, 2), ":",
        _pad(minute, 2), ":", _pad(second, 2), "")
    wall = pc.strptime(text, format="%Y-%m-%dT%H:%M:%S", unit="us", error_is_null=True)
    # strptime rolls February 30th over into March and second 60 into the next minute:
    # each field it read must be the one given
    valid = pc.is_valid(wall)
    for got, given in ((pc.day(wall), day), (pc.month(wall), month),
                       (pc.hour(wall), hour), (pc.minute(wall), minute),
                       (pc.second(wall), second)):
        valid = pc.and_(valid, pc.equal(got, given))
    valid = pc.and_(valid, hour_ok)
    weekday = _weekday(parts, pattern, wall)
    if weekday is not None:
        valid = pc.and_(valid, weekday)
    invalid = pc.and_(pc.invert(pc.fill_null(valid, False)), pc.is_valid(source))
    if n and pc.any(pc.fill_null(invalid, False)).as_py():
        _fail(source, pc.fill_null(invalid, False), pattern)
    micros = pc.add(pc.cast(wall, pa.int64()), _fraction_us(parts, pattern, n))
    offset = _field(parts, "offset", pattern)
    if offset is not None and pa.types.is_timestamp(target) and target.tz is not None:
        micros = pc.subtract(micros, pc.multiply(_offset_minutes(offset), 60_000_000))
    micros = pc.if_else(pc.is_valid(source), micros, pa.scalar(None, pa.int64()))
    stamps = pc.cast(micros, pa.timestamp("us"))
    if pa.types.is_date32(target):
        return pc.cast(pc.floor_temporal(stamps, unit="day"), pa.date32())
    naive = pc.cast(stamps, pa.timestamp(target.unit)) if target.unit != "us" else stamps
    return naive if target.tz is None else pc.cast(naive, target)


def _fail(source: pa.Array, bad: pa.Array, pattern: DatetimePattern) -> None:
    value = source.filter(bad)[0].as_py()
    raise pa.ArrowInvalid(f"{value!r:.200} is no date or time of the pattern "
                          f"{pattern.pattern!r}")


# ISO 8601 date and time with more than six digits of a second: the digits past the sixth
_PAST_MICROS = r"^(\s*[+-]?\d{4,}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}[.,]\d{6})\d+"
_SHORTEST = len("2021-01-01T00:00:00.1234567")  # the shortest text it changes


def iso_micros(source: pa.Array) -> pa.Array:
    """ISO 8601 timestamps (text) with the digits of a second past the sixth cut, as Spark
    reads them without a pattern (``.123456789`` is ``.123456``; with a pattern,
    :func:`parse` cuts them alike): a timestamp holds microseconds."""
    if not len(source) or (pc.max(pc.binary_length(source)).as_py() or 0) < _SHORTEST:
        return source  # no text long enough (the common case: one pass over the offsets)
    if not pc.any(pc.match_substring_regex(source, _PAST_MICROS)).as_py():
        return source
    return pc.replace_substring_regex(source, _PAST_MICROS, r"\1")
