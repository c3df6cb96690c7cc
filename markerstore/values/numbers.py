"""Number tokens: a DECIMAL's text as a locale writes it (Spark's `locale` option), read
vectorized: one regular expression (RE2) says which values are numbers of the locale,
plain replacements turn those into the text Arrow's decimal cast reads, and a value that
is none fails the conversion with one message naming it, so the Validator's halving finds
exactly the failing values. The ingest's fast pass and the Validator read through here alike
(:func:`markerstore.values.cast.cast`). A floating point column's NaN and infinities
as Spark's ``nanValue``, ``positiveInf`` and ``negativeInf`` spell them are folded into
Arrow's spelling (:func:`fold_float_tokens`).

What a number of a locale is, after Spark: en-US (Spark's default) is read as
``java.math.BigDecimal`` reads the text without its grouping commas (a sign ``+`` or
``-``, an exponent ``E`` or ``e`` with its sign); any other locale as
``java.text.DecimalFormat`` reads it with the locale's symbols (its decimal separator,
grouping separator, minus sign and exponent symbol; no ``+``), so ``346,50`` is 346.50 in
fr-FR and ``14.000,00`` is 14000.00 in de-DE. One rule is stricter than Spark's, in every
locale: a grouping separator stands only between groups of digits, as the locale groups
them (three, or in hi-IN three then two), in the integer part. Spark drops it wherever it
stands, so ``346,50`` is 34650 with en-US and ``346.50`` is 34650 with de-DE: a value
changed without a word, a ``cast`` error here.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from markerstore.values.locales import NumberSymbols, is_default, number_symbols


def _char(char: str) -> str:
    """`char` as a literal of an RE2 expression."""
    return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):x}}}"


def _text(text: str) -> str:
    return "".join(_char(c) for c in text)


@lru_cache(maxsize=64)
def number_regex(symbols: NumberSymbols) -> str:
    """The numbers `symbols` write, as one anchored RE2 expression."""
    minus = [_text(m) for m in symbols.minus]
    sign = "(?:" + "|".join(minus + (["\\+"] if symbols.plus else [])) + ")?"
    g, d = _text(symbols.group), _text(symbols.decimal)
    p, s = symbols.primary, symbols.secondary
    grouped = f"[0-9]{{1,{s}}}(?:{g}[0-9]{{{s}}})*{g}[0-9]{{{p}}}"
    mantissa = f"(?:(?:{grouped}|[0-9]+)(?:{d}[0-9]*)?|{d}[0-9]+)"
    exponent = "(?:(?:" + "|".join(_text(e) for e in symbols.exponent) + f"){sign}[0-9]+)?"
    return f"^{sign}{mantissa}{exponent}$"


def numbers_of(source: pa.Array, locale: str) -> pa.Array:
    """Whether each text of `source` is a number as `locale` writes it (null stays null)."""
    return pc.match_substring_regex(source, number_regex(number_symbols(locale)))


def normalized(source: pa.Array, locale: str) -> pa.Array:
    """The texts of `source` that are numbers of `locale` as the plain text Arrow's decimal
    cast reads (``14.000,00`` in de-DE is ``14000.00``); any other text as it is."""
    symbols = number_symbols(locale)
    text = pc.replace_substring(source, symbols.group, "")
    if symbols.decimal != ".":
        text = pc.replace_substring(text, symbols.decimal, ".")
    for minus in symbols.minus:
        if minus != "-":
            text = pc.replace_substring(text, minus, "-")
    for exponent in symbols.exponent:
        if exponent not in ("E", "e"):
            text = pc.replace_substring(text, exponent, "E")
    return pc.if_else(pc.fill_null(numbers_of(source, locale), False), text, source)


def parse(source: pa.Array, target: pa.DataType, locale: str) -> pa.Array:
    """`source` (text) as the DECIMAL `target`, each value read as `locale` writes numbers;
    an ArrowInvalid naming the first value that is no such number (Arrow's own for one
    with more digits than `target` keeps). In en-US, text without grouping is what
    Arrow's cast reads: it is tried first (the common case costs no expression)."""
    if is_default(locale):
        try:
            return pc.cast(source, target, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    valid = numbers_of(source, locale)
    bad = pc.invert(pc.fill_null(valid, True))
    if len(source) and pc.any(bad).as_py():
        value = source.filter(bad)[0].as_py()
        symbols = number_symbols(locale)
        raise pa.ArrowInvalid(
            f"{value!r:.200} is no number as locale {locale} writes one (decimal separator "
            f"{symbols.decimal!r}, grouping separator {symbols.group!r} only between groups "
            f"of {symbols.primary} digits)")
    return pc.cast(normalized(source, locale), target, safe=True)


def fold_float_tokens(source: pa.Array, tokens: dict[str, str]) -> pa.Array:
    """`source` with each text equal to a token of `tokens` replaced by what Arrow reads as
    that value (``NaN``, ``inf``, ``-inf``)."""
    for token, value in tokens.items():
        source = pc.if_else(pc.equal(source, token), value, source)
    return source
