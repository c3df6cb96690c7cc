"""How values read with Spark's reading options: `dateFormat`, `timestampFormat` and
`timestampNTZFormat` (Spark's datetime pattern letters), `nanValue`, `positiveInf`,
`negativeInf`, and `locale` (en-US: a DECIMAL's grouping commas). The expected outcomes
below are what PySpark 4.3's CSV reader gives for the same value and option (PERMISSIVE:
a value Spark refuses is a corrupt record, here a `cast` error record). The vectorized
pass and errortable's Validator read alike, whole or in blocks."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errortable
from errortable import parse_csv_lines
from markerstore import config
from markerstore.errors import ConfigError
from markerstore.ingest.parse import csv_text
from markerstore.values.csv import Dialect
from markerstore.values.formats import ValueFormats
from tests.support.ingest_run import reasons, run

UTC = dt.timezone.utc
D, TS, NTZ = "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"

# (column type, option, pattern, value, what Spark 4.3 reads: a value or None for corrupt)
SPARK_READS: list[tuple[str, str, str, str, Any]] = [
    (D, "dateFormat", "dd/MM/yyyy", "01/02/2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "dd/MM/yyyy", "1/2/2021", None),
    (D, "dateFormat", "dd/MM/yyyy", "01/02/21", None),
    (D, "dateFormat", "dd/MM/yyyy", "31/02/2021", None),
    (D, "dateFormat", "dd/MM/yyyy", "01/02/20210", None),
    (D, "dateFormat", "dd/MM/yyyy", " 01/02/2021", None),
    (D, "dateFormat", "dd/MM/yyyy", "01/02/2021 ", None),
    (D, "dateFormat", "d/M/yyyy", "1/2/2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "d/M/yyyy", "01/02/2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "d/M/yyyy", "123/2/2021", None),
    (D, "dateFormat", "d/M/yyyy", "1/2/21", None),
    (D, "dateFormat", "d/M/yy", "1/2/21", dt.date(2021, 2, 1)),
    (D, "dateFormat", "d/M/yy", "1/2/99", dt.date(2099, 2, 1)),
    (D, "dateFormat", "d/M/yy", "1/2/2021", None),
    (D, "dateFormat", "d/M/y", "1/2/2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "d/M/y", "1/2/21", dt.date(21, 2, 1)),
    (D, "dateFormat", "MMM d, yyyy", "Feb 1, 2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "MMM d, yyyy", "FEB 1, 2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "MMM d, yyyy", "February 1, 2021", None),
    (D, "dateFormat", "MMMM d, yyyy", "february 1, 2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "MMMM d, yyyy", "Feb 1, 2021", None),
    (D, "dateFormat", "yyyy-MM-dd", "2021-1-1", None),
    (D, "dateFormat", "yyyy-MM-dd", "2021-01-01 10:00", None),
    (TS, "timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2021-01-01T10:11:12.123+02:00",
     dt.datetime(2021, 1, 1, 8, 11, 12, 123000, UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2021-01-01T10:11:12.1Z",
     dt.datetime(2021, 1, 1, 10, 11, 12, 100000, UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2021-01-01T10:11:12.1234+02:00",
     None),
    (TS, "timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2021-01-01T10:11:12+02:00", None),
    (TS, "timestampFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2021-01-01T10:11:12.123+0200",
     None),
    (TS, "timestampFormat", "MM/dd/yyyy HH:mm", "01/02/2021 10:11",
     dt.datetime(2021, 1, 2, 10, 11, tzinfo=UTC)),
    (TS, "timestampFormat", "MM/dd/yyyy HH:mm", "01/02/2021 24:00", None),
    (TS, "timestampFormat", "MM/dd/yyyy HH:mm", "01/02/2021 1:11", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ss", "2021-01-01 10:11:12",
     dt.datetime(2021, 1, 1, 10, 11, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ss", "2021-01-01 10:11:60", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ss", "2021-01-01T10:11:12", None),
    (TS, "timestampFormat", "yyyy-MM-dd hh:mm:ss a", "2021-01-01 10:11:12 pm",
     dt.datetime(2021, 1, 1, 22, 11, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd hh:mm:ss a", "2021-01-01 12:11:12 AM",
     dt.datetime(2021, 1, 1, 0, 11, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd hh:mm:ss a", "2021-01-01 13:11:12 PM", None),
    (TS, "timestampFormat", "yyyy-MM-dd hh:mm:ss a", "2021-01-01 00:11:12 AM", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ss.SSSSSS", "2021-01-01 10:11:12.1",
     dt.datetime(2021, 1, 1, 10, 11, 12, 100000, UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ss.SSSSSS", "2021-01-01 10:11:12.1234567", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ss.SSSSSSSSS", "2021-01-01 10:11:12.123456789",
     dt.datetime(2021, 1, 1, 10, 11, 12, 123456, UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssZ", "2021-01-01 10:11:12+0200",
     dt.datetime(2021, 1, 1, 8, 11, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssZ", "2021-01-01 10:11:12+02:00", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssZ", "2021-01-01 10:11:12Z", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssx", "2021-01-01 10:11:12+0230",
     dt.datetime(2021, 1, 1, 7, 41, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssx", "2021-01-01 10:11:12Z", None),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssX", "2021-01-01 10:11:12+02",
     dt.datetime(2021, 1, 1, 8, 11, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd HH:mm:ssX", "2021-01-01 10:11:12Z",
     dt.datetime(2021, 1, 1, 10, 11, 12, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd", "2021-01-01", dt.datetime(2021, 1, 1, tzinfo=UTC)),
    (TS, "timestampFormat", "yyyy-MM-dd", "2021-01-01 10:00", None),
    (D, "dateFormat", "yyyy", "2021", dt.date(2021, 1, 1)),
    (D, "dateFormat", "MM/yyyy", "02/2021", dt.date(2021, 2, 1)),
    (D, "dateFormat", "yyyy-MM-dd[ HH:mm]", "2021-02-01 10:11", dt.date(2021, 2, 1)),
    (D, "dateFormat", "yyyy-MM-dd[ HH:mm]", "2021-02-01", dt.date(2021, 2, 1)),
    (TS, "timestampFormat", "HH:mm", "10:11", dt.datetime(1970, 1, 1, 10, 11, tzinfo=UTC)),
    (NTZ, "timestampNTZFormat", "dd/MM/yyyy HH:mm", "01/02/2021 10:11",
     dt.datetime(2021, 2, 1, 10, 11)),
    (NTZ, "timestampNTZFormat", "dd/MM/yyyy HH:mm", "2021-01-01 10:00", None),
]


def _outcome(rows: list[dict[str, Any]], errors: list[dict[str, Any]]) -> Any:
    assert len(rows) + len(errors) == 1
    if errors:
        assert reasons(errors) == [("cast", "2")]
        return None
    return rows[0]["v"]


@pytest.mark.parametrize(("ddl", "option", "pattern", "value", "expected"), SPARK_READS)
def test_a_pattern_reads_each_value_as_spark_does(tmp_path: Path, ddl: str, option: str,
                                                 pattern: str, value: str, expected: Any
                                                 ) -> None:
    """One value, in a quoted CSV field (so its spaces are its own), read by the ingest's
    task as Spark 4.3 reads it: the same value, or a cast error where Spark's is a
    corrupt record. The same value as a JSON string reads alike."""
    data = f'v\n"{value}"\n'.encode()
    rows, errors = run(tmp_path / "in.csv", data, f"v {ddl}", options={option: pattern})
    assert _outcome(rows, errors) == expected
    line = json.dumps({"v": value}).encode()
    rows, errors = run(tmp_path / "in.json", b"\n" + line + b"\n", f"v {ddl}",
                       options={option: pattern})
    assert _outcome(rows, errors) == expected


def test_a_value_that_fails_is_one_cast_error_naming_it_and_the_pattern(tmp_path: Path
                                                                      ) -> None:
    data = b"id,d\n1,01/02/2021\n2,2021-02-01\n3,31/02/2021\n4,\n"
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, d DATE",
                       options={"dateFormat": "dd/MM/yyyy"})
    assert sorted((r["id"], r["d"]) for r in rows) == [(1, dt.date(2021, 2, 1)), (4, None)]
    assert reasons(errors) == [("cast", "3"), ("cast", "4")]
    assert "'2021-02-01' is no date or time of the pattern 'dd/MM/yyyy'" in errors[0]["message"]


@pytest.mark.parametrize(("option", "pattern", "named"), [
    ("dateFormat", "EEE, MMM yyyy", "needs d"), ("timestampFormat", "yyyy-MM-dd HH:mm z", "'z'"),
    ("timestampFormat", "yyyy-MM-dd HH:mm VV", "'V'"), ("dateFormat", "yyyy-DDD", "'D'"),
    ("timestampFormat", "yyyy-MM-dd hh:mm", "needs a"), ("dateFormat", "yyyyy", "yyyyy"),
    ("timestampNTZFormat", "yyyy-MM-dd HH:mmXXX", "no offset"),
    ("dateFormat", "yyyy-MM-dd'T", "never closed"), ("dateFormat", "'T'", "no field"),
    ("dateFormat", "yyyy[-MM[-dd]]", "not nest"), ("locale", "xx-YY", "CLDR knows"),
    ("locale", "english", "CLDR knows"), ("dateFormat", "EEEEE d MMM yyyy", "EEEEE"),
])
def test_what_is_outside_the_subset_is_refused_in_one_line(option: str, pattern: str,
                                                           named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.resolve({option: pattern})
    message = str(caught.value)
    assert message.startswith(f"option {option}: ") and named in message
    assert "\n" not in message


def _fraction(when: dt.datetime, digits: int) -> str:
    return f"{when.microsecond:06d}"[:digits]


def _offset(offset: int, colon: bool, zulu: bool) -> str:
    if offset == 0 and zulu:
        return "Z"
    hh, mm = divmod(abs(offset), 60)
    return f"{'+' if offset >= 0 else '-'}{hh:02d}{':' if colon else ''}{mm:02d}"


# Patterns, each with a writer of its own (the test's, independent of the reader).
_PATTERNS: dict[str, Any] = {
    "dd/MM/yyyy HH:mm": lambda w, d, o: f"{w:%d/%m/%Y %H:%M}",
    "MM/dd/yyyy hh:mm:ss a": lambda w, d, o: f"{w:%m/%d/%Y %I:%M:%S %p}",
    "yyyy-MM-dd'T'HH:mm:ss.SSSXXX":
        lambda w, d, o: f"{w:%Y-%m-%dT%H:%M:%S}.{_fraction(w, d)}{_offset(o, True, True)}",
    "d/M/yyyy H:m:s":
        lambda w, d, o: f"{w.day}/{w.month}/{w.year} {w.hour}:{w.minute}:{w.second}",
    "yyyy-MM-dd HH:mm:ss[.SSS]":
        lambda w, d, o: f"{w:%Y-%m-%d %H:%M:%S}" + (f".{_fraction(w, d)}" if d else ""),
    "MMM d yyyy HH:mm:ssZ":
        lambda w, d, o: f"{w:%b} {w.day} {w:%Y %H:%M:%S}{_offset(o, False, False)}",
}


def _render(pattern: str, when: dt.datetime, digits: int, offset: int) -> str:
    """`when` written as `pattern` says."""
    return str(_PATTERNS[pattern](when, digits, offset))


def _expected(pattern: str, when: dt.datetime, digits: int, offset: int) -> dt.datetime:
    micros = int(f"{when.microsecond:06d}"[:digits].ljust(6, "0")) if "S" in pattern else 0
    value = when.replace(microsecond=micros)
    if "s" not in pattern:
        value = value.replace(second=0)
    zoned = "X" in pattern or "ssZ" in pattern
    return (value - dt.timedelta(minutes=offset if zoned else 0)).replace(tzinfo=UTC)


_WHEN = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
_NOISE = st.text(alphabet="0123456789/-:. TZ+apmAPMJanFeb", max_size=24)


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(_PATTERNS)), st.lists(st.tuples(_WHEN, st.integers(0, 3),
                                                      st.integers(-14 * 60, 14 * 60)),
                                            min_size=1, max_size=6),
       st.lists(_NOISE, max_size=6), st.integers(24, 200))
def test_the_vectorized_pass_and_the_validator_read_patterns_alike(
        tmp_path: Path, pattern: str, stamps: list[tuple[dt.datetime, int, int]],
        noise: list[str], block: int) -> None:
    """Datetimes written with a pattern read back as they were, and any text (noise) reads
    alike in the vectorized pass and in errortable's parser and Validator; the same file
    read whole and in blocks of a few lines gives the same rows and errors."""
    if "S" not in pattern:
        stamps = [(w, 0, o) for w, _, o in stamps]
    if "X" not in pattern and "ssZ" not in pattern:
        stamps = [(w, d, 0) for w, d, _ in stamps]
    if "SSSXXX" in pattern:  # the fraction is not optional there
        stamps = [(w, max(d, 1), o) for w, d, o in stamps]
    values = [_render(pattern, w, d, o) for w, d, o in stamps]
    texts = values + [n for n in noise if '"' not in n]
    data = ("id,t\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(texts))).encode()
    ddl = "id BIGINT, t TIMESTAMP"
    options = {"timestampFormat": pattern}
    whole = run(tmp_path / "in.csv", data, ddl, options=options)
    pieces = run(tmp_path / "in.csv", data, ddl, options=options, block_bytes=block)
    assert whole[0] == pieces[0]
    assert reasons(whole[1]) == reasons(pieces[1])
    got = {r["id"]: r["t"] for r in whole[0]}
    for i, (w, d, o) in enumerate(stamps):
        assert got.get(i) == _expected(pattern, w, d, o), values[i]
    # the reference alone (errortable's parser and Validator) reads every record alike
    formats = ValueFormats(timestamp=pattern)
    validator = errortable.Validator(pa.schema([("id", pa.int64()),
                                                ("t", pa.timestamp("us", tz="UTC"))]),
                                     formats=formats)
    records = [f'{i},"{t}"' for i, t in enumerate(texts)]
    parsed = parse_csv_lines(records, header=["id", "t"])
    good, bad = validator.split_records(parsed.records)
    assert {r["id"]: r["t"] for r in good.to_pylist()} == got
    assert len(bad) == len(whole[1])
    # the task's own path: Arrow's text of the clean records, each column cast by the
    # Validator; of those records, it keeps exactly the rows the ingest kept
    text = csv_text(pa.array(records, pa.large_string()), validator.target_schema,
                    ["id", "t"], False, dialect=Dialect())
    fast, failed = validator.split_text(text.table, None, None, lambda rows: ["{}"] * len(rows))
    clean = set(text.rows.tolist())
    assert {r["id"]: r["t"] for r in fast.to_pylist()} == {
        i: t for i, t in got.items() if i in clean}
    assert failed.num_rows == len(clean - got.keys())


def test_nan_and_infinity_tokens_read_as_spark_reads_them(tmp_path: Path) -> None:
    data = b"id,d,f\n1,n/a,max\n2,min,n/a\n3,NaN,Inf\n4,-Inf,Infinity\n5,nope,1.5\n"
    options = {"nanValue": "n/a", "positiveInf": "max", "negativeInf": "min"}
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, d DOUBLE, f FLOAT",
                       options=options)
    got = {r["id"]: (r["d"], r["f"]) for r in rows}
    assert str(got[1]) == "(nan, inf)" and str(got[2]) == "(-inf, nan)"
    assert str(got[3]) == "(nan, inf)" and str(got[4]) == "(-inf, inf)"
    assert reasons(errors) == [("cast", "6")]
    # without the options, the tokens are text that is no number
    rows, errors = run(tmp_path / "plain.csv", data, "id BIGINT, d DOUBLE, f FLOAT")
    assert reasons(errors) == [("cast", "2"), ("cast", "3"), ("cast", "6")]


def test_decimals_with_grouping_commas_read_as_spark_en_us_reads_them(tmp_path: Path
                                                                       ) -> None:
    """Spark's default locale (en-US) drops a DECIMAL's grouping commas; here only where
    they group three digits (`1,2,3.4` is a cast error, Spark's 123.4 a guess); a DOUBLE
    takes none."""
    data = b'id,m,d\n1,"80,000.65",1.5\n2,"1,2,3.4",\n3,7,"1,5"\n4,"8,0x",\n'
    rows, errors = run(tmp_path / "in.csv", data, "id BIGINT, m DECIMAL(10,2), d DOUBLE")
    got = {r["id"]: str(r["m"]) for r in rows}
    assert got == {1: "80000.65"}
    assert reasons(errors) == [("cast", "3"), ("cast", "4"), ("cast", "5")]
    line = b'{"id": 1, "m": "80,000.65"}\n'
    rows, errors = run(tmp_path / "in.json", line, "id BIGINT, m DECIMAL(10,2)")
    assert [str(r["m"]) for r in rows] == ["80000.65"] and errors == []


# One export with every value option of Spark's: (options, header, record, row).
EXPORT = {"dateFormat": "dd/MM/yyyy", "timestampFormat": "MM/dd/yyyy HH:mm",
          "timestampNTZFormat": "yyyy-MM-dd HH:mm:ss[.SSS]", "nanValue": "n/a",
          "positiveInf": "max", "negativeInf": "min", "locale": "en-US"}
EXPORT_DDL = "id BIGINT, d DATE, t TIMESTAMP, n TIMESTAMP_NTZ, x DOUBLE, m DECIMAL(12,2)"
EXPORT_CSV = (b'id,d,t,n,x,m\n1,01/02/2021,12/31/2020 23:59,2021-01-01 10:11:12.5,n/a,'
              b'"80,000.65"\n2,28/02/2024,01/01/2021 00:00,2021-01-01 10:11:12,max,1.5\n'
              b'3,,,,min,\n')


def _export_rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["d"], r["t"], r["n"], str(r["x"]), str(r["m"])) for r in rows)


EXPORT_ROWS = [
    (1, dt.date(2021, 2, 1), dt.datetime(2020, 12, 31, 23, 59, tzinfo=UTC),
     dt.datetime(2021, 1, 1, 10, 11, 12, 500000), "nan", "80000.65"),
    (2, dt.date(2024, 2, 28), dt.datetime(2021, 1, 1, tzinfo=UTC),
     dt.datetime(2021, 1, 1, 10, 11, 12), "inf", "1.50"),
    (3, None, None, None, "-inf", "None")]


@pytest.mark.spark
def test_an_export_with_spark_value_options_loses_no_record(spark: Any, tmp_path: Path
                                                            ) -> None:
    """Through `markerstore.ingest` and through the CLI, read back from the commit."""
    from click.testing import CliRunner

    from markerstore.cli import cli
    from markerstore.ingest.pipeline import ingest
    from tests.support.readback import assert_records, data_rows

    source = tmp_path / "src"
    source.mkdir()
    (source / "export.csv").write_bytes(EXPORT_CSV)
    table = str(tmp_path / "t")
    result = ingest(str(source), table, schema=EXPORT_DDL, spark=spark, markers="direct",
                    progress=False, options=EXPORT)
    assert result.error_records == {}
    assert _export_rows(data_rows(table).to_pylist()) == EXPORT_ROWS
    assert_records(table, 3, rows=3, errors={})
    other = str(tmp_path / "cli")
    args = ["ingest", str(source), other, "--schema", EXPORT_DDL, "--no-progress",
            "--markers", "direct"]
    for key, value in EXPORT.items():
        args += ["--option", f"{key}={value}"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert _export_rows(data_rows(other).to_pylist()) == EXPORT_ROWS
    refused = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "no"),
                                       "--option", "dateFormat=QQQ dd"])
    assert refused.exit_code == 2 and "option dateFormat: 'QQQ dd'" in refused.output
    assert not (tmp_path / "no").exists()


@pytest.mark.spark
def test_replay_reads_values_as_the_ingest_did(spark: Any, tmp_path: Path) -> None:
    """Records that failed a check replay as the ingest read them: with the ingest's
    dateFormat a day written 27/11/2026 is a date again; without it, it fails its cast
    once more and nothing is written; an option that is not how values read is refused."""
    from click.testing import CliRunner

    from markerstore.cli import cli
    from markerstore.ingest.pipeline import ingest
    from tests.support.readback import data_rows

    source = tmp_path / "src"
    source.mkdir()
    (source / "e.csv").write_bytes(b"id,d,amount\n1,27/11/2026,5\n2,28/11/2026,-3\n"
                                   b"3,01/12/2026,-4\n")
    table = str(tmp_path / "t")
    result = ingest(str(source), table, schema="id BIGINT, d DATE, amount BIGINT",
                    checks={"positive": "amount > 0"}, spark=spark, markers="direct",
                    progress=False, options={"dateFormat": "dd/MM/yyyy"})
    assert result.error_records == {"check": 2}
    errors = table + "_errors"

    def replay(*more: str) -> Any:
        return CliRunner().invoke(cli, ["errortable", "replay", errors, "--where",
                                        "reason = 'check'", "--json", *more])

    plain = replay("--dry-run")
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.output)["written_rows"] == 0
    refused = replay("--option", "sep=;")
    assert refused.exit_code == 2 and "not sep" in refused.output
    done = replay("--option", "dateFormat=dd/MM/yyyy")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["written_rows"] == 2
    assert sorted((r["id"], r["d"]) for r in data_rows(table).to_pylist()) == [
        (1, dt.date(2026, 11, 27)), (2, dt.date(2026, 11, 28)), (3, dt.date(2026, 12, 1))]
