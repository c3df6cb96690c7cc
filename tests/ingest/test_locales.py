"""Spark's `locale` option (CSV and JSON, "a locale as language tag in IETF BCP 47 format
... used while parsing dates and timestamps", and decimals), built here from CLDR's data
through Babel (the JVM's locale provider reads CLDR too) for fr-FR, de-DE, pt-BR, es-ES,
it-IT, nl-NL, pl-PL and ja-JP:

- against Spark's own reader with the same `locale`: every number CLDR's decimal format
  writes for the locale (its decimal separator, grouping separator and minus sign; an
  exponent as java.text.DecimalFormat reads one), every month's wide name in a
  `dateFormat`, every month's abbreviated name and the AM/PM markers in a
  `timestampFormat`, and a month's name in a `timestampNTZFormat`; the cases that
  differ are exactly those of docs/INGEST.md's :data:`SECTION`, with both outcomes
  (tests/ingest/test_spark_differential.py's method);
- a property: the vectorized pass (CSV text cast column by column, JSON values cast by
  Arrow) and the reference parser (errortable's per-record conversion) read every
  generated number and date alike, in every tested locale, and a number or date written
  as CLDR writes it reads as the value it was written from."""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import babel
import babel.dates
import babel.numbers
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errortable
from markerstore.cli import cli
from markerstore.ingest.parse import cast_rows
from markerstore.values import locales
from markerstore.values.formats import ValueFormats
from tests.ingest import test_spark_differential as differential
from tests.ingest.test_spark_differential import Outcomes
from tests.support.readback import data_rows
from tests.support.spec_corpus import Corpus, _Builder

TAGS = ("fr-FR", "de-DE", "pt-BR", "es-ES", "it-IT", "nl-NL", "pl-PL", "ja-JP")
SECTION = "### Locales: the cases that differ"
DDL = "id BIGINT, m DECIMAL(16,2), d DATE, t TIMESTAMP, n TIMESTAMP_NTZ"
DATES = {"dateFormat": "d MMMM yyyy", "timestampFormat": "dd MMM yyyy hh:mm a",
         "timestampNTZFormat": "dd MMM yyyy HH:mm"}
NUMBERS = (Decimal("1234567.89"), Decimal("-0.5"), Decimal("14000"), Decimal("346.5"),
           Decimal("-98765.43"))


def _cldr(tag: str) -> Any:
    return babel.Locale.parse(tag, sep="-")


def test_locale_names_and_symbols_are_cldrs() -> None:
    """The symbols and names the ingest reads are CLDR's (Babel's data), and the built-in
    en-US ones are CLDR's English; a tag CLDR does not know is refused."""
    for tag in (*TAGS, "en-US"):
        cldr = _cldr(tag)
        names = locales.date_names(tag)
        assert names.months == tuple(cldr.months["format"]["abbreviated"][i]
                                     for i in range(1, 13)), tag
        assert names.months_wide == tuple(cldr.months["format"]["wide"][i]
                                          for i in range(1, 13)), tag
        assert names.days_wide == tuple(cldr.days["format"]["wide"][i] for i in range(7))
        assert (names.am, names.pm) == (cldr.day_periods["format"]["abbreviated"]["am"],
                                        cldr.day_periods["format"]["abbreviated"]["pm"])
        symbols = locales.number_symbols(tag)
        assert symbols.decimal == babel.numbers.get_decimal_symbol(cldr)
        assert symbols.group == babel.numbers.get_group_symbol(cldr)
    assert locales.canonical("pt_br") == "pt-BR" and locales.canonical("EN-us") == "en-US"
    with pytest.raises(ValueError, match="CLDR knows"):
        locales.canonical("xx-YY")


# --- the property: both passes read alike, and read what CLDR wrote -------------------------
def _written(value: Decimal, tag: str) -> str:
    """`value` as CLDR's decimal format writes it in `tag` (grouped)."""
    return babel.numbers.format_decimal(value, locale=_cldr(tag), decimal_quantization=False)


@st.composite
def number_texts(draw: st.DrawFn, tag: str) -> tuple[str, Decimal | None]:
    """A number's text in `tag` as CLDR writes it (and its value), or that text changed:
    a separator moved, doubled or swapped, a sign or a space added (value None: any)."""
    digits = draw(st.integers(0, 10**13))
    scale = draw(st.integers(0, 2))
    value = Decimal(digits).scaleb(-scale) * draw(st.sampled_from([1, -1]))
    text = _written(value, tag)
    if draw(st.booleans()):
        return text, value
    symbols = locales.number_symbols(tag)
    edits = [lambda t: t.replace(symbols.group, ""),
             lambda t: t.replace(symbols.decimal, symbols.group),
             lambda t: t[:1] + symbols.group + t[1:],
             lambda t: t + symbols.decimal, lambda t: "+" + t, lambda t: t + " ",
             lambda t: t.replace(symbols.group, symbols.group * 2),
             lambda t: t.replace(symbols.decimal, ".") if symbols.decimal != "." else t + ",",
             lambda t: t + "E2"]
    return draw(st.sampled_from(edits))(text), None


@st.composite
def date_texts(draw: st.DrawFn, tag: str) -> tuple[str, dt.date | None]:
    """A date `d MMMM yyyy` in `tag` with CLDR's month name (in any case), or with a name
    of another locale or a wrong day (value None)."""
    day = draw(st.dates(dt.date(1900, 1, 1), dt.date(2099, 12, 31)))
    name = locales.date_names(tag).months_wide[day.month - 1]
    name = draw(st.sampled_from([name, name.upper(), name.lower(), name.title()]))
    if draw(st.integers(0, 3)) == 0:
        other = locales.date_names(draw(st.sampled_from(TAGS))).months_wide[day.month - 1]
        return f"{day.day} {other} {day.year}", None
    return f"{day.day} {name} {day.year}", day


def _passes(values: list[str], target: pa.DataType, formats: ValueFormats
            ) -> list[list[Any]]:
    """The values read by the vectorized CSV pass (Validator.split_text), the vectorized
    JSON pass (reader.cast_rows) and the reference parser (Validator.split_records_arrow):
    each a value, or None where the value failed."""
    validator = errortable.Validator(pa.schema([("v", target)]), formats=formats)
    lines = list(range(1, len(values) + 1))

    def placed(good: pa.RecordBatch, errors: pa.Table) -> list[Any]:
        failed = {int(dict(c)["sourceLine"]) for c in errors.column("context").to_pylist()}
        kept = iter(good.column(0).to_pylist())
        return [None if line in failed else next(kept) for line in lines]

    text = pa.table({"v": pa.array(values, pa.string())})
    csv = placed(*validator.split_text(text, None, lines, lambda rows: ["{}"] * len(rows)))
    cast, failed = cast_rows(pa.array(values, pa.string()), target, formats)
    json_values = [None if i in set(failed.tolist()) else v
                   for i, v in enumerate(cast.to_pylist())]
    reference = placed(*validator.split_records_arrow([{"v": v} for v in values], None,
                                                      line_numbers=lines))
    return [csv, json_values, reference]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(TAGS))
def test_both_passes_read_every_number_and_date_alike_in_every_locale(
        data: st.DataObject, tag: str) -> None:
    both_passes_alike(data, tag)


@pytest.mark.campaign
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.sampled_from(TAGS))
def test_both_passes_read_alike_campaign(data: st.DataObject, tag: str) -> None:
    both_passes_alike(data, tag)


def both_passes_alike(data: st.DataObject, tag: str) -> None:
    numbers = data.draw(st.lists(number_texts(tag), min_size=1, max_size=12))
    dates = data.draw(st.lists(date_texts(tag), min_size=1, max_size=12))
    formats = ValueFormats(date=DATES["dateFormat"], locale=tag)
    for drawn, target in ((numbers, pa.decimal128(16, 2)), (dates, pa.date32())):
        texts = [t for t, _ in drawn]
        csv, json_values, reference = _passes(texts, target, formats)
        assert csv == json_values == reference, (tag, texts)
        for (text, value), got in zip(drawn, csv, strict=True):
            if value is not None:
                assert got == value, (tag, text)


# --- against Spark's reader ----------------------------------------------------------------
def locale_corpora() -> list[Corpus]:
    """One corpus a locale: CLDR's numbers, every month's wide and abbreviated names, AM and
    PM; and what CLDR does not write: grouping where no group of three ends, and the
    en-US form of a number."""
    found = []
    for number, tag in enumerate(TAGS):
        names = locales.date_names(tag)
        symbols = locales.number_symbols(tag)
        corpus = Corpus(f"csv_locale_{tag.replace('-', '_').lower()}", "csv", DDL,
                        head=b"id;m;d;t;n\n", options={"locale": tag, "sep": ";", **DATES})
        add = _Builder(corpus, 20_000_001 + 100 * number).add
        for i, value in enumerate(NUMBERS):
            add(f"decimal_cldr_{i}", "{id};" + _written(value, tag) + ";;;")
        add("decimal_exponent", "{id};1" + symbols.decimal + "5E2;;;")
        add("decimal_grouping_not_of_three",
            "{id};1" + symbols.group + "2" + symbols.group + "3" + symbols.decimal + "4;;;")
        add("decimal_us_form", "{id};1,234.5;;;")
        for month in range(12):
            add(f"date_month_{month + 1}", f"{{id}};;{month + 1} {names.months_wide[month]} "
                                           "2021;;")
            half = names.pm if month % 2 else names.am
            add(f"ts_month_{month + 1}", f"{{id}};;;03 {names.months[month]} 2021 10:11 {half};")
        add("ntz_month_2", f"{{id}};;;;03 {names.months[1]} 2021 10:11")
        found.append(corpus)
    return found


@pytest.fixture(scope="module")
def outcomes(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Outcomes]:
    found = differential.run_corpora(spark, locale_corpora(), tmp_path_factory.mktemp("locales"))
    for result in found:
        for side in (result.spark, result.ours):
            for name, items in side.items():
                side[name] = [tuple(v.replace(tzinfo=None) if isinstance(v, dt.datetime)
                                    else v for v in o) for o in items]
    return found


def _differences(found: list[Outcomes]) -> dict[str, tuple[str, str]]:
    names = [n.split(" ")[0] for n in re.split(r",\s*(?![^()]*\))", DDL)]
    return {f"{out.corpus.name}/{case.name}": (differential.render(out.spark[case.name], names),
                                              differential.render(out.ours[case.name], names))
            for out in found for case in out.corpus.cases
            if not differential._same(out.spark[case.name], out.ours[case.name])}


@pytest.mark.spark
def test_every_difference_from_sparks_locale_is_documented(outcomes: list[Outcomes]) -> None:
    documented = differential.documented_in(SECTION, "\n#")
    missing, stale = differential.undocumented(_differences(outcomes), documented, outcomes)
    assert not missing and not stale, (
        f"docs/INGEST.md's {SECTION!r} is out of date.\nNot documented so:\n"
        + "\n".join(missing) + "\nDocumented cases that no longer differ: " + ", ".join(stale))


@pytest.mark.spark
def test_what_cldr_writes_reads_as_spark_reads_it(outcomes: list[Outcomes]) -> None:
    """Every number CLDR's format writes and every month name reads as a row with its
    value in both; every record is one row or one error record."""
    for out in outcomes:
        assert all(len(out.ours[c.name]) == c.records for c in out.corpus.cases)
        for case in out.corpus.cases:
            if case.name.startswith(("decimal_cldr", "date_month")):
                assert out.ours[case.name][0][0] == "row", (out.corpus.name, case.name)
                assert differential._same(out.spark[case.name], out.ours[case.name]), case.name


@pytest.mark.spark
def test_the_cli_reads_a_french_export_with_its_locale(spark: Any, tmp_path: Path) -> None:
    source = tmp_path / "subventions.csv"
    name = locales.date_names("fr-FR").months_wide[1]
    source.write_text(f"montant;date\n1\u202f346,50;3 {name} 2021\n-0,5;3 {name.upper()} 2020\n")
    out = CliRunner().invoke(cli, [
        "ingest", str(source), str(tmp_path / "t"), "--markers", "direct", "--no-progress",
        "--json", "--schema", "montant DECIMAL(10,2), date DATE", "--option", "sep=;",
        "--option", "locale=fr_FR", "--option", "dateFormat=d MMMM yyyy"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["error_records"] == 0
    rows = sorted(data_rows(str(tmp_path / "t")).to_pylist(), key=lambda r: r["montant"])
    assert rows == [{"montant": Decimal("-0.50"), "date": dt.date(2020, 2, 3)},
                    {"montant": Decimal("1346.50"), "date": dt.date(2021, 2, 3)}]


def test_a_replay_reads_values_with_the_ingests_locale() -> None:
    """`errortable replay --option locale=...` reads a record's values as the ingest with
    that locale read them (the replay of a French export's amounts)."""
    from markerstore.cli.errortable import _value_formats

    formats = _value_formats(("locale=fr-FR", "dateFormat=d MMMM yyyy"))
    assert formats.locale == "fr-FR"
    _, json_values, _ = _passes(["1\u202f346,50"], pa.decimal128(10, 2), formats)
    assert json_values == [Decimal("1346.50")]
