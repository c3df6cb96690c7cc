"""A value the PII policy protects never reaches an error record, whatever it holds.

The attack: a source value that fails its cast and holds a quote (``ab'SECRETPII4242``),
with ``payload.drop`` or ``payload.redact=<column>``. A redaction that finds quoted values
in the message with a pattern is split by the quote inside the value, and the rest of the
value is stored. Here every value carries a token, and no stored field may hold it: not
`record`, not `message` (text and stack trace), not `context`; with hostile characters
around it (quotes, backslashes, newlines, unicode), as a substring of another field, very
long, or quoted the way DuckDB quotes it in its own messages.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errortable
from errortable import ErrorTableConfig, RecordBuilder, Validator
from errortable.capture.parsing import parse_csv_lines, parse_json_lines
from markerstore import Table
from tests.support.errortable_writes import full_write
from tests.support.locations import Location

TOKEN = "SECRETPII4242"
SCHEMA = pa.schema([("id", pa.string()), ("amount", pa.int64()), ("note", pa.string())])
POLICIES = {"drop": ErrorTableConfig(drop_payload=True),
            "redact": ErrorTableConfig(redact=("amount", "note"))}
# Around the token: every kind of character a message might quote or escape differently.
HOSTILE = st.text(st.sampled_from("'\"\\\n\r\t `$%{}[]()ß日本\u2028\x85\x00\x1b;,: a1"),
                  max_size=12)


def leaked(rows: list[dict[str, Any]]) -> list[str]:
    """The stored fields of `rows` that hold the token, in any spelling."""
    found = []
    for row in rows:
        for spelled in (json.dumps(row, ensure_ascii=False, default=str),
                        json.dumps(row, default=str)):
            if TOKEN in spelled:
                found.append(spelled)
    return found


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_quote_inside_a_cast_failing_value_does_not_split_its_redaction(policy: str) -> None:
    validator = Validator(SCHEMA, key="id", config=POLICIES[policy])
    _, errors = validator.split_records([{"id": "k1", "amount": f"ab'{TOKEN}", "note": "n"}])
    assert len(errors) == 1
    assert not leaked(errors), errors
    assert "cannot cast column 'amount' to int64" in errors[0]["message"]


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=HOSTILE, after=HOSTILE, long=st.booleans())
def test_no_part_of_a_protected_value_survives_whatever_it_holds(
        policy: str, before: str, after: str, long: bool) -> None:
    secret = before + TOKEN + after + ("x" * 5000 if long else "")
    records = [
        {"id": "k1", "amount": secret, "note": "plain"},               # the cast fails
        {"id": f"key-{secret}-copy", "amount": secret, "note": None},  # copied into the key
        {"id": "k3", "amount": "7", "note": secret},                   # a check raises on it
    ]
    validator = Validator(SCHEMA, key="id", config=POLICIES[policy],
                          checks={"numeric_note": "CAST(note AS INTEGER) > 0"})
    _, errors = validator.split_records(records)
    assert len(errors) == 3
    assert not leaked(errors), errors


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_an_exception_quoting_the_value_keeps_its_frames_not_its_text(policy: str) -> None:
    secret = f"o'brien\"\\{TOKEN}\n"
    builder = RecordBuilder(POLICIES[policy])

    def handle(record: dict[str, Any]) -> None:
        try:
            record["missing"]
        except KeyError as exc:
            raise ValueError(f"cannot handle {record['amount']} (unquoted)") from exc

    try:
        handle({"amount": secret})
    except ValueError as exc:
        row = builder.from_exception(exc, record={"amount": secret, "id": "k"})
    assert not leaked([row]), row
    assert "in handle" in row["message"] and "ValueError" in row["message"]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_rows_built_elsewhere_are_protected_on_the_way_in(policy: str) -> None:
    plain = Validator(SCHEMA, key="id")
    _, errors = plain.split_records([{"id": f"a-ab'{TOKEN}", "amount": f"ab'{TOKEN}",
                                      "note": None}])
    assert leaked(errors)  # the plain builder keeps everything
    protected = [RecordBuilder(POLICIES[policy]).protect(row) for row in errors]
    assert not leaked(protected), protected


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_lines_that_do_not_parse_keep_no_part_of_the_line(policy: str) -> None:
    config = POLICIES[policy]
    lines = [f'{{"amount": "ab\'{TOKEN}", broken'.encode(),
             f'{{"amount": "{TOKEN}\xff"}}'.encode("latin-1"), f'["{TOKEN}"]'.encode()]
    errors = parse_json_lines(lines, config=config).errors
    errors += parse_csv_lines(["id,amount", f'k,"ab{TOKEN}"x', f"k,{TOKEN},extra"],
                              config=config).errors
    assert len(errors) == 5
    assert not leaked(errors), errors
    assert any("expected a JSON object, got list" in e["message"] for e in errors)


@pytest.mark.parametrize("policy", ["drop", "redact"])
def test_nothing_stored_in_the_error_table_holds_the_value(local_where: Location,
                                                            policy: str) -> None:
    """End to end: a write whose error table has the policy, then every stored row."""
    option = {"drop": ("markerstore.write.error.table.payload.drop", "true"),
              "redact": ("markerstore.write.error.table.payload.redact", "amount")}[policy]
    where = local_where
    target = Table(where.url, where.storage_options)
    source = pa.table({"id": [f"k-ab'{TOKEN}-x", "k2"], "amount": [f"ab'{TOKEN}", "3"],
                       "day": ["2024-01-01", "2024-01-01"]})
    write = full_write(target, [source], dict([option]))
    assert write.error_rows == 1
    rows = errortable.read(where.url, where.storage_options).to_arrow_table().to_pylist()
    assert len(rows) == 1
    assert not leaked(rows), rows
