"""Spark's datetime patterns (``dateFormat``, ``timestampFormat``, ``timestampNTZFormat``)
compiled to one anchored regular expression with a named group per field.

The supported subset, read as Spark 4 reads it (its "Datetime Patterns for Formatting and
Parsing"; parsing is case-insensitive):

| letters | field | text |
|---|---|---|
| ``yyyy`` / ``yy`` / ``y`` | year | exactly 4 digits / 2 digits, 2000-2099 / 1 to 4 digits |
| ``MM`` / ``M`` / ``MMM`` / ``MMMM`` | month | 2 digits / 1 or 2 / ``Jan`` / ``January`` |
| ``LLL`` / ``LLLL`` | month, stand-alone | ``Jan`` / ``January`` (another word in some locales) |
| ``E`` to ``EEE`` / ``EEEE`` | day of week | ``Mon`` / ``Monday``: the date's own (beyond Spark) |
| ``dd`` / ``d`` | day of month | 2 digits / 1 or 2 |
| ``HH`` / ``H``, ``hh`` / ``h`` with ``a`` | hour 0-23, hour 1-12 with AM/PM | 2 digits / 1 or 2 |
| ``mm`` / ``m``, ``ss`` / ``s`` | minute, second | 2 digits / 1 or 2 |
| ``S`` ... ``SSSSSSSSS`` | fraction of a second | 1 to as many digits as letters |
| ``XXX`` / ``XX`` / ``X`` | offset | ``+01:00`` / ``+0100`` / ``+01`` or ``+0100``; or ``Z`` |
| ``xxx`` / ``xx`` / ``x`` | offset | as ``X`` without ``Z`` |
| ``Z`` / ``ZZ`` / ``ZZZ`` | offset | ``+0100`` |
| ``'text'``, ``''`` | literal text, a quote | as written |
| ``[ ... ]`` | an optional section (not nested) | |
| any other character but a letter | itself | |

Anything else (zone names ``z``/``V``/``O``, ``D``, ``k``/``K``, ``G``, ...) is refused
with one line naming the letter, when the option is parsed.

Names (``MMM``, ``MMMM``, ``LLL``, ``LLLL``, ``E``, ``a``) are the `locale`'s (Spark's
option; :mod:`markerstore.values.locales`, CLDR's data), matched without case, with or without a
period at their end and with any of CLDR's spaces for another. Spark refuses ``E`` in a
pattern for parsing; here a day name reads when it is the date's day.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from markerstore.values import locales

# letter -> {count: (group name, regex)}
_NUMBERS = {
    "y": {1: ("year", r"\d{1,4}"), 2: ("year2", r"\d{2}"), 3: ("year", r"\d{3,4}"),
          4: ("year", r"\d{4}")},
    "M": {1: ("month", r"\d{1,2}"), 2: ("month", r"\d{2}")},
    "L": {1: ("month", r"\d{1,2}"), 2: ("month", r"\d{2}")},
    "d": {1: ("day", r"\d{1,2}"), 2: ("day", r"\d{2}")},
    "H": {1: ("hour", r"\d{1,2}"), 2: ("hour", r"\d{2}")},
    "h": {1: ("hour12", r"\d{1,2}"), 2: ("hour12", r"\d{2}")},
    "m": {1: ("minute", r"\d{1,2}"), 2: ("minute", r"\d{2}")},
    "s": {1: ("second", r"\d{1,2}"), 2: ("second", r"\d{2}")},
}
# letter -> {count: group name} of the fields read as a locale's names (DateNames)
_NAMES = {
    "M": {3: "month_short", 4: "month_long"},
    "L": {3: "month_standalone", 4: "month_standalone_long"},
    "E": {1: "weekday", 2: "weekday", 3: "weekday", 4: "weekday_long"},
    "a": {1: "ampm"},
}


def names_of(group: str, names: locales.DateNames) -> tuple[str, ...]:
    """The names a group of :data:`_NAMES` reads, in order (months from January, days
    from Monday, AM then PM)."""
    return {"month_short": names.months, "month_long": names.months_wide,
            "month_standalone": names.standalone,
            "month_standalone_long": names.standalone_wide, "weekday": names.days,
            "weekday_long": names.days_wide, "ampm": (names.am, names.pm)}[group]


def _name_regex(name: str) -> str:
    """One name as a regular expression (RE2 and Python alike): its characters, any of
    CLDR's spaces for a space, a period at its end optional, there or not."""
    base = name[:-1] if name.endswith(".") and len(name) > 1 else name
    out = []
    for char in base:
        out.append(f"[{locales.SPACES}]" if char in locales.SPACES else re.escape(char))
    return "".join(out) + r"\.?"


def names_regex(names: tuple[str, ...]) -> str:
    """An alternation of `names`, the longest first (``10月`` before ``1月``)."""
    return "|".join(_name_regex(n) for n in sorted(set(names), key=len, reverse=True))
_HH_MM = r"[+-]\d{2}:\d{2}"
_HHMM = r"[+-]\d{4}"
_OFFSETS = {
    "X": {1: r"z|[+-]\d{2}(?:\d{2})?", 2: f"z|{_HHMM}", 3: f"z|{_HH_MM}"},
    "x": {1: r"[+-]\d{2}(?:\d{2})?", 2: _HHMM, 3: _HH_MM},
    "Z": {1: _HHMM, 2: _HHMM, 3: _HHMM},
}
_KINDS = {"dateFormat": "date", "timestampFormat": "timestamp",
          "timestampNTZFormat": "timestamp_ntz"}


@dataclass(frozen=True)
class DatetimePattern:
    """A compiled pattern: `regex` (anchored, case-insensitive, RE2 and Python alike) and
    the names of its groups (year, year2, month, month_short, month_long, day, hour,
    hour12, ampm, minute, second, fraction, offset)."""

    pattern: str
    regex: str
    groups: tuple[str, ...]
    fraction_digits: int = 0
    locale: str = locales.DEFAULT  # whose names MMM, MMMM, LLL, LLLL, E and a read

    @property
    def names(self) -> locales.DateNames:
        return locales.date_names(self.locale)

    @property
    def has_offset(self) -> bool:
        return "offset" in self.groups


class _Reader:
    def __init__(self, pattern: str, option: str, locale: str) -> None:
        self.pattern, self.option, self.locale = pattern, option, locale
        self.groups: list[str] = []
        self.fraction = 0

    def refuse(self, what: str) -> ValueError:
        return ValueError(f"{self.pattern!r}: {what}; supported: y M L d E H h m "
                          "s S a X x Z, 'text' and [optional] (see docs/INGEST.md)")

    def group(self, name: str, regex: str) -> str:
        if any(_kind(g) == _kind(name) for g in self.groups):
            raise self.refuse(f"the field of {name!r} is given twice")
        self.groups.append(name)
        return f"(?P<{name}>{regex})"

    def letters(self, letter: str, count: int) -> str:
        named = _NAMES.get(letter, {}).get(count)
        if named is not None:
            return self.group(named, names_regex(names_of(
                named, locales.date_names(self.locale))))
        if letter == "S":
            if count > 9:
                raise self.refuse("at most 9 S (nanoseconds)")
            self.fraction = count
            return self.group("fraction", f"\\d{{1,{count}}}")
        if letter in _OFFSETS:
            forms = _OFFSETS[letter]
            if count not in forms:
                raise self.refuse(f"{letter * count} (an offset with seconds or a localized "
                                  "one) is not supported")
            return self.group("offset", forms[count])
        counts = _NUMBERS.get(letter)
        if counts is None and letter in _NAMES:
            raise self.refuse(f"{letter * count} is not supported")
        if counts is None:
            raise self.refuse(f"the letter {letter!r} is not supported")
        if count not in counts:
            raise self.refuse(f"{letter * count} is not supported")
        return self.group(*counts[count])


def _kind(group: str) -> str:
    """The field a group gives (a year of 2 or 4 digits, a month as a number or a name)."""
    return next((k for k in ("year", "month", "weekday") if group.startswith(k)), group)


def _literal(text: str) -> str:
    return re.escape(text).replace("\\ ", " ")


def _tokens(reader: _Reader) -> str:
    """The regex of the pattern's letters, literals and optional sections."""
    pattern, out, i, depth = reader.pattern, [], 0, 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise reader.refuse("a quote is never closed")
            out.append(_literal(pattern[i + 1:end] or "'"))
            i = end + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            out.append(reader.letters(ch, j - i))
            i = j
        elif ch in "[]":
            depth += 1 if ch == "[" else -1
            if depth not in (0, 1):
                raise reader.refuse("optional sections [ ] must pair and not nest")
            out.append("(?:" if ch == "[" else ")?")
            i += 1
        elif ch in "#{}":
            raise reader.refuse(f"{ch!r} is reserved")
        else:
            out.append(_literal(ch))
            i += 1
    if depth:
        raise reader.refuse("an optional section [ is never closed")
    return "".join(out)


@lru_cache(maxsize=64)
def compile_pattern(pattern: str, option: str = "timestampFormat",
                    locale: str = locales.DEFAULT) -> DatetimePattern:
    """`pattern` compiled, its names those of `locale` (a tag :func:`locales.canonical`
    gives); a ValueError in one line naming `option` for what is outside the supported
    subset (or makes no sense: ``h`` without ``a``, an offset in a pattern for
    TIMESTAMP_NTZ, a day of week without a day of month)."""
    reader = _Reader(pattern, option, locale)
    if not pattern:
        raise reader.refuse("empty")
    body = _tokens(reader)
    groups = reader.groups
    if not groups:
        raise reader.refuse("no field")
    if ("hour12" in groups) != ("ampm" in groups):
        raise reader.refuse("h (1-12) needs a (AM/PM) and a needs h")
    if "hour" in groups and "hour12" in groups:
        raise reader.refuse("H and h together")
    if _KINDS.get(option) == "timestamp_ntz" and "offset" in groups:
        raise reader.refuse("a TIMESTAMP_NTZ value has no offset")
    if any(g.startswith("weekday") for g in groups) and "day" not in groups:
        raise reader.refuse("E (a day of week) needs d (the day of month it checks)")
    return DatetimePattern(pattern, f"(?i)^{body}$", tuple(groups), reader.fraction, locale)


def pattern_option(option: str) -> Callable[[object], str | None]:
    """The parser of option `option`: empty (not set) or a pattern of the subset."""
    def parse(value: object) -> str | None:
        if value is None or not str(value):
            return None
        compile_pattern(str(value), option)
        return str(value)

    return parse
