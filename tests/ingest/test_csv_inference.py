"""Schema inference of CSV: Spark's inferSchema rules (with preferDate, dateFormat,
timestampFormat, nullValue and the white space options), compared with Spark's own
inference; and the property that makes an inferred schema safe to write with: every
value of the sample reads as its column's type, so inferring never turns a record of
the sample into an error record."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from markerstore import config
from tests.support.ingest_run import run

INFERRED_CSV = (b"id,d,t,n,mixed,late\n"
                b"1,27/11/2026,11/27/2026 10:00,2021-01-01 10:11:12,27/11/2026,x\n"
                b"2,,11/28/2026 23:59,,soon,\n"
                b"3,01/01/2020,,,01/12/2026,31/02/2026\n")


@pytest.mark.parametrize("options, d, t", [
    ({"dateFormat": "dd/MM/yyyy", "timestampFormat": "MM/dd/yyyy HH:mm"},
     pa.date32(), pa.timestamp("us", tz="UTC")),
    ({"dateFormat": "dd/MM/yyyy"}, pa.date32(), pa.string()),
    ({"timestampFormat": "MM/dd/yyyy HH:mm"}, pa.string(), pa.timestamp("us", tz="UTC")),
    ({}, pa.string(), pa.string())])
def test_inference_reads_dates_and_timestamps_by_the_given_patterns(
        tmp_path: Path, options: dict[str, str], d: pa.DataType, t: pa.DataType) -> None:
    """Spark's preferDate inference: a text column whose every value (empty ones aside)
    reads by dateFormat is a DATE, else by timestampFormat a TIMESTAMP; a column where one
    value does not read (text, a day that does not exist) stays text; then every record
    reads with the schema inferred."""
    from markerstore.ingest.pipeline import _target_schema
    from markerstore.ingest.sources import list_tasks

    (tmp_path / "in.csv").write_bytes(INFERRED_CSV)
    settings = config.resolve(options)
    inferred = _target_schema(None, list_tasks(str(tmp_path / "in.csv")), {}, settings)
    assert inferred.field("d").type == d and inferred.field("t").type == t
    assert inferred.field("mixed").type == pa.string()
    assert inferred.field("late").type == pa.string()
    ddl = ", ".join(f"{f.name} {_ddl_type(f.type)}" for f in inferred)
    rows, errors = run(tmp_path / "again.csv", INFERRED_CSV, ddl, options=options)
    assert errors == [] and len(rows) == 3
    if d == pa.date32():
        assert {r["id"]: r["d"] for r in rows} == {
            1: dt.date(2026, 11, 27), 2: None, 3: dt.date(2020, 1, 1)}


def _ddl_type(arrow: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow):
        return "TIMESTAMP" if arrow.tz is not None else "TIMESTAMP_NTZ"
    if pa.types.is_decimal(arrow):
        return f"DECIMAL({arrow.precision},{arrow.scale})"
    return {pa.int64(): "BIGINT", pa.date32(): "DATE", pa.string(): "STRING",
            pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}[arrow]


# One column for each way Spark's CSV inference can type text by the date and time
# options (sql-data-sources-csv: inferSchema, preferDate, dateFormat, timestampFormat).
INFER_DATES = (
    b"id,iso_date,dmy,iso_ts,ts_frac,ts_z,mdy_hm,tod,mixed,bad_day,text,gaps\n"
    b"1,2026-11-27,27/11/2026,2026-11-27 10:00:00,2026-11-27 10:00:00.123,"
    b"2026-11-27T10:00:00Z,11/27/2026 10:00,10:00:00,2026-11-27,31/02/2026,x,\n"
    b"2,2026-01-02,02/01/2026,2026-01-02 11:30:00,2026-01-02 11:30:00.5,"
    b"2026-01-02T11:30:00+01:00,01/02/2026 23:59,23:59:59,2026-11-27 10:00:00,01/01/2026,"
    b"y,2026-11-27\n")
# And for numbers, booleans and the words that are no null (Spark's nullValue is "").
INFER_NUMBERS = (
    b"id,ints,big,dec,nan,inf,nullword,na,bools,bools_mixed,onezero,tf,neg,plus,exp,hex,"
    b"spaces,quoted_num,empty\n"
    b'1,1,99999999999999999999,1.5,NaN,Infinity,null,NA,true,TRUE,1,t,-3,+4,1e5,0x10, 7,"12",\n'
    b'2,2,5,2.25,1.0,-Infinity,5,3,false,False,0,f,-4,+5,2.5E-3,0x11,8 ,"13",\n')
# And for the DECIMAL(p,0) of integers past BIGINT, as Spark widens them.
INFER_DECIMALS = (
    b"id,past,with_int,with_long,neg,zeros,too_wide,with_fraction\n"
    b"1,99999999999999999999,1,3000000000,-99999999999999999999,"
    b"0009999999999999999999,123456789012345678901234567890123456789,1.5\n"
    b"2,123456789012345678901234,99999999999999999999,99999999999999999999,5,1,1,"
    b"99999999999999999999\n")
NO_TIME_OF_DAY = {"tod": ("timestamp", "string")}  # docs/INGEST.md: a time of day is text
SPACES = {"spaces": ("double", "string")}  # docs/INGEST.md: ` 1.5` is no number
LEADING_ZEROS = {"zeros": ("decimal(19,0)", "string")}  # docs/INGEST.md: codes with leading zeros


def _kind(name: str) -> str:
    return {"int": "bigint", "timestamp_ntz": "timestamp"}.get(
        name, name)


def _arrow_kind(arrow: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow):
        return "timestamp"
    if pa.types.is_decimal(arrow):
        return f"decimal({arrow.precision},{arrow.scale})"
    return {pa.int64(): "bigint", pa.date32(): "date", pa.string(): "string",
            pa.float64(): "double", pa.bool_(): "boolean"}.get(arrow, str(arrow))


@pytest.mark.spark
@pytest.mark.parametrize("data, options, differ", [
    (INFER_DATES, {}, NO_TIME_OF_DAY),
    (INFER_DATES, {"dateFormat": "dd/MM/yyyy"}, NO_TIME_OF_DAY),
    (INFER_DATES, {"dateFormat": "dd/MM/yyyy", "timestampFormat": "MM/dd/yyyy HH:mm"}, {}),
    (INFER_DATES, {"timestampFormat": "yyyy-MM-dd HH:mm:ss"}, {}),
    (INFER_DATES, {"timestampFormat": "MM/dd/yyyy HH:mm"}, {}),
    (INFER_NUMBERS, {}, SPACES),
    (INFER_NUMBERS, {"nullValue": "NA"}, SPACES),
    (INFER_NUMBERS, {"ignoreLeadingWhiteSpace": "true", "ignoreTrailingWhiteSpace": "true"},
     {}),
    (INFER_DECIMALS, {}, LEADING_ZEROS),
    (INFER_NUMBERS, {"inferSchema": "false"}, {}),
    (INFER_DATES, {"preferDate": "false"}, NO_TIME_OF_DAY),
    (INFER_DATES, {"preferDate": "false", "dateFormat": "dd/MM/yyyy"}, NO_TIME_OF_DAY)])
def test_inference_types_columns_as_spark_does(
        spark: Any, tmp_path: Path, data: bytes, options: dict[str, str],
        differ: dict[str, tuple[str, str]]) -> None:
    """Spark's inferSchema and the ingest's inference over the same file, with the same
    options, give every column the same type (Spark's INT and BIGINT alike), but for
    the differences the docs state. Then the file reads with the schema inferred and no
    error record: every value of the sample reads as its column's type."""
    from markerstore.ingest.pipeline import _target_schema
    from markerstore.ingest.sources import list_tasks

    source = tmp_path / "in.csv"
    source.write_bytes(data)
    frame = spark.read.options(**{"header": "true", "inferSchema": "true", **options}
                               ).csv(str(source))
    theirs = {f.name: _kind(f.dataType.simpleString()) for f in frame.schema}
    inferred = _target_schema(None, list_tasks(str(source)), {}, config.resolve(options))
    ours = {f.name: _arrow_kind(f.type) for f in inferred}
    assert list(ours) == list(theirs)
    assert {name: (theirs[name], ours[name]) for name in theirs
            if theirs[name] != ours[name]} == differ
    ddl = ", ".join(f"{f.name} {_ddl_type(f.type)}" for f in inferred)
    rows, errors = run(tmp_path / "again.csv", data, ddl, options=options)
    assert errors == [] and len(rows) == 2


# Field texts as they stand in a CSV file: every kind of value inference tells apart,
# the texts that are next to one (a sign, a zero, a space, a word that reads as null
# elsewhere), quoted ones and empty ones.
TOKENS = ["1", "-7", "+4", "007", "99999999999999999999", "-12345678901234567890123",
          "1234567890123456789012345678901234567890", "1.5", "-0.25", "1e5", "2.5E-3", "NaN",
          "Infinity", "-Infinity", "inf", "null", "NA", "true", "FALSE", "0", "t",
          "2026-11-27", "27/11/2026", "31/02/2026", "2026-11-27 10:00:00",
          "2026-11-27T10:00:00Z", "2026-11-27 10:00:00.123", "11/27/2026 10:00", "10:00:00",
          "0x10", " 7", "8 ", "x", "", '""', '"12"', '"a,b"', '"true"', '"NA"']
OPTION_SETS = [{}, {"dateFormat": "dd/MM/yyyy"}, {"timestampFormat": "MM/dd/yyyy HH:mm"},
               {"dateFormat": "dd/MM/yyyy", "timestampFormat": "yyyy-MM-dd HH:mm:ss"},
               {"nullValue": "NA"}, {"nullValue": "null", "emptyValue": "empty"},
               {"ignoreLeadingWhiteSpace": "true", "ignoreTrailingWhiteSpace": "true"}]


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(columns=st.lists(st.lists(st.sampled_from(TOKENS), min_size=3, max_size=3),
                        min_size=1, max_size=4),
       options=st.sampled_from(OPTION_SETS))
def test_an_inferred_schema_reads_every_record_it_was_inferred_from(
        tmp_path: Path, columns: list[list[str]], options: dict[str, str]) -> None:
    """Columns drawn from texts of every kind (and the ones next to them): the file
    ingested with the schema inferred from it keeps every record as a row, with no
    error record."""
    from markerstore.ingest.pipeline import _target_schema
    from markerstore.ingest.sources import list_tasks

    header = ",".join(["id"] + [f"c{i}" for i in range(len(columns))])
    records = [",".join([str(r)] + [c[r] for c in columns]) for r in range(3)]
    data = ("\n".join([header, *records]) + "\n").encode()
    source = tmp_path / "sample.csv"
    source.write_bytes(data)
    inferred = _target_schema(None, list_tasks(str(source)), {}, config.resolve(options))
    ddl = ", ".join(f"{f.name} {_ddl_type(f.type)}" for f in inferred)
    rows, errors = run(tmp_path / "again.csv", data, ddl, options=options)
    assert [e["context"].get("reason") for e in errors] == [] and len(rows) == 3, ddl


def test_each_files_header_is_left_out_of_the_sample(tmp_path: Path) -> None:
    """A folder of small files: the sample runs over several, and each file's header
    names the columns, never a value of them (the second file's header made every column
    text)."""
    from markerstore.ingest.infer import infer_schema
    from markerstore.ingest.sources import list_tasks

    for part in range(3):
        (tmp_path / f"part-{part}.csv").write_bytes(
            f"\n\nid,when\n{part},2026-11-2{part}\n".encode())
    schema = infer_schema(list_tasks(str(tmp_path)), None)
    assert schema == pa.schema([("id", pa.int64()), ("when", pa.date32())])


def _ddl(arrow: pa.DataType) -> str:
    """An inferred type as the DDL the ingest takes (nested too)."""
    if pa.types.is_list(arrow):
        return f"ARRAY<{_ddl(arrow.value_type)}>"
    if pa.types.is_struct(arrow):
        return "STRUCT<" + ", ".join(f"`{f.name}`: {_ddl(f.type)}" for f in arrow) + ">"
    return _ddl_type(arrow)


def _spark_string(arrow: pa.DataType) -> str:
    """An inferred type as Spark's simpleString, struct members sorted as Spark's JSON
    inference sorts them."""
    if pa.types.is_list(arrow):
        return f"array<{_spark_string(arrow.value_type)}>"
    if pa.types.is_struct(arrow):
        members = sorted(arrow, key=lambda f: f.name)
        return "struct<" + ",".join(f"{f.name}:{_spark_string(f.type)}" for f in members) + ">"
    return _arrow_kind(arrow)


# Every rule of Spark's JSON inference: each kind of value, numbers past BIGINT and past
# 38 digits, the merges (BIGINT with DOUBLE, with DECIMAL, with text, with a boolean),
# nulls only, empty objects and arrays, and members merged inside structs and arrays.
INFER_JSON = (
    b'{"i": 1, "big": 99999999999999999999, "huge": 1234567890123456789012345678901234567890,'
    b' "f": 1.5, "if": 1, "is": 1, "b": true, "n": null, "eo": {}, "st": {"x": null, "y": "a"},'
    b' "ai": [1, 2], "am": [1, "a"], "ae": [], "aeo": [{}], "sc": {"x": 1}, "ib": 1,'
    b' "nested": [{"k": 1}], "dec_big": 5}\n'
    b'{"i": 2, "big": 5, "huge": 1, "f": 2.0, "if": 2.5, "is": "x", "b": false, "n": null,'
    b' "eo": {}, "st": {"x": 3}, "ai": [3], "am": [2], "ae": [], "aeo": [], "sc": {"x": "s"},'
    b' "ib": true, "nested": [{"k": 2.5, "j": [1]}], "dec_big": 12345678901234567890123}\n')


# Spark drops a member that is an empty object, and reads JSON text into a STRING at any
# depth; the ingest keeps that member as text, and reads JSON text into a STRING column
# only, so a column with values that do not merge inside it is text as a whole.
JSON_DIFFERS = {"eo": (None, "string"), "aeo": (None, "string"),
                "sc": ("struct<x:string>", "string"), "am": ("array<string>", "string")}
# With primitivesAsString, every column with a number or boolean inside an array or
# struct is text as a whole, for the same reason.
PRIMITIVES_DIFFER = {"eo": (None, "string"), "aeo": (None, "string"),
                     **{name: (spark, "string") for name, spark in (
                         ("ai", "array<string>"), ("am", "array<string>"),
                         ("sc", "struct<x:string>"), ("st", "struct<x:string,y:string>"),
                         ("nested", "array<struct<j:array<string>,k:string>>"))}}


@pytest.mark.spark
@pytest.mark.parametrize("options, differ", [
    ({}, JSON_DIFFERS), ({"prefersDecimal": "true"}, JSON_DIFFERS),
    ({"primitivesAsString": "true"}, PRIMITIVES_DIFFER)])
def test_json_inference_types_columns_as_spark_does(spark: Any, tmp_path: Path,
                                                    options: dict[str, str],
                                                    differ: dict[str, Any]) -> None:
    """Spark's JSON inference and the ingest's over the same lines give every column the
    same type, but for the differences jsontypes.py states, and the lines read with the
    schema inferred as rows, with no error record."""
    from markerstore.ingest.infer import infer_schema
    from markerstore.ingest.sources import list_tasks

    source = tmp_path / "in.jsonl"
    source.write_bytes(INFER_JSON)
    theirs = {f.name: f.dataType.simpleString()
              for f in spark.read.options(**options).json(str(source)).schema}
    inferred = infer_schema(list_tasks(str(source)), None, options)
    ours = {f.name: _spark_string(f.type) for f in inferred}
    assert {name: (theirs.get(name), ours.get(name)) for name in {*theirs, *ours}
            if theirs.get(name) != ours.get(name)} == differ
    ddl = ", ".join(f"`{f.name}` {_ddl(f.type)}" for f in inferred)
    rows, errors = run(tmp_path / "again.jsonl", INFER_JSON, ddl, options=options)
    assert errors == [] and len(rows) == 2
    assert sorted(str(r["big"]) for r in rows) == ["5", "99999999999999999999"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.sampled_from([10**400, -(2**1024), 2**1023])  # past a double's range, and within
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), _JSON,
                                        min_size=1, max_size=3), min_size=1, max_size=4),
       options=st.sampled_from([{}, {"prefersDecimal": "true"},
                                {"primitivesAsString": "true"}]))
def test_an_inferred_json_schema_reads_every_record_it_was_inferred_from(
        tmp_path: Path, records: list[dict[str, Any]], options: dict[str, str]) -> None:
    """Generated objects (nesting, nulls, numbers of every size, text): with the schema
    inferred from them, every record is a row and none an error record."""
    import json

    from markerstore.errors import SchemaError
    from markerstore.ingest.infer import infer_schema
    from markerstore.ingest.sources import list_tasks

    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    source = tmp_path / "sample.jsonl"
    source.write_bytes(data)
    try:
        inferred = infer_schema(list_tasks(str(source)), None, options)
    except SchemaError as refused:  # only when no object has a member
        assert "no member" in str(refused) and not any(records)
        return
    ddl = ", ".join(f"`{f.name}` {_ddl(f.type)}" for f in inferred)
    rows, errors = run(tmp_path / "again.jsonl", data, ddl, options=options)
    assert [e["context"].get("reason") for e in errors] == [] and len(rows) == len(records), ddl
