"""The Validator: every row ends up written or in the error table, exactly once."""

from __future__ import annotations

import json
import pickle
import random

import pyarrow as pa
import pytest

from errortable import CaptureContext, Validator, parse_csv_lines, parse_json_lines
from markerstore.errors import ConfigError
from tests.support.errortable_writes import SCHEMA, batch, validator


def reasons(errors: list[dict]) -> list[str]:
    return [e["context"]["reason"] for e in errors]


def test_rows_in_equal_rows_written_plus_error_rows() -> None:
    source = batch(5, {"cast": 2, "key": 1, "check": 3, "partition": 1})
    good, errors = validator().split(source, {"commit_time": "20240101000000000"})
    assert good.num_rows + len(errors) == source.num_rows
    assert good.num_rows == 5 and good.schema == SCHEMA
    assert sorted(reasons(errors)) == ["cast", "cast", "check", "check", "check", "key",
                                       "partition"]
    assert all(int(v) > 0 for v in good.column("amount").to_pylist())


def test_exactly_the_failing_rows_are_found_in_a_large_batch() -> None:
    rng = random.Random(7)
    n = 20_000
    bad = set(rng.sample(range(n), 37))
    amounts = [f"oops{i}" if i in bad else str(i + 1) for i in range(n)]
    source = pa.table({"id": [f"k{i}" for i in range(n)], "amount": amounts,
                       "day": ["d"] * n})
    good, errors = validator().split(source, CaptureContext(first_offset=1000))
    assert good.num_rows == n - 37
    assert {int(e["context"]["sourceOffset"]) - 1000 for e in errors} == bad
    assert {json.loads(e["record"])["amount"] for e in errors} == {f"oops{i}" for i in bad}
    assert good.column("amount").to_pylist() == [i + 1 for i in range(n) if i not in bad]


def test_error_rows_carry_their_context() -> None:
    ctx = CaptureContext(commit_time="20240102030405006", table_name="events",
                         table_path="/lake/events", task_attempt="t3-a1",
                         source_file="in.json", first_line=10)
    source = pa.table({"id": ["a", "b"], "amount": ["1", "-4"], "day": ["d1", "d2"]})
    _, errors = validator().split(source, ctx)
    (error,) = errors
    context = error["context"]
    assert context["commitTime"] == "20240102030405006"
    assert context["tableName"] == "events" and context["tablePath"] == "/lake/events"
    assert context["taskAttempt"] == "t3-a1" and context["sourceFile"] == "in.json"
    assert context["sourceLine"] == "11" and context["recordKey"] == "b"
    assert context["partitionPath"] == "day=d2"
    assert context["reason"] == "check" and context["check"] == "positive_amount"
    assert error["message"].startswith("CheckFailed: check 'positive_amount' failed")
    assert json.loads(error["schema"])["fields"][1] == {"name": "amount", "type": "string",
                                                        "nullable": True}


def test_key_partition_and_null_checks() -> None:
    schema = pa.schema([pa.field("id", pa.string()), pa.field("n", pa.int32(), False),
                        pa.field("p", pa.string())])
    v = Validator(schema, key="id", partition_by=["p"])
    source = pa.table({"id": ["a", " ", None, "d", "e", "f", "g"],
                       "n": [1, 2, 3, None, 5, 6, 7],
                       "p": ["x", "x", "x", "x", None, "..", "ok"]})
    good, errors = v.split(source)
    assert good.column("id").to_pylist() == ["a", "g"]
    details = [(e["context"]["reason"], e["context"].get("column")) for e in errors]
    assert details == [("key", "id"), ("key", "id"), ("null", "n"), ("partition", "p"),
                       ("partition", "p")]


def test_checks_use_sql_check_semantics_and_runtime_errors_fail_the_row() -> None:
    schema = pa.schema([("code", pa.string()), ("amount", pa.int64())])
    v = Validator(schema, checks={"numeric_code": "CAST(code AS INTEGER) >= 0",
                                  "positive": "amount > 0"})
    source = pa.table({"code": ["1", "x", "3", None], "amount": [5, 5, -1, None]})
    good, errors = v.split(source)
    assert good.num_rows + len(errors) == 4
    assert good.column("code").to_pylist() == ["1", None]  # NULL passes a check
    by_check = {e["context"]["check"]: e for e in errors}
    assert set(by_check) == {"numeric_code", "positive"}
    assert "Conversion Error" in by_check["numeric_code"]["message"]


@pytest.mark.parametrize("checks, message", [
    ({"broken": "amount >"}, "check 'broken'.*not a valid SQL boolean expression"),
    ({"unknown": "price > 0"}, "check 'unknown'.*price"),
    ({"number": "amount + 1"}, "not BOOLEAN"),
    ({"aggregate": "count(*) > 0"}, "aggregate"),
    ({"sneaky": "true) FROM record; SELECT (1"}, "not one SQL expression"),
    ({"": "amount > 0"}, "non-empty name"),
])
def test_bad_checks_fail_at_construction(checks: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Validator(SCHEMA, checks=checks)


def test_bad_key_partition_and_columns_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="record key column 'nope'"):
        Validator(SCHEMA, key="nope")
    with pytest.raises(ConfigError, match="partition column"):
        Validator(SCHEMA, partition_by=["nope"])
    with pytest.raises(ConfigError, match="extra"):
        validator().split(pa.table({"id": ["a"], "amount": ["1"], "day": ["d"], "x": [1]}))
    lenient = validator(extra_columns="ignore")
    good, _ = lenient.split(pa.table({"id": ["a"], "amount": ["1"], "day": ["d"], "x": [1]}))
    assert good.schema == SCHEMA
    with pytest.raises(ConfigError, match="cannot be cast"):
        validator().split(pa.table({"id": ["a"], "amount": [[1]], "day": ["d"]}))


def test_validator_pickles_after_use() -> None:
    v = validator()
    v.split(batch(2, {"check": 1}))
    clone = pickle.loads(pickle.dumps(v))
    good, errors = clone.split(batch(2, {"check": 1}))
    assert good.num_rows == 2 and reasons(errors) == ["check"]


def test_json_lines_parse_errors_keep_file_and_line() -> None:
    lines = ['{"id": "a", "amount": 1, "day": "d"}', "", "{not json", "[1, 2]",
             b'{"id": "\xff"}', '{"id": "b", "amount": "7", "day": "d"}',
             '{"id": "c", "amount": "seven", "day": "d"}', '{"id": "e", "zzz": 1, "day": "d"}']
    parsed = parse_json_lines(lines, {"source_file": "s3://in/a.json"}, first_line=1)
    assert parsed.line_numbers == [1, 6, 7, 8]
    assert [e["context"]["sourceLine"] for e in parsed.errors] == ["3", "4", "5"]
    assert all(e["context"]["sourceFile"] == "s3://in/a.json" for e in parsed.errors)
    assert json.loads(parsed.errors[0]["record"]) == "{not json"
    good, errors = validator().split_records(parsed.records, {"source_file": "a.json"},
                                             line_numbers=parsed.line_numbers)
    assert good.column("amount").to_pylist() == [1, 7]
    assert [(e["context"]["reason"], e["context"]["sourceLine"]) for e in errors] == [
        ("cast", "7"), ("schema", "8")]
    assert good.num_rows + len(errors) + len(parsed.errors) == 7


def test_csv_lines_cast_text_and_report_bad_lines() -> None:
    schema = pa.schema([("id", pa.string()), ("amount", pa.int64()), ("day", pa.date32())])
    lines = ["id,amount,day", "a,1,2024-01-02", "b,,2024-01-03", "c,2", 'd,"3"4,2024-01-04',
             "e,x,2024-01-05", "f,4,not-a-date"]
    parsed = parse_csv_lines(lines, {"source_file": "in.csv"})
    assert [e["context"]["sourceLine"] for e in parsed.errors] == ["4", "5"]
    good, errors = Validator(schema, key="id").split_records(
        parsed.records, line_numbers=parsed.line_numbers)
    assert good.column("amount").to_pylist() == [1, None]
    assert [e["context"]["sourceLine"] for e in errors] == ["6", "7"]
    assert str(good.column("day")[0]) == "2024-01-02"
    assert json.loads(errors[0]["record"]) == {"id": "e", "amount": "x", "day": "2024-01-05"}


@pytest.mark.parametrize(("value", "target"), [
    (1.5, pa.int64()), (-0.5, pa.int32()), (float("nan"), pa.int64()), (True, pa.float64()),
    (False, pa.int64()), ("0x10", pa.int64()), ("0X1f", pa.uint8()),
])
def test_a_value_is_never_converted_into_another_one(value: object, target: pa.DataType
                                                     ) -> None:
    """What pa.array and Arrow's cast would take and the record does not say (a fraction
    truncated to an integer, a boolean as a number, hexadecimal text as an integer) is a
    cast error naming the value; its exact neighbours still convert."""
    schema = pa.schema([("v", target)])
    records = [{"v": value}, {"v": 1.0}, {"v": "12"}, {"v": 7}, {"v": None}]
    good, errors = Validator(schema).split_records(records, CaptureContext())
    assert good.column("v").to_pylist() == [1, 12, 7, None]
    (error,) = errors
    assert error["context"]["reason"] == "cast" and error["context"]["column"] == "v"
    assert str(value).lower().split(".")[0] in error["message"].lower()


def test_text_with_a_plus_sign_is_a_number() -> None:
    """'+5' is 5 for an integer column as '+1.5' is 1.5 for a double (Arrow refuses the
    first only); '+' before anything but digits still fails."""
    schema = pa.schema([("n", pa.int64()), ("d", pa.float64())])
    records = [{"n": "+5", "d": "+1.5"}, {"n": "+x", "d": "1"}, {"n": "+0x10", "d": "2"}]
    good, errors = Validator(schema).split_records(records, CaptureContext())
    assert good.to_pylist() == [{"n": 5, "d": 1.5}]
    assert [e["context"]["reason"] for e in errors] == ["cast", "cast"]


def test_an_integer_for_a_double_is_its_nearest_double() -> None:
    """As 0.1 or 123456789012345678901234567890 are: 2**53 + 1 is 2**53 (pyarrow refused
    it); an integer past the double range is a cast error, never infinity."""
    schema = pa.schema([("d", pa.float64())])
    records = [{"d": 2**53 + 1}, {"d": 10**400}, {"d": 3}]
    good, errors = Validator(schema).split_records(records, CaptureContext())
    assert good.column("d").to_pylist() == [2.0**53, 3.0]
    assert [e["context"]["reason"] for e in errors] == ["cast"]
