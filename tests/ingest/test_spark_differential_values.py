"""The ingest against Spark's own readers for the options that say how values read:
`dateFormat`, `timestampFormat`, `timestampNTZFormat`, `nanValue`/`positiveInf`/
`negativeInf`, `locale` (en-US decimals) and `encoding`. Each corpus is built here from
Spark's documentation of its option (the CSV and JSON data source pages and "Datetime
Patterns for Formatting and Parsing": the pattern letters, the defaults, the examples),
read by both with the same options, and compared per record as
tests/ingest/test_spark_differential.py does: the same row, or a corrupt record in Spark
and an error record in the ingest. The cases that differ are exactly those of the table
in docs/INGEST.md's section :data:`SECTION`, with both outcomes."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from tests.ingest.test_spark_differential import (
    Outcome,
    Outcomes,
    _same,
    documented_in,
    render,
    run_corpora,
    undocumented,
)
from tests.support.spec_corpus import Corpus, _Builder

pytestmark = pytest.mark.spark

SECTION = "### Value options: the cases that differ"
NOT_AS_WRITTEN = {"csv_decimal_en_us/decimal_odd_grouping",
                  "csv_decimal_en_us/decimal_comma_fraction"}
DDL = ("id BIGINT, d DATE, t TIMESTAMP, n TIMESTAMP_NTZ, x DOUBLE, f FLOAT, "
       "m DECIMAL(12,2), s STRING")
HEADER = b"id,d,t,n,x,f,m,s\n"


def _csv(name: str, start: int, options: dict[str, str], rows: list[tuple[str, str]],
         encoding: str = "utf-8") -> Corpus:
    """A CSV corpus: each case one record `{id},<fields>` (fields after the id)."""
    corpus = Corpus(name, "csv", DDL, head=HEADER.decode().encode(encoding),
                    options=options)
    add = _Builder(corpus, start).add
    for case, fields in rows:
        add(case, ("{id}," + fields).encode(encoding), tail="\n".encode(encoding))
    return corpus


def date_corpora() -> list[Corpus]:
    """dateFormat (Spark's docs: default yyyy-MM-dd; "Custom date formats follow the
    formats at Datetime Patterns"), its letters d, dd, M, MM, MMM, MMMM, y, yy, yyyy."""
    day_first = _csv("csv_date_dd_mm_yyyy", 10_000_001, {"dateFormat": "dd/MM/yyyy"}, [
        ("date_two_digits", "01/02/2021,,,,,,"), ("date_end_of_month", "28/02/2021,,,,,,"),
        ("date_leap_day", "29/02/2024,,,,,,"), ("date_not_leap", "29/02/2023,,,,,,"),
        ("date_one_digit_day", "1/02/2021,,,,,,"), ("date_iso", "2021-02-01,,,,,,"),
        ("date_two_digit_year", "01/02/21,,,,,,"), ("date_day_32", "32/01/2021,,,,,,"),
        ("date_month_13", "01/13/2021,,,,,,"), ("date_trailing_space", '"01/02/2021 ",,,,,,'),
    ])
    short = _csv("csv_date_d_m_yy", 10_100_001, {"dateFormat": "d/M/yy"}, [
        ("date_one_digit", "1/2/21,,,,,,"), ("date_two_digit", "11/12/99,,,,,,"),
        ("date_four_digit_year", "1/2/2021,,,,,,"), ("date_three_digit_day", "111/2/21,,,,,,"),
    ])
    names = _csv("csv_date_month_names", 10_200_001, {"dateFormat": "d MMM yyyy"}, [
        ("date_short_name", "1 Feb 2021,,,,,,"), ("date_lower_case", "1 feb 2021,,,,,,"),
        ("date_long_name", "1 February 2021,,,,,,"), ("date_number", "1 02 2021,,,,,,"),
    ])
    default = _csv("csv_date_default", 10_400_001, {}, [
        ("date_iso", "2021-02-01,,,,,,"), ("date_one_digit_fields", "2021-2-1,,,,,,"),
        ("date_with_time", "2021-02-01 10:11,,,,,,"),
        ("date_leading_space", '" 2021-02-01",,,,,,'),
        ("date_year_only", "2021,,,,,,"), ("ts_iso_offset", ",2021-02-01T10:11:12+01:00,,,,,"),
        ("ts_no_offset", ",2021-02-01 10:11:12,,,,,"), ("ntz_iso", ",,2021-02-01T10:11:12,,,,")])
    json = Corpus("json_date_format", "json", DDL, options={"dateFormat": "MM/dd/yyyy"})
    add = _Builder(json, 10_300_001).add
    add("date_string", '{"id": {id}, "d": "02/01/2021"}')
    add("date_iso", '{"id": {id}, "d": "2021-02-01"}')
    add("date_number", '{"id": {id}, "d": 20210201}')
    return [day_first, short, names, default, json]


def timestamp_corpora() -> list[Corpus]:
    """timestampFormat (Spark's docs: default yyyy-MM-dd'T'HH:mm:ss[.SSS][XXX]) and
    timestampNTZFormat (default yyyy-MM-dd'T'HH:mm:ss[.SSS]); letters H, h with a, m, s,
    S (a fraction of 1 to n digits), X, x, Z, literals in quotes."""
    iso = _csv("csv_timestamp_millis_offset", 11_000_001,
               {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"}, [
                   ("ts_offset", ",2021-01-01T10:11:12.123+02:00,,,,,"),
                   ("ts_zulu", ",2021-01-01T10:11:12.123Z,,,,,"),
                   ("ts_one_digit_fraction", ",2021-01-01T10:11:12.1-05:30,,,,,"),
                   ("ts_four_digit_fraction", ",2021-01-01T10:11:12.1234Z,,,,,"),
                   ("ts_no_fraction", ",2021-01-01T10:11:12Z,,,,,"),
                   ("ts_offset_without_colon", ",2021-01-01T10:11:12.123+0200,,,,,"),
                   ("ts_space_for_t", ",2021-01-01 10:11:12.123Z,,,,,"),
                   ("ts_hour_24", ",2021-01-01T24:00:00.000Z,,,,,")])
    us = _csv("csv_timestamp_us_clock", 11_100_001,
              {"timestampFormat": "MM/dd/yyyy hh:mm a"}, [
                  ("ts_pm", ",01/02/2021 03:04 PM,,,,,"),
                  ("ts_am_noon", ",01/02/2021 12:04 AM,,,,,"),
                  ("ts_lower_pm", ",01/02/2021 03:04 pm,,,,,"),
                  ("ts_hour_13", ",01/02/2021 13:04 PM,,,,,"),
                  ("ts_no_marker", ",01/02/2021 03:04,,,,,")])
    ntz = _csv("csv_timestamp_ntz_format", 11_200_001,
               {"timestampNTZFormat": "dd/MM/yyyy HH:mm[:ss]"}, [
                   ("ntz_minutes", ",,01/02/2021 10:11,,,,"),
                   ("ntz_seconds", ",,01/02/2021 10:11:12,,,,"),
                   ("ntz_iso", ",,2021-02-01T10:11:12,,,,"),
                   ("ntz_second_60", ",,01/02/2021 10:11:60,,,,")])
    return [iso, us, ntz]


def number_corpora() -> list[Corpus]:
    """nanValue (default NaN), positiveInf (Inf), negativeInf (-Inf), and the decimals of
    the default locale en-US (Spark's docs: "Sets a locale as language tag in IETF BCP
    47 format ... used while parsing dates and timestamps" and decimals)."""
    tokens = _csv("csv_nan_inf_tokens", 12_000_001,
                  {"nanValue": "n/a", "positiveInf": "+max", "negativeInf": "-max"}, [
                      ("double_nan_token", ",,,n/a,n/a,,"), ("double_inf_token", ",,,+max,+max,,"),
                      ("double_minus_inf_token", ",,,-max,-max,,"),
                      ("double_default_nan", ",,,NaN,NaN,,"),
                      ("double_default_inf", ",,,Inf,Inf,,")])
    defaults = _csv("csv_nan_inf_defaults", 12_100_001, {}, [
        ("double_nan", ",,,NaN,NaN,,"), ("double_inf", ",,,Inf,Inf,,"),
        ("double_minus_inf", ",,,-Inf,-Inf,,"), ("double_infinity", ",,,Infinity,,,"),
        ("double_upper_inf", ",,,INF,,,"), ("double_upper_minus_inf", ",,,-INF,,,"),
        ("double_lower_nan", ",,,nan,,,")])
    decimals = _csv("csv_decimal_en_us", 12_200_001, {"locale": "en-US"}, [
        ("decimal_grouping", ',,,,,"80,000.65",'), ("decimal_plain", ",,,,,80000.65,"),
        ("decimal_odd_grouping", ',,,,,"1,2,3.4",'),
        ("double_grouping", ',,,"80,000.65",,,'),
        ("decimal_comma_fraction", ',,,,,"80000,65",')])
    return [tokens, defaults, decimals]


def encoding_corpora() -> list[Corpus]:
    """encoding (Spark's docs: "decodes the CSV files by the given encoding type",
    default UTF-8), read by Spark with multiLine as every CSV corpus is."""
    text = [("text_accents", ",,,,,,,café crème"), ("text_a_umlaut", ",,,,,,,Müller"),
            ("text_nbsp", ",,,,,,,a\u00a0b"), ("text_ascii", ",,,,,,,plain")]
    latin = _csv("csv_encoding_iso_8859_1", 13_000_001, {"encoding": "iso-8859-1"},
                 [(n, f[1:]) for n, f in text], "latin-1")
    utf16 = _csv("csv_encoding_utf_16le", 13_100_001, {"encoding": "utf-16le"},
                 [(n, f[1:]) for n, f in text] + [("text_euro", ",,,,,,€ and “quotes”")],
                 "utf-16-le")
    return [latin, utf16]


def corpora() -> list[Corpus]:
    return [*date_corpora(), *timestamp_corpora(), *number_corpora(), *encoding_corpora()]


def _normal(outcome: Outcome) -> Outcome:
    """A timestamp as both sides hold it: Spark gives UTC wall time without a zone (the
    session and this process are in UTC), the ingest an aware UTC time."""
    return tuple(v.astimezone(dt.timezone.utc).replace(tzinfo=None)
                 if isinstance(v, dt.datetime) and v.tzinfo is not None else v
                 for v in outcome)


@pytest.fixture(scope="module")
def outcomes(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[Outcomes]:
    assert dt.datetime.now().astimezone().utcoffset() == dt.timedelta(0)
    found = run_corpora(spark, corpora(), tmp_path_factory.mktemp("values"))
    for result in found:
        for side in (result.spark, result.ours):
            for name, items in side.items():
                side[name] = [_normal(o) for o in items]
    return found


def differences(found: list[Outcomes]) -> dict[str, tuple[str, str]]:
    """`corpus/case` -> (Spark's outcome, the ingest's), where they differ (as
    test_spark_differential's, for a schema whose types hold commas)."""
    names = [n.split(" ")[0] for n in re.split(r",\s*(?![^()]*\))", DDL)]
    return {f"{out.corpus.name}/{case.name}": (render(out.spark[case.name], names),
                                              render(out.ours[case.name], names))
            for out in found for case in out.corpus.cases
            if not _same(out.spark[case.name], out.ours[case.name])}


def documented() -> dict[str, tuple[str, str]]:
    """The table of this section of docs/INGEST.md: case -> (Spark, ingest)."""
    return documented_in(SECTION, "\n#")


def test_every_difference_from_spark_is_documented(outcomes: list[Outcomes]) -> None:
    missing, stale = undocumented(differences(outcomes), documented(), outcomes)
    assert not missing and not stale, (
        f"docs/INGEST.md's {SECTION!r} is out of date.\nNot documented so:\n"
        + "\n".join(missing) + "\nDocumented cases that no longer differ: " + ", ".join(stale))


def test_each_record_is_one_row_or_one_error_and_most_agree(outcomes: list[Outcomes]) -> None:
    for out in outcomes:
        assert out.unattributed == [], out.corpus.name
        assert all(len(out.ours[c.name]) == c.records for c in out.corpus.cases)
        assert out.result.source_records == out.corpus.records
    cases = sum(len(o.corpus.cases) for o in outcomes)
    assert cases - len(differences(outcomes)) > 3 * len(differences(outcomes))


def test_a_file_whose_only_oddity_is_a_value_option_loses_nothing(
        outcomes: list[Outcomes]) -> None:
    """The cases written as the option says (no `bad` in Spark) are rows in the ingest;
    but a grouping comma that groups no three digits is not what en-US writes, though
    Spark drops it (docs/INGEST.md: stricter than Spark)."""
    for out in (o for o in outcomes if o.corpus.options):
        for case in out.corpus.cases:
            if f"{out.corpus.name}/{case.name}" in NOT_AS_WRITTEN:
                continue
            spark = out.spark[case.name]
            if spark and all(o[0] == "row" for o in spark):
                assert all(o[0] == "row" for o in out.ours[case.name]), (
                    out.corpus.name, case.name, out.ours[case.name])
