"""`payload.redact` matches keys as users mean them: `payload.redact=email` protects a
key spelled `Email`, `EMAIL` or `email ` (exactly the records that fail as "not in the
target schema"), at any depth, and in every part of the error record (record, message,
context, stack trace)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errortable import ErrorTableConfig, RecordBuilder, Validator
from errortable.capture.pii import REDACTED, redact, secrets_of
from tests.security.test_redaction import TOKEN, leaked

SCHEMA = pa.schema([("id", pa.string()), ("email", pa.string()), ("note", pa.string())])
POLICY = ErrorTableConfig(redact=("email",))


@st.composite
def spellings(draw: st.DrawFn, name: str = "email") -> str:
    """`name` in any case, with whitespace around it."""
    cased = "".join(c.upper() if draw(st.booleans()) else c for c in name)
    space = st.text(st.sampled_from(" \t\n\u00a0\u2003"), max_size=3)
    return draw(space) + cased + draw(space)


def nested(value: Any, keys: list[str], as_list: list[bool]) -> Any:
    """`value` under the keys given (outermost first), some levels inside a list."""
    for key, in_list in zip(reversed(keys), reversed(as_list)):
        value = {key: value, "other": "plain"}
        if in_list:
            value = [value, {"unrelated": 1}]
    return value


@pytest.mark.parametrize("key", ["Email", "EMAIL", "email ", " eMail\t"])
def test_a_key_the_schema_does_not_know_is_redacted_all_the_same(key: str) -> None:
    validator = Validator(SCHEMA, key="id", config=POLICY)
    _, errors = validator.split_records([{"id": "k1", key: f"jane.{TOKEN}@example.com"}])
    assert len(errors) == 1 and "not in the target schema" in errors[0]["message"]
    assert not leaked(errors), errors
    assert json.loads(errors[0]["record"])[key] == REDACTED


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=spellings(), path_spelling=spellings(),
       outer=st.lists(st.sampled_from(["profile", "Contact", "x y", "data"]), max_size=4),
       lists=st.lists(st.booleans(), min_size=4, max_size=4))
def test_any_spelling_at_any_depth_in_every_part(key: str, path_spelling: str,
                                                 outer: list[str], lists: list[bool]) -> None:
    secret = f"{TOKEN}-{key.strip()}"
    record = {"id": "k1", "note": "n", **{"wrapper": nested({key: secret}, outer, lists)}}
    assert redact(record, [path_spelling]) != record
    assert secret in secrets_of(record, [path_spelling])
    builder = RecordBuilder(ErrorTableConfig(redact=(path_spelling,)))
    row = builder.build(reason="schema", detail="x", error_class="SchemaError",
                        text=f"bad value {secret!r}", record=record,
                        trace=f"Traceback ...\nValueError: {secret}\n",
                        context={"sourceFile": f"/data/{secret}.json"}, columns=["wrapper"])
    assert not leaked([row]), row
    assert json.loads(row["record"])["id"] == "k1" and REDACTED in row["record"]


def test_other_keys_and_nulls_are_kept() -> None:
    record = {"Emails": "a-list", "e mail": "other", "email": None,
              "user": {"EMAIL ": "x@y.z", "name": "Jane"}}
    assert redact(record, ["email"]) == {"Emails": "a-list", "e mail": "other",
                                         "email": None,
                                         "user": {"EMAIL ": REDACTED, "name": "Jane"}}
    assert redact(record, ["USER.Email"]) == {**record, "user": {"EMAIL ": REDACTED,
                                                                 "name": "Jane"}}


def test_a_record_deeper_than_the_interpreter_recurses_is_redacted() -> None:
    record: Any = {"Email": TOKEN}
    for _ in range(5000):
        record = {"d": record}
    redacted = redact(record, ["email"])
    for _ in range(5000):
        redacted = redacted["d"]
    assert redacted == {"Email": REDACTED}
    assert secrets_of(record, ["email"]) == [TOKEN]
