"""The `markerstore` command: a click group; each command prints text or `--json`.

Every failure is one line on stderr: bad arguments (a bad option, a path with no table,
SQL the sandbox refuses) exit 2; a failed operation or a table that cannot be read exits 1;
an unexpected error exits 1 too, and ``MARKERSTORE_DEBUG=1`` shows its traceback.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from markerstore._optional import import_optional
from markerstore.errors import (
    ConfigError,
    InstantNotFoundError,
    MarkerStoreError,
    SqlInterruptedError,
    SqlRefusedError,
    TableNotFoundError,
)
from markerstore.option_values import json_or_text
from markerstore.render.text import fields_lines, table_lines, visible
from markerstore.table import Table
from markerstore.timeline.timeline import META_DIR

# Each command and the module that defines it (with `register(group)`), imported when the
# command is first looked up: `markerstore serve` never imports errortable, pandas or
# pyspark.
COMMANDS = {
    **dict.fromkeys(("timeline", "markers", "rollback", "sql", "options"),
                    "markerstore.cli.core"),
    "serve": "markerstore.cli.serve",
    "sweep": "markerstore.cli.sweep",
    "expire": "markerstore.cli.expire",
    "verify": "markerstore.cli.verify",
    "report": "markerstore.cli.report",
    "ingest": "markerstore.cli.ingest",
    "demo": "markerstore.cli.demo",
    "errortable": "markerstore.cli.errortable",
}

USAGE_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError, InstantNotFoundError, TableNotFoundError, SqlRefusedError, click.UsageError)
# ConfigError covers bad options, schemas, sources and checks: all bad input, exit 2. An
# InvalidMarkerError or a CorruptTableError comes from what a table holds: exit 1.
DEBUG_ENV = "MARKERSTORE_DEBUG"
SANDBOX_HINT = ("the SQL sandbox reads only the table's views; rerun with --unsafe-sql for "
                "DuckDB's full engine")


def _duckdb_usage_errors() -> tuple[type[BaseException], ...]:
    import duckdb

    return (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
            duckdb.PermissionException)


def _table_content_errors() -> tuple[type[BaseException], ...]:
    """What a table holds is bad: never the caller's arguments, so exit 1 even where the
    class also subclasses ValueError."""
    import markerstore.errors as errors

    return (errors.InvalidMarkerError, errors.MarkerTypeError, errors.CorruptTableError)


def _debug() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


class _Interrupted(Exception):
    """Ctrl-C in a command (click would print a blank line before its own "Aborted")."""


class OneLineGroup(click.Group):
    """A group whose errors are one line on stderr: exit 2 for bad input, 1 otherwise.
    An unexpected exception is one line too, with a hint: set MARKERSTORE_DEBUG=1 for its
    traceback."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:  # parsing (and --help) imports the commands' modules: it takes a while
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Interrupted() from None

    def main(self, args: Sequence[str] | None = None,  # type: ignore[override]
             prog_name: str | None = None, **extra: Any) -> Any:
        prog = prog_name or "markerstore"
        try:
            return super().main(args=args, prog_name=prog, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except (click.exceptions.Abort, _Interrupted) as exc:
            word = "interrupted" if isinstance(exc, _Interrupted) else "aborted"
            click.echo(f"{prog}: {word}", err=True)
            sys.exit(130)
        except Exception as exc:  # every failure is one line; see describe_error
            if _debug():
                raise
            code, message = describe_error(exc)
            click.echo(f"{prog}: error: {_one_line(message)}", err=True)
            sys.exit(code)


def describe_error(exc: BaseException) -> tuple[int, str]:
    """(exit code, message) for a failure: 2 for bad input, 1 for a failed operation or a
    table that cannot be read, 1 with a hint for anything unexpected."""
    import duckdb

    if isinstance(exc, SqlInterruptedError):
        return 130, str(exc)
    if isinstance(exc, _table_content_errors()):
        return 1, str(exc)
    if isinstance(exc, (*USAGE_ERRORS, *_duckdb_usage_errors())):
        message = (exc.format_message() if isinstance(exc, click.ClickException)
                   else duckdb_message(exc))
        if isinstance(exc, duckdb.PermissionException):
            message = f"{message} ({SANDBOX_HINT})"
        return 2, message
    if isinstance(exc, click.ClickException):
        return exc.exit_code, exc.format_message()
    if isinstance(exc, (MarkerStoreError, OSError, duckdb.Error)):
        return 1, duckdb_message(exc) or type(exc).__name__
    return 1, (f"unexpected {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the "
               "traceback)")


def duckdb_message(exc: BaseException) -> str:
    """The message without DuckDB's "LINE 1: ... ^" context (a caret means nothing on one
    line)."""
    return re.split(r"\n\s*LINE \d+:", str(exc), maxsplit=1)[0]


def _one_line(message: str) -> str:
    """The message on one line, its control characters escaped: it may quote a stored
    value."""
    return visible(" ".join(message.split()))


def open_table(path: str, storage_options: Sequence[str] | Mapping[str, Any] = (),
               options: Mapping[str, Any] | None = None, *, must_exist: bool = True,
               what: str = "") -> Table:
    """The table at `path` for a command: a bad path or URL is a usage error; a path with
    no markerstore table (or a regular file) is TableNotFoundError, both exit 2. With
    `must_exist=False` (a table a command creates) only a regular file is refused."""
    parsed = (dict(storage_options) if isinstance(storage_options, Mapping)
              else parse_storage_options(storage_options))
    try:
        table = Table(path, parsed, options)
    except ConfigError:
        raise
    except (ValueError, ImportError, TypeError) as exc:
        raise click.UsageError(f"bad table path {path!r}: {exc}") from None
    storage = table.storage
    if storage.fs.isfile(storage.root):
        raise TableNotFoundError(f"no markerstore table at {path}: it is a file{what}")
    if must_exist and not storage.fs.isdir(storage.path(META_DIR)):
        raise TableNotFoundError(f"no markerstore table at {path}{what}")
    return table


def parse_key_values(pairs: Sequence[str], flag: str, metavar: str = "key=value", *,
                     need_value: bool = False, unique: bool = False) -> dict[str, str]:
    """The `key=value` pairs of a repeatable flag, in order: keys stripped, values as given.
    A pair without ``=`` or without a key (or, with `need_value`, without a value) and, with
    `unique`, a key given twice are usage errors naming the flag; otherwise the last wins."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or (need_value and not value.strip()):
            raise click.UsageError(f"{flag} expects {metavar}, got {pair!r}")
        if unique and key in parsed:
            raise click.UsageError(f"{flag} {key} is given twice")
        parsed[key] = value
    return parsed


def parse_storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` pairs; values that parse as JSON are taken as JSON (true, 5, {...}),
    and a dotted key nests (client_kwargs.region_name=us-east-1)."""
    options: dict[str, Any] = {}
    for key, raw in parse_key_values(pairs, "--storage-option").items():
        value = json_or_text(raw)
        target = options
        parts = key.split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise click.UsageError(f"--storage-option {key}: {part} is not a mapping")
        target[parts[-1]] = value
    return options


def storage_option_flag(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--storage-option", "storage_options", multiple=True,
                        metavar="KEY=VALUE",
                        help="fsspec storage option (repeatable), e.g. "
                             "endpoint_url=http://127.0.0.1:9000")(fn)


def json_flag(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def unsafe_sql_flag(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--unsafe-sql", "unsafe_sql", is_flag=True,
        help="Run the SQL with DuckDB's full engine (any file, COPY, ATTACH, INSTALL, SET, "
             "...). Off by default: one read-only query that reads only the table's views "
             "(see docs/SECURITY.md).")(fn)


def sandbox_limit_flags(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--time-limit and --memory-limit of the SQL sandbox (defaults from config/sql.py)."""
    from markerstore import config

    time_ms = config.OPTIONS[config.SQL_TIME_LIMIT_MS].default
    memory = config.OPTIONS[config.SQL_MEMORY_LIMIT].default
    fn = click.option(
        "--memory-limit", "memory_limit", default=None, metavar="SIZE",
        help=f"SQL sandbox: DuckDB's memory limit for the query [default: {memory}] "
             f"({config.SQL_MEMORY_LIMIT}).")(fn)
    return click.option(
        "--time-limit", "time_limit", type=float, default=None, metavar="SECONDS",
        help=f"SQL sandbox: interrupt the query after this long, 0 for no limit [default: "
             f"{time_ms / 1000:g}] ({config.SQL_TIME_LIMIT_MS}).")(fn)


def sql_limits(unsafe_sql: bool, time_limit: float | None, memory_limit: str | None
               ) -> Any:
    """The sandbox's limits for a command's flags (with --unsafe-sql: no time limit; the
    memory limit is not set on the full engine)."""
    from markerstore.sql.sandbox import UNLIMITED_TIME, Limits

    return UNLIMITED_TIME if unsafe_sql else Limits.of(time_limit, memory_limit)


def as_data(result: Any) -> Any:
    """What a command prints of a result: its library's own ``to_dict()`` (a list of them
    for a list), a dict or rows as they are."""
    if hasattr(result, "to_dict"):
        return result.to_dict()
    if isinstance(result, (list, tuple)):
        return [as_data(item) for item in result]
    return result


def output(result: Any, as_json: bool, text: Callable[[Any], None] | None = None,
           columns: Sequence[str] | None = None) -> None:
    """The one output layer of both CLIs: `result` printed as JSON (``--json``) or as text,
    from the same data (:func:`as_data`). `text` renders that data as text; without one it
    is an aligned table of rows (in `columns`) or of a dict's keys and values."""
    data = as_data(result)
    if as_json:
        emit(data, True)
    elif text is not None:
        text(data)
    else:
        emit(data, False, columns)


def emit_relation(relation: Any, as_json: bool) -> None:
    """Print a DuckDB relation's rows (a statement without a result prints nothing)."""
    if relation is None:
        return
    columns = list(relation.columns)
    rows = [dict(zip(columns, values)) for values in relation.fetchall()]
    output(rows, as_json, columns=columns)


def emit(rows: list[dict[str, Any]] | dict[str, Any], as_json: bool,
         columns: Sequence[str] | None = None) -> None:
    """Print rows as JSON, or as an aligned text table whose values are made visible
    (control characters escaped: :mod:`markerstore.render.text`)."""
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    lines = fields_lines(rows) if isinstance(rows, dict) else table_lines(rows, columns)
    for line in lines:
        click.echo(line)


class CommandsGroup(OneLineGroup):
    """The `markerstore` group: a command's module (COMMANDS) is imported when the command
    is first looked up, not at import (the command modules import this one), so a command
    loads only what it needs."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module = import_optional(COMMANDS[cmd_name])
            if module is not None:
                module.register(self)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))


@click.group(cls=CommandsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="markerstore", prog_name="markerstore")
def cli() -> None:
    """Markers, commits and audits for PySpark writes to a data lake (local disk or S3)."""


def main() -> None:
    cli.main(prog_name="markerstore")
