"""A block of JSON lines read as columns (errortable.capture.jsonblock.parse_json_array) gives the
records, line numbers and error records of parse_json_block, byte for byte but uid and ts,
under every policy; the lines that fail are decided a distinct text at a time, and those
whose first character starts no JSON value without decoding them; their records are
built as columns (no RecordBuilder.build per record)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errortable
from errortable.capture import jsonblock
from errortable.capture import records as R
from errortable.capture.errorrows import json_strings
from errortable.capture.jsonblock import parse_json_array
from errortable.capture.parsing import ParseOptions, parse_json_block
from errortable.capture.records import UidSource
from errortable.config import ErrorTableConfig

PIECES = ["x", "abc", "1,2,3", '"a","b"', "{", "}", "[", "]", '{"a": 1}', '{"a": 1, "a": 2}',
          "null", "nul", "true", "tru", "-", "-x", "-1", "NaN", "Infinity", "-Infinity",
          "\ufeff", " ", "\t", "\u3000", "\u2028", "\x1c", "\x00", "\x07", "\\", '"', "é",
          "\U0001f600", '{"b": "\\ud800"}', "1e400", '{"a": [' + "[" * 600 + "]" * 600 + "]}",
          "[" * 513, "{" * 300 + "[" * 300, "<xml/>", "a,b\n", "x" * 2500, "'q'", "0", "01",
          "value", "line 1", "s3://in", "char 0)", "Expecting", "  ", "\n", "1.5", ".5",
          "e", "E+", "e-9", "99", "-0", "1e99", "12345678901234567890", "\r", "9" * 199]
CONTEXT = dict(task_attempt="t-1", source_file="s3://in/x", commit_time="20261122000000000",
               table_name="t", table_path="/w/t")


def _plain(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**{k: v for k, v in r.items() if k not in ("uid", "ts")},
             "context": list(dict(r["context"]).items())} for r in errors]


def _both(texts: list[str], config: ErrorTableConfig | None = None,
          options: ParseOptions | None = None, extra: dict[str, str] | None = None,
          offsets: bool = True) -> tuple[Any, Any]:
    ctx = errortable.CaptureContext(**CONTEXT, extra=extra or {})
    numbers = [7 + 3 * i for i in range(len(texts))]
    places = [100 + 11 * i for i in range(len(texts))] if offsets else None
    old = parse_json_block(texts, ctx, config=config, line_numbers=numbers, offsets=places,
                           options=options)
    new = parse_json_array(pa.array(texts, pa.large_string()), ctx, config=config,
                           line_numbers=np.array(numbers), offsets=places, options=options)
    return old, new


def _same(old: Any, new: Any) -> None:
    assert (new.records, new.line_numbers) == (old.records, old.line_numbers)
    assert _plain(new.errors.to_pylist()) == _plain(old.errors.to_pylist())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(st.lists(st.sampled_from(PIECES), max_size=4).map("".join), max_size=30),
       policy=st.sampled_from([None, {"drop_payload": True}, {"redact": ("a",)}]),
       strict=st.booleans(), offsets=st.booleans())
def test_a_block_reads_as_the_line_parser_reads_it(lines: list[str], policy: Any,
                                                   strict: bool, offsets: bool) -> None:
    config = None if policy is None else ErrorTableConfig(**policy)
    options = ParseOptions(allow_non_numeric_numbers=not strict)
    _same(*_both(lines, config, options, offsets=offsets))


def test_a_base_key_the_records_set_keeps_its_place() -> None:
    _same(*_both(["x", '{"a": 1}', "{"], extra={"sourceLine": "x", "other": "y"}))


@given(st.text(max_size=40))
def test_json_strings_are_pythons(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return  # no Arrow string holds a lone surrogate
    assert json_strings(pa.array([text, "", text])).to_pylist() == [
        R.to_json(text), R.to_json(""), R.to_json(text)]


def test_uid_arrays_are_the_uids_of_as_many_calls() -> None:
    one, other = UidSource(), UidSource()
    other._prefix, other._next, other._pid = one._prefix, one._next, one._pid
    assert one.array(5).to_pylist() + one.array(0).to_pylist() + one.array(3).to_pylist() == \
        other.many(5) + other.many(3)


def test_lines_are_decided_a_distinct_text_at_a_time(monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    """10,000 distinct lines that start no JSON value, or with a number, decode none;
    10,000 copies of one line that does decode it once; no error record is built one by
    one."""
    decoded: list[str] = []
    real = jsonblock.load_object

    def counting(text: str, *args: Any) -> Any:
        decoded.append(text)
        return real(text, *args)

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an error record built one by one")

    monkeypatch.setattr(jsonblock, "load_object", counting)
    monkeypatch.setattr(R.RecordBuilder, "build", never)
    garbage = [f"row {i}, not json" for i in range(10_000)]
    csv = [f"{i},name {i},2024-01-01" for i in range(10_000)]
    parsed = parse_json_array(pa.array(garbage + csv + ['"a","b"'] * 10_000
                                       + ['{"a": 1}'] * 3))
    assert sorted(decoded) == ['"a","b"', '{"a": 1}']
    assert parsed.errors.num_rows == 30_000 and parsed.records == [{"a": 1}] * 3
    assert parsed.line_numbers == [30_001, 30_002, 30_003]
    messages = parsed.errors.column("message").to_pylist()
    assert messages[0] == "JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    assert messages[10_000] == "JSONDecodeError: Extra data: line 1 column 2 (char 1)"
    assert messages[19_999] == "JSONDecodeError: Extra data: line 1 column 5 (char 4)"
    assert messages[-1] == "JSONDecodeError: Extra data: line 1 column 4 (char 3)"
    assert parsed.errors.column("record").to_pylist()[:2] == [
        json.dumps("row 0, not json"), json.dumps("row 1, not json")]


@pytest.mark.parametrize("policy", [{"drop_payload": True}, {"redact": ("a", "b")}])
def test_under_a_pii_policy_only_the_swept_rows_are_built_one_by_one(
        monkeypatch: pytest.MonkeyPatch, policy: dict[str, Any]) -> None:
    """A text whose spelling is inside the message or a context value is swept out of
    them, built one by one; the others as columns, the same records."""
    from errortable.capture import parsing

    built: list[str] = []
    real = parsing.failure_record

    def counting(builder: Any, base: Any, failure: Any) -> Any:
        built.append(failure.text)
        return real(builder, base, failure)

    lines = [f"not json {i}" for i in range(500)] + ["value", "s3://in", "col 'x'\tvalue"]
    old, _ = _both(lines, ErrorTableConfig(**policy))
    monkeypatch.setattr(jsonblock, "failure_record", counting)
    _, new = _both(lines, ErrorTableConfig(**policy))
    _same(old, new)
    assert built == ["value", "s3://in"]  # the third: no spelling inside them
    messages = [r["message"] for r in new.errors.to_pylist()]
    assert messages[-3] == "JSONDecodeError: Expecting [REDACTED]: line 1 column 1 (char 0)"
