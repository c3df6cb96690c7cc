"""Error record building: fingerprints, capped stack traces, PII."""

from __future__ import annotations

import datetime as dt
import decimal
import json

from errortable import ErrorTableConfig, RecordBuilder, fingerprint, normalise
from errortable.capture import records as R


def test_normalise_replaces_variable_parts() -> None:
    a = normalise("Could not convert 'abc' with type str at row 17 (id 3f2b1c9e-1111-2222-"
                  "3333-444455556666, ptr 0x7ffde)")
    b = normalise("Could not convert 'zz9' with type str at row 90210 (id 0a2b1c9e-aaaa-bbbb-"
                  "cccc-ddddeeeeffff, ptr 0x1)")
    assert a == b
    assert "<str>" in a and "<n>" in a and "<uuid>" in a and "<hex>" in a


def test_fingerprint_groups_repeated_failures_and_splits_different_ones() -> None:
    builder = RecordBuilder()

    def fp(exc: BaseException) -> str:
        return builder.from_exception(exc)["context"]["fingerprint"]

    assert fp(ValueError("bad value 'x' in row 1")) == fp(ValueError("bad value 'y' in row 2"))
    assert fp(ValueError("bad value 'x'")) != fp(TypeError("bad value 'x'"))
    assert fingerprint("check", "positive") == fingerprint("check", "positive")
    assert fingerprint("check", "positive") != fingerprint("check", "not_null")
    assert len(fingerprint("cast", "amount:int64")) == 16


def test_stack_trace_is_capped_keeping_the_innermost_frames() -> None:
    def deep(n: int) -> None:
        if n == 0:
            raise KeyError("innermost")
        deep(n - 1)

    try:
        deep(60)
    except KeyError as exc:
        error = exc
    capped = RecordBuilder(ErrorTableConfig(stacktrace_max_chars=500)).from_exception(error)
    message = capped["message"]
    assert message.startswith("KeyError: 'innermost'\n")
    assert "chars of stack trace dropped" in message
    trace = message.split("\n", 1)[1]
    assert len(trace) < 600 and "raise KeyError" in trace
    none = RecordBuilder(ErrorTableConfig(stacktrace_max_chars=0)).from_exception(error)
    assert none["message"] == "KeyError: 'innermost'"
    huge = R.format_message("E", "x" * 10_000, None, 100)
    assert len(huge) < R.HEADLINE_MAX_CHARS + 100


def test_redaction_of_nested_paths_lists_and_wildcards() -> None:
    record = {"email": "a@b.c", "address": {"street": "Main 1", "city": "X"},
              "orders": [{"card": "4111", "sku": 1}, {"card": "5500", "sku": 2}],
              "meta": {"k1": "v1", "k2": None}, "phone": None}
    redacted = R.redact(record, ["email", "address.street", "orders.card", "meta.*",
                                 "phone", "missing.path"])
    assert redacted == {"email": R.REDACTED, "address": {"street": R.REDACTED, "city": "X"},
                        "orders": [{"card": R.REDACTED, "sku": 1},
                                   {"card": R.REDACTED, "sku": 2}],
                        "meta": {"k1": R.REDACTED, "k2": None}, "phone": None}
    assert record["email"] == "a@b.c" and record["orders"][0]["card"] == "4111"


def test_pii_policies_apply_to_payload_and_message() -> None:
    record = {"email": "a@b.c", "amount": "x"}
    redacting = RecordBuilder(ErrorTableConfig(redact=("email",)))
    row = redacting.build(reason="cast", detail="email", error_class="ArrowInvalid",
                          text="Could not convert 'a@b.c'", record=record, columns=["email"])
    assert json.loads(row["record"]) == {"email": R.REDACTED, "amount": "x"}
    assert "a@b.c" not in row["message"] and row["context"]["payload"] == "redacted"
    raw = redacting.build(reason="parse", detail="d", error_class="E", text="t",
                          record="{bad json with a@b.c")
    assert raw["record"] is None and "cannot be redacted" in raw["context"]["payload"]
    dropping = RecordBuilder(ErrorTableConfig(drop_payload=True))
    row = dropping.from_exception(ValueError("value 'a@b.c' is bad"), record=record)
    assert row["record"] is None and "a@b.c" not in row["message"]
    assert row["context"]["payload"] == "dropped"


def test_record_shape_and_json_of_odd_values() -> None:
    row = RecordBuilder().build(
        reason="cast", detail="d", error_class="E", text="t", schema="{}",
        record={"b": b"\x00\x01", "d": dt.date(2024, 1, 2), "n": decimal.Decimal("1.50")},
        context={"commitTime": "20240101000000000"})
    assert set(row) == {"uid", "ts", "schema", "record", "message", "context"}
    assert json.loads(row["record"]) == {"b": "AAE=", "d": "2024-01-02", "n": "1.50"}
    assert float(row["ts"]) > 1.6e9
    assert row["context"]["reason"] == "cast" and row["context"]["commitTime"]
    raw = RecordBuilder().build(reason="parse", detail="d", error_class="E", text="t",
                                record="not json {")
    assert json.loads(raw["record"]) == "not json {"
    assert raw["context"]["recordFormat"] == "raw"


def test_redacted_fields_are_hidden_in_key_and_partition_context() -> None:
    builder = RecordBuilder(ErrorTableConfig(redact=("email", "region")))
    row = builder.build(reason="check", detail="c", error_class="E", text="t",
                        record={"email": "a@b.c", "region": "eu"},
                        context={"recordKey": "a@b.c", "recordKeyField": "email",
                                 "partitionPath": "region=eu/day=1"})
    assert row["context"]["recordKey"] == R.REDACTED
    assert row["context"]["partitionPath"] == f"region={R.REDACTED}/day=1"
    other = RecordBuilder(ErrorTableConfig()).build(
        reason="check", detail="c", error_class="E", text="t", record={"email": "a@b.c"},
        context={"recordKey": "a@b.c", "recordKeyField": "email"})
    protected = builder.protect(other)
    assert protected["context"]["recordKey"] == R.REDACTED
    assert json.loads(protected["record"]) == {"email": R.REDACTED}
    assert builder.protect(protected) is protected  # applied once


def test_uid_sources_copied_into_tasks_do_not_collide() -> None:
    import pickle

    from errortable.capture.records import UidSource

    source = UidSource()
    copies = [pickle.loads(pickle.dumps(source)) for _ in range(3)]
    uids = [copy() for copy in copies for _ in range(5)] + [source() for _ in range(5)]
    assert len(set(uids)) == len(uids)
