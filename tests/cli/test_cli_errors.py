"""Every failure of both commands is one line on stderr with the right exit code.

The walk below discovers every subcommand from the click groups (a new command is covered
as soon as it is registered) and calls each with bad arguments: a table path with no
table, a regular file as the table, bad option values, an unknown flag, no arguments.
Each must exit 2 with one line naming what was wrong, and never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from markerstore import Table
from markerstore.cli.errortable import cli as errortable_cli
from markerstore.cli.main import DEBUG_ENV, OneLineGroup
from markerstore.cli.main import cli as markerstore_cli
from tests.support.files import marked_write

# Where a table is named: arguments and options with these parameter names.
TABLE_PARAMS = {"table", "table_path", "path", "target"}
# Tables a command creates: a missing one is fine there (a regular file never is).
CREATED = {("ingest", "table")}
# Good values for the other required parameters (a new one must be added here).
GOOD = {"instant": "20240101000000000", "query": "SELECT 1", "sql": "SELECT 1",
        "source": "{source}", "older_than": "30d", "where": "true"}
# Bad values of free-text options that are parsed (beyond click's own types).
BAD_TEXT = {"storage_options": ("novalue", "key=value"),
            "options": ("no.such.option=1", "unknown option"),
            "checks": ("broken=amount >", "not a valid SQL boolean expression"),
            "older_than": ("99999999999d", "too long")}


@dataclass
class Case:
    prog: str
    group: click.Group
    args: list[str]
    expect: str  # a word the one line must hold

    def __str__(self) -> str:
        return f"{self.prog} {' '.join(self.args)}"


def commands(group: click.Group, prefix: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from commands(command, prefix + (name,))
        else:
            yield prefix + (name,), command


def flag(param: click.Parameter) -> str:
    return next(o for o in param.opts if o.startswith("--"))


def argv(path: tuple[str, ...], command: click.Command, values: dict[str, str]) -> list[str]:
    """The command line with `values` by parameter name; required ones must have one."""
    args = list(path)
    for param in command.params:
        value = values.get(param.name or "")
        if value is None:
            assert not param.required, f"{' '.join(path)}: add a good value for {param.name}"
            continue
        if isinstance(param, click.Argument):
            args.append(value)
        else:
            args += [flag(param), value]
    return args


def cases(places: dict[str, str]) -> Iterator[Case]:
    for prog, group in (("markerstore", markerstore_cli), ("errortable", errortable_cli)):
        for path, command in commands(group):
            yield from command_cases(prog, group, path, command, places)


def command_cases(prog: str, group: click.Group, path: tuple[str, ...],
                  command: click.Command, places: dict[str, str]) -> Iterator[Case]:
    good = {k: v.format(**places) for k, v in GOOD.items()}
    tables = [p.name for p in command.params if p.name in TABLE_PARAMS]
    for name in tables:
        base = {**good, **{t: places["new" if (path[-1], t) in CREATED else "table"]
                           for t in tables}}
        if (path[-1], name) not in CREATED:
            yield Case(prog, group, argv(path, command, {**base, name: places["missing"]}),
                       "no markerstore table at")
        yield Case(prog, group, argv(path, command, {**base, name: places["file"]}),
                   "it is a file")
    base = {**good, **{t: places["new" if (path[-1], t) in CREATED else "table"]
                       for t in tables if t != "target"}}
    for param in command.params:
        bad = bad_value(param, places)
        if bad is not None:
            yield Case(prog, group, argv(path, command, {**base, param.name or "": bad[0]}),
                       bad[1])
    yield Case(prog, group, [*path, "--no-such-flag"], "no such option")
    if any(p.required for p in command.params):
        yield Case(prog, group, list(path), "Missing")


def bad_value(param: click.Parameter, places: dict[str, str]) -> tuple[str, str] | None:
    if isinstance(param.type, (click.IntRange, click.types.IntParamType, click.Choice,
                               click.types.FloatParamType)) and not param.is_flag:
        return "bogus", "bogus"
    if isinstance(param.type, click.Path):
        if not param.type.file_okay:
            return places["file"], "is a file"
        if not param.type.dir_okay:
            return places["dir"], "is a directory"
    if param.name in BAD_TEXT:
        return BAD_TEXT[param.name]
    return None


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli")
    table = Table(str(root / "table"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["d=1/a.parquet"])
    table.commit(instant, [{"path": "d=1/a.parquet", "rows": 1}])
    (root / "a-file").write_text("not a table\n")
    (root / "source.json").write_text('{"id": 1}\n')
    (root / "a-dir").mkdir()
    return {"table": table.path, "missing": str(root / "missing"), "file": str(root / "a-file"),
            "new": str(root / "new-table"), "source": str(root / "source.json"),
            "dir": str(root / "a-dir")}


def invoke(group: click.Group, prog: str, args: list[str]) -> Result:
    return CliRunner().invoke(group, args, prog_name=prog, catch_exceptions=False)


def assert_one_line(result: Result, prog: str, code: int, expect: str) -> None:
    lines = result.stderr.splitlines()
    assert result.exit_code == code, (result.exit_code, result.output)
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), result.stderr
    assert "Traceback" not in result.output, result.output
    assert expect.lower() in lines[0].lower(), lines[0]
    assert result.stdout == ""


def test_every_subcommand_gives_one_line_on_bad_arguments(places: dict[str, str]) -> None:
    all_cases = list(cases(places))
    covered = {c.args[0] if c.prog == "markerstore" else f"errortable {c.args[0]}"
               for c in all_cases}
    assert {"timeline", "markers", "rollback", "sql", "sweep", "serve", "ingest", "options",
            "demo", "errortable"} <= covered
    assert {"errortable query", "errortable replay", "errortable expire"} <= covered
    failures = []
    for case in all_cases:
        result = invoke(case.group, case.prog, case.args)
        try:
            assert_one_line(result, case.prog, 2, case.expect)
        except AssertionError as exc:
            failures.append(f"{case}: {exc}")
    assert not failures, "\n".join(failures)
    assert len(all_cases) > 60
    assert not Path(places["new"]).exists()  # a refused ingest created nothing


@pytest.mark.parametrize("args, expect", [
    (["timeline", ""], "bad table path"),
    (["timeline", "nosuchproto://x/y"], "Protocol not known"),
    (["sql", "{table}", ""], "empty query"),
    (["sql", "{table}", ";"], "empty query"),
    (["rollback", "{table}", "not-an-instant"], "not-an-instant"),
    (["markers", "{table}", "20240101000000000"], "20240101000000000"),
    (["errortable", "stats", "{missing}"], "not an error table"),
    (["errortable", "stats", "{table}"], "not an error table"),
    (["errortable", "replay", "{table}", "--where", "true", "--target", "{missing}"],
     "no markerstore table at"),
])
def test_bad_paths_and_queries(places: dict[str, str], args: list[str], expect: str) -> None:
    result = invoke(markerstore_cli, "markerstore", [a.format(**places) for a in args])
    assert_one_line(result, "markerstore", 2, expect)


def test_a_stray_file_in_a_marker_folder_is_a_failed_operation(tmp_path: Path) -> None:
    """Exit 2 is for bad arguments; what a table holds is never the caller's mistake."""
    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    marked_write(table, instant, ["p=1/a.parquet"])
    (tmp_path / "t" / ".markerstore" / "markers" / instant / "p=1" / "stray.txt").write_text("")
    for args in (["markers", table.path, instant], ["rollback", table.path, instant, "--force"],
                 ["sql", table.path, "SELECT count(*) FROM markers"]):
        result = invoke(markerstore_cli, "markerstore", args)
        assert_one_line(result, "markerstore", 1, "stray.txt")


def test_an_unexpected_error_is_one_line_with_a_hint(places: dict[str, str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from markerstore import table as table_module

    def broken(self: Table) -> None:
        raise KeyError("something unforeseen")

    monkeypatch.setattr(table_module.Table, "timeline", broken)
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    result = invoke(markerstore_cli, "markerstore", ["timeline", places["table"]])
    assert_one_line(result, "markerstore", 1, "unexpected KeyError: 'something unforeseen'")
    assert f"{DEBUG_ENV}=1" in result.stderr
    monkeypatch.setenv(DEBUG_ENV, "1")
    with pytest.raises(KeyError, match="something unforeseen"):
        invoke(markerstore_cli, "markerstore", ["timeline", places["table"]])


def test_the_errortable_group_is_the_same_one_line_group() -> None:
    assert isinstance(errortable_cli, OneLineGroup) and isinstance(markerstore_cli,
                                                                   OneLineGroup)


@pytest.mark.parametrize("args, expect", [
    (["--option", "markerstore.no.such=1"], "unknown option"),
    (["--option", "markerstore.markers.batch.interval_ms=soon"], "interval_ms"),
    (["--check", "positive=amount >"], "not a valid SQL boolean expression"),
    (["--check", "two=amount > 0) AS v; SELECT (1"], "not one SQL expression"),
])
def test_ingest_refuses_bad_options_and_checks_before_spark(places: dict[str, str],
                                                            args: list[str],
                                                            expect: str) -> None:
    """Refused before Spark (or even pyspark) is imported: a fresh process that never
    loads pyspark."""
    code = ("import sys\nfrom markerstore.cli.main import cli\n"
            "try:\n    cli.main(sys.argv[1:], prog_name='markerstore')\n"
            "except SystemExit as exc:\n"
            "    print(exc.code, 'pyspark' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code, "ingest", places["source"],
                          places["new"], *args], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.stdout.split() == ["2", "False"], (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and expect in out.stderr
    assert not Path(places["new"]).exists()


@pytest.mark.parametrize("content", [b"", b"PAR1 truncated"])
def test_an_unreadable_segment_is_one_line_and_exit_1(tmp_path: Path, content: bytes) -> None:
    """A truncated or empty Parquet segment raised DuckDB's own exception with a traceback."""
    from markerstore.markers.base import BATCHED, ensure_marker_type, marker_folder
    from markerstore.markers.segments import segment_name

    table = Table(str(tmp_path / "t"))
    instant = table.start_commit(heartbeat=False)
    ensure_marker_type(table.storage, instant, BATCHED)
    table.storage.put(f"{marker_folder(table.storage, instant)}/{segment_name(0, 'parquet')}",
                      content)
    for args in (["markers", table.path, instant],
                 ["sql", table.path, "SELECT count(*) FROM markers"]):
        result = invoke(markerstore_cli, "markerstore", args)
        assert_one_line(result, "markerstore", 1, "")
