"""One `key=value` parser behind every repeatable KEY=VALUE flag of both CLIs."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from markerstore import Table
from markerstore.cli.errortable import cli as errortable_cli
from markerstore.cli.ingest import parse_checks, parse_options
from markerstore.cli.main import cli, parse_key_values, parse_storage_options


def test_pairs_keep_their_order_and_values_as_given() -> None:
    assert parse_key_values([" a =1", "b= x ", "c=", "d=e=f"], "--flag") == {
        "a": "1", "b": " x ", "c": "", "d": "e=f"}
    assert parse_key_values(["a=1", "a=2"], "--flag") == {"a": "2"}  # the last wins


@pytest.mark.parametrize(("pairs", "kwargs", "message"), [
    (["novalue"], {}, "--flag expects key=value, got 'novalue'"),
    (["=1"], {}, "--flag expects key=value, got '=1'"),
    (["a= "], {"need_value": True}, "--flag expects key=value, got 'a= '"),
    (["a=1", "a=2"], {"unique": True}, "--flag a is given twice"),
])
def test_a_bad_pair_is_a_usage_error_naming_the_flag(pairs: list[str], kwargs: dict[str, bool],
                                                    message: str) -> None:
    with pytest.raises(click.UsageError) as caught:
        parse_key_values(pairs, "--flag", **kwargs)
    assert caught.value.format_message() == message


def test_each_flag_parses_through_it() -> None:
    assert parse_storage_options(["a.b=1", "c=true", "d=text"]) == {
        "a": {"b": 1}, "c": True, "d": "text"}
    assert parse_options(("markerstore.write.conflict.mode = fail ",)) == {
        "markerstore.write.conflict.mode": " fail "}  # the option's parser reads " fail "
    assert parse_checks(("positive = amount > 0",)) == {"positive": "amount > 0"}
    for call, message in ((lambda: parse_storage_options(["x"]), "--storage-option expects"),
                          (lambda: parse_options(("x",)), "--option expects key=value"),
                          (lambda: parse_checks(("p=",)), "--check expects NAME=SQL_EXPR"),
                          (lambda: parse_checks(("p=1", "p=2")), "--check p is given twice")):
        with pytest.raises(click.UsageError, match=message):
            call()


@pytest.mark.parametrize(("pair", "key", "parsed"), [
    ("sep=\t", "sep", "\t"),  # a literal tab, as a shell passes $'sep=\t'
    ("nullValue= ", "nullValue", " "),
    ("emptyValue=  ", "emptyValue", "  "),
    ("nanValue= NaN ", "nanValue", " NaN "),
    (" dateFormat = dd/MM/yyyy", "dateFormat", " dd/MM/yyyy"),
])
def test_option_values_are_kept_as_given(pair: str, key: str, parsed: str) -> None:
    """A value's white space is the value's: a tab separator was stripped to nothing (and
    refused), a one-space nullValue silently became the default (empty)."""
    from markerstore import config

    options = parse_options((pair,))
    assert options == {key: parsed}
    assert config.resolve(options)[key] == parsed


def test_replay_options_keep_their_values() -> None:
    from markerstore.cli.errortable import _value_formats

    formats = _value_formats(("nanValue= none ", "positiveInf=\t+\t"))
    assert (formats.nan_value, formats.positive_inf) == (" none ", "\t+\t")


@pytest.mark.parametrize(("group", "args", "message"), [
    (cli, ["timeline", "{t}", "--storage-option", "novalue"],
     "--storage-option expects key=value, got 'novalue'"),
    (cli, ["serve", "--table", "{t}", "--option", "novalue"],
     "--option expects key=value, got 'novalue'"),
    (cli, ["ingest", "{t}/src", "{t}", "--option", "novalue"],
     "--option expects key=value, got 'novalue'"),
    (cli, ["ingest", "{t}/src", "{t}", "--check", "novalue"],
     "--check expects NAME=SQL_EXPR, got 'novalue'"),
    (errortable_cli, ["stats", "{t}", "--storage-option", "novalue"],
     "--storage-option expects key=value, got 'novalue'"),
])
def test_both_clis_refuse_a_bad_pair_with_one_line(tmp_path: Path, group: click.Group,
                                                  args: list[str], message: str) -> None:
    Table(str(tmp_path / "t")).start_commit(heartbeat=False)  # a table to point at
    url = str(tmp_path / "t")
    out = CliRunner().invoke(group, [a.format(t=url) for a in args])
    assert out.exit_code == 2, out.output
    assert message in out.output and out.output.strip().count("\n") == 0
