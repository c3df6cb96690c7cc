"""The `markerstore` command: a click group; each command prints text or `--json`.

Bad arguments exit 2 with a one-line message; a failed operation exits 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from markerstore._optional import import_optional
from markerstore.errors import (
    ConfigError,
    InstantNotFoundError,
    InvalidMarkerError,
    MarkerStoreError,
)

# Command modules, loaded when present; each defines `register(group)`.
COMMAND_MODULES = (
    "markerstore.cli.core",
    "markerstore.cli.serve",
    "markerstore.cli.sweep",
    "markerstore.cli.verify",
    "markerstore.cli.ingest",
    "markerstore.cli.demo",
    "errortable.cli",
)

USAGE_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError, InvalidMarkerError, InstantNotFoundError, click.UsageError)
# ConfigError covers bad options, schemas, sources and checks: all bad input, exit 2.


def _duckdb_usage_errors() -> tuple[type[BaseException], ...]:
    import duckdb

    return (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException)


class OneLineGroup(click.Group):
    """A group whose errors are one line on stderr: exit 2 for bad input, 1 otherwise."""

    def main(self, args: Sequence[str] | None = None,  # type: ignore[override]
             prog_name: str | None = None, **extra: Any) -> Any:
        prog = prog_name or "markerstore"
        try:
            return super().main(args=args, prog_name=prog, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo(f"{prog}: aborted", err=True)
            sys.exit(130)
        except (*USAGE_ERRORS, *_duckdb_usage_errors()) as exc:
            message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
            click.echo(f"{prog}: error: {_one_line(message)}", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"{prog}: error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except (MarkerStoreError, OSError) as exc:
            click.echo(f"{prog}: error: {_one_line(str(exc))}", err=True)
            sys.exit(1)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def parse_storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` pairs; values that parse as JSON are taken as JSON (true, 5, {...}),
    and a dotted key nests (client_kwargs.region_name=us-east-1)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--storage-option expects key=value, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        target = options
        parts = key.strip().split(".")
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


def emit(rows: list[dict[str, Any]] | dict[str, Any], as_json: bool,
         columns: Sequence[str] | None = None) -> None:
    """Print rows as JSON, or as an aligned text table."""
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    if isinstance(rows, dict):
        width = max((len(k) for k in rows), default=0)
        for key, value in rows.items():
            click.echo(f"{key.ljust(width)}  {_cell(value)}")
        return
    if not rows:
        click.echo("(no rows)")
        return
    columns = list(columns or rows[0].keys())
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="markerstore", prog_name="markerstore")
def cli() -> None:
    """Markers, commits and audits for PySpark writes to a data lake (local disk or S3)."""


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        loading = sys.modules.get(name)
        if loading is not None and not hasattr(loading, "register"):
            continue  # that module is importing us (the `errortable` command): not needed
        module = import_optional(name)
        if module is not None:
            module.register(cli)


_load_commands()


def main() -> None:
    cli.main(prog_name="markerstore")
