"""Spark's `locale` option (a BCP 47 language tag): how a locale writes numbers and the
names of months, days and the two halves of the day, from CLDR's data through Babel,
the data the JVM's own locale provider (CLDR, the default since Java 9) reads.

Spark reads a DECIMAL with its locale's symbols (``java.text.DecimalFormat``: the decimal
separator, the grouping separator, the minus sign, the exponent) and a date or timestamp
pattern's text fields (``MMM``, ``MMMM``, ``LLL``, ``LLLL``, ``a``) with its names; en-US,
its default, is kept here without Babel (the names are CLDR's English ones, which a test
compares with Babel's). Any locale CLDR knows is taken (``fr-FR``, ``de``, ``pt_BR``,
``zh-Hant-TW``); a tag CLDR does not know is refused in one line when the option is
parsed, where Java would fall back to its root locale's symbols without a word.

CLDR's data changes between versions, and the JVM under Spark carries its own (Java 17:
CLDR 39): a name is matched without case (as Spark's parser does), with or without a
period at its end (``jan`` and ``jan.``), and any of the spaces CLDR has used inside a
name (U+0020, U+00A0, U+202F) for another (``a.\u00a0m.``, ``a.\u202fm.``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

DEFAULT = "en-US"
SPACES = " \u00a0\u202f"  # the spaces CLDR writes inside names, one read for another
_BIDI = "\u200e\u200f\u061c"  # marks some locales put before a sign (he, ar)


@dataclass(frozen=True)
class NumberSymbols:
    """How a locale writes a decimal number: its `decimal` separator, its `group`
    separator between groups of digits (`primary` digits in the last group, `secondary`
    in the others: 3 and 3, or 3 and 2 in hi-IN), the `minus` signs it reads, whether a
    `plus` sign is read (en-US only: Spark reads it with java.math.BigDecimal), and the
    `exponent` symbols."""

    tag: str
    decimal: str
    group: str
    minus: tuple[str, ...]
    plus: bool
    exponent: tuple[str, ...]
    primary: int = 3
    secondary: int = 3


@dataclass(frozen=True)
class DateNames:
    """A locale's names (CLDR's abbreviated and wide forms, format and stand-alone
    contexts): months January first, days Monday first, and AM, PM."""

    tag: str
    months: tuple[str, ...]  # MMM
    months_wide: tuple[str, ...]  # MMMM
    standalone: tuple[str, ...]  # LLL
    standalone_wide: tuple[str, ...]  # LLLL
    days: tuple[str, ...]  # E, EE, EEE
    days_wide: tuple[str, ...]  # EEEE
    am: str
    pm: str


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
ENGLISH = DateNames(DEFAULT, tuple(m[:3] for m in _MONTHS), _MONTHS,
                    tuple(m[:3] for m in _MONTHS), _MONTHS, tuple(d[:3] for d in _DAYS),
                    _DAYS, "AM", "PM")
US_NUMBERS = NumberSymbols(DEFAULT, ".", ",", ("-",), True, ("E", "e"))


def _babel(tag: str) -> Any:
    """Babel's locale of `tag`, or a ValueError naming the tag."""
    import babel

    try:
        return babel.Locale.parse(tag.replace("-", "_"))
    except (ValueError, TypeError, babel.UnknownLocaleError):
        raise ValueError(f"expected a language tag CLDR knows (en-US, fr-FR, de-DE, pt-BR, "
                         f"ja-JP, ...), got {tag!r}") from None


@lru_cache(maxsize=64)
def canonical(tag: str) -> str:
    """`tag` as a BCP 47 language tag (``pt_br`` is ``pt-BR``); a ValueError when CLDR
    does not know it."""
    given = tag.strip()
    if given.replace("_", "-").lower() == DEFAULT.lower():
        return DEFAULT
    return str(_babel(given)).replace("_", "-")


def is_default(tag: str) -> bool:
    return tag == DEFAULT


@lru_cache(maxsize=64)
def number_symbols(tag: str) -> NumberSymbols:
    """How `tag` writes numbers (en-US: as Spark reads them, java.math.BigDecimal with its
    grouping commas)."""
    if is_default(tag):
        return US_NUMBERS
    import babel.numbers as numbers

    locale = _babel(tag)
    minus = numbers.get_minus_sign_symbol(locale, numbering_system="latn")
    pattern = locale.decimal_formats.get(None)
    primary, secondary = pattern.grouping if pattern is not None else (3, 3)
    return NumberSymbols(
        tag, numbers.get_decimal_symbol(locale, numbering_system="latn"),
        numbers.get_group_symbol(locale, numbering_system="latn"),
        tuple(dict.fromkeys([minus, minus.strip(_BIDI)])), False,
        (numbers.get_exponential_symbol(locale, numbering_system="latn"),),
        int(primary), int(secondary))


@lru_cache(maxsize=64)
def date_names(tag: str) -> DateNames:
    """`tag`'s names of months, days and AM/PM."""
    if is_default(tag):
        return ENGLISH
    locale = _babel(tag)

    def months(context: str, width: str) -> tuple[str, ...]:
        return tuple(locale.months[context][width][i] for i in range(1, 13))

    def days(width: str) -> tuple[str, ...]:
        return tuple(locale.days["format"][width][i] for i in range(7))

    periods = locale.day_periods["format"]["abbreviated"]
    return DateNames(tag, months("format", "abbreviated"), months("format", "wide"),
                     months("stand-alone", "abbreviated"), months("stand-alone", "wide"),
                     days("abbreviated"), days("wide"), periods["am"], periods["pm"])


def folded(name: str) -> str:
    """A name as it is matched: in lower case, without a period at its end, with one
    space for any of CLDR's spaces."""
    text = name.lower()
    for space in SPACES[1:]:
        text = text.replace(space, " ")
    return text[:-1] if text.endswith(".") and len(text) > 1 else text
