"""The `errortable` command (also `markerstore errortable`): query, stats, show, expire,
replay, recover.

PATH is an error table (local ``<table>_errors`` or global), or a target table, whose
error tables are then read (only its rows). Every command prints text or ``--json``. Bad
arguments (bad SQL, an unknown path, a bad duration) exit 2 with a one-line message; a
failed operation exits 1.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from errortable.ops.replays import replay as replay_errors
from errortable.ops.retention import expire as expire_errors
from errortable.ops.retention import parse_duration
from errortable.reading import access, reader, report
from errortable.reading.reader import CorruptErrorFileWarning
from errortable.writing.recovery import recover as recover_table
from markerstore.cli.main import (
    OneLineGroup,
    emit,
    emit_relation,
    json_flag,
    open_table,
    output,
    parse_storage_options,
    sandbox_limit_flags,
    sql_limits,
    storage_option_flag,
    unsafe_sql_flag,
)
from markerstore.errors import ConfigError, NotAnErrorTableError
from markerstore.render.text import visible
from markerstore.sql import sandbox
from markerstore.table import Table

PROG = "errortable"


@contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """Skipped corrupt files are reported as one line each on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CorruptErrorFileWarning)
        yield
    for item in caught:
        click.echo(f"{PROG}: warning: {visible(' '.join(str(item.message).split()))}",
                   err=True)


def _command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Unknown paths are bad arguments (exit 2); warnings go to stderr."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        open_table(kwargs["path"], kwargs.get("storage_options", ()),
                   what=" (not an error table, nor a table with one)")
        try:
            with _warnings_to_stderr():
                return fn(*args, **kwargs)
        except NotAnErrorTableError as exc:
            raise click.UsageError(str(exc)) from None

    return wrapper


def _strict_flag(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--strict", is_flag=True,
                        help="Fail on a corrupt error file instead of skipping it.")(fn)


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bad duration is a bad argument, found before the table is read."""
    if value is not None:
        try:
            parse_duration(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return value


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="markerstore", prog_name=PROG)
def cli() -> None:
    """Inspect, query, replay and expire error tables (RFC-20 ErrorRecord rows)."""


@cli.command()
@click.argument("path")
@click.argument("sql")
@_strict_flag
@unsafe_sql_flag
@sandbox_limit_flags
@storage_option_flag
@json_flag
@_command
def query(path: str, sql: str, strict: bool, unsafe_sql: bool, time_limit: float | None,
          memory_limit: str | None, storage_options: tuple[str, ...], as_json: bool) -> None:
    """Run SQL over the view `errors` (committed rows) of PATH: one read-only statement
    that reads the view and nothing else, unless --unsafe-sql."""
    limits = sql_limits(unsafe_sql, time_limit, memory_limit)
    if not unsafe_sql:
        sandbox.check(sql)  # refused before the view is built
    con = access.connect(path, parse_storage_options(storage_options), strict=strict)
    relation = sandbox.run(con, sql, unsafe=unsafe_sql, limits=limits)
    with sandbox.limited(con, limits):
        emit_relation(relation, as_json)


@cli.command()
@click.argument("path")
@click.option("--top", default=20, show_default=True, type=click.IntRange(min=1),
              help="Fingerprint groups to list.")
@_strict_flag
@storage_option_flag
@json_flag
@_command
def stats(path: str, top: int, strict: bool, storage_options: tuple[str, ...],
          as_json: bool) -> None:
    """Committed error rows of PATH counted by reason, fingerprint, commit and day."""
    result = report.stats(path, parse_storage_options(storage_options), top=top,
                          strict=strict)
    output(result, as_json, functools.partial(_stats_text, path))


def _stats_text(path: str, data: dict[str, Any]) -> None:
    click.echo(f"{data['total']} committed error row(s) in {visible(path)}")
    for title, key, columns in (
            ("by reason", "by_reason", ["reason", "rows"]),
            ("by fingerprint", "by_fingerprint",
             ["fingerprint", "reason", "detail", "rows", "sample"]),
            ("by commit", "by_commit",
             ["source_instant", "error_instant", "rows", "replayed", "source_table"]),
            ("by day", "by_day", ["day", "rows"])):
        click.echo(f"\n{title}:")
        emit(data[key], False, columns)


@cli.command()
@click.argument("path")
@click.option("--commit", "commit", metavar="INSTANT",
              help="Only rows of this commit (main instant or error instant).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=0))
@_strict_flag
@storage_option_flag
@json_flag
@_command
def show(path: str, commit: str | None, limit: int, strict: bool,
         storage_options: tuple[str, ...], as_json: bool) -> None:
    """The newest committed error rows of PATH."""
    rows = report.show(path, parse_storage_options(storage_options), commit=commit,
                       limit=limit, strict=strict)
    output(rows, as_json, _show_text)


def _show_text(rows: list[dict[str, Any]]) -> None:
    """The rows with each record cut to 120 characters."""
    shown = [{**row, "record": _cut(row.get("record"), 120)} for row in rows]
    emit(shown, False, ["created_at", "source_instant", "reason", "record_key", "error",
                        "record"])


def _cut(value: Any, chars: int) -> Any:
    return value[:chars] + "..." if isinstance(value, str) and len(value) > chars else value


@cli.command()
@click.argument("path")
@click.option("--older-than", "older_than", required=True, metavar="DURATION",
              callback=_duration,
              help="Expire error commits older than this: 30d, 12h, 2w, ...")
@click.option("--dry-run", is_flag=True, help="Only report what would be expired.")
@storage_option_flag
@json_flag
@_command
def expire(path: str, older_than: str, dry_run: bool, storage_options: tuple[str, ...],
           as_json: bool) -> None:
    """Expire whole error commits of error table PATH older than a duration; the expire
    is itself a commit on PATH that records what it removed."""
    result = expire_errors(path, older_than, parse_storage_options(storage_options),
                           dry_run=dry_run)
    output(result, as_json, _expire_text)


def _expire_text(data: dict[str, Any]) -> None:
    verb = "would expire" if data["dry_run"] else "expired"
    click.echo(f"{verb} {len(data['expired'])} error commit(s), {data['rows']} row(s), older "
               f"than {visible(data['cutoff'])}"
               + (f" (expire instant {visible(data['expire_instant'])})"
                  if data["expire_instant"] else ""))
    emit([{k: v for k, v in e.items() if k != "files"} | {"files": len(e["files"])}
          for e in data["expired"]], False,
         ["error_instant", "source_instant", "rows", "files", "source_table"])


@cli.command()
@click.argument("path")
@click.option("--where", "where", required=True,
              help="SQL condition over the errors view selecting the records to replay.")
@click.option("--target", default=None, help="Replay into this table instead of each "
              "record's own target table.")
@click.option("--dry-run", is_flag=True, help="Only report what would be replayed.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="How the ingest read text values, to read them alike (repeatable): "
                   "dateFormat, timestampFormat, timestampNTZFormat, nanValue, positiveInf, "
                   "negativeInf, locale (Spark's names, as `markerstore ingest --option` "
                   "takes them).")
@unsafe_sql_flag
@sandbox_limit_flags
@storage_option_flag
@json_flag
@_command
def replay(path: str, where: str, target: str | None, dry_run: bool,
           options: tuple[str, ...], unsafe_sql: bool, time_limit: float | None,
           memory_limit: str | None, storage_options: tuple[str, ...], as_json: bool) -> None:
    """Re-ingest selected (fixed) error records into their target table as a new commit,
    once: replayed records are recorded and never replayed again. The --where condition
    reads the errors view and nothing else, unless --unsafe-sql. Values are read as the
    ingest's value options (--option) say."""
    formats = _value_formats(options)
    if target is not None:
        open_table(target, storage_options)
    result = replay_errors(path, where, parse_storage_options(storage_options),
                           dry_run=dry_run, target=target, unsafe_sql=unsafe_sql,
                           limits=sql_limits(unsafe_sql, time_limit, memory_limit),
                           formats=formats)
    output(result, as_json, _replay_text)


def _value_formats(pairs: tuple[str, ...]) -> Any:
    """The ValueFormats of replay's --option pairs (None without any); an option that is
    not one of how values read is refused in one line."""
    if not pairs:
        return None
    from markerstore import config
    from markerstore.cli.ingest import parse_options
    from markerstore.ingest.options import value_formats

    options = parse_options(pairs)
    allowed = {config.INGEST_DATE_FORMAT, config.INGEST_TIMESTAMP_FORMAT,
               config.INGEST_TIMESTAMP_NTZ_FORMAT, config.INGEST_NAN_VALUE,
               config.INGEST_POSITIVE_INF, config.INGEST_NEGATIVE_INF, config.INGEST_LOCALE}
    other = sorted(k for k in options if config.canonical_key(k) not in allowed)
    if other:
        raise ConfigError(f"replay --option takes how values read (dateFormat, "
                          f"timestampFormat, timestampNTZFormat, nanValue, positiveInf, "
                          f"negativeInf, locale), not {', '.join(other)}")
    return value_formats(options)


def _replay_text(data: dict[str, Any]) -> None:
    verb = "would replay" if data["dry_run"] else "replayed"
    click.echo(f"{verb} {data['written_rows']} record(s)")
    emit([{"target_table": t["target_table"], "selected": t["selected"],
           "written": t["written_rows"], "already_replayed": t["already_replayed"],
           "no_payload": t["no_payload"], "still_failing": t["still_failing"],
           "instant": t["instant"]} for t in data["targets"]], False)


@cli.command()
@click.argument("path")
@click.option("--dry-run", is_flag=True, help="Only report what would be done.")
@storage_option_flag
@json_flag
@_command
def recover(path: str, dry_run: bool, storage_options: tuple[str, ...], as_json: bool) -> None:
    """Roll inflight error commits of error table PATH forward (their main commit
    completed) or back (it was rolled back); leave those whose main commit is running."""
    options = parse_storage_options(storage_options)
    if not reader.is_error_table(Table(path, options)):
        raise NotAnErrorTableError(f"{path} is not an error table")
    output(recover_table(path, options, dry_run=dry_run), as_json, _recover_text)


RECOVERY_OUTCOMES = ("rolled_forward", "rolled_back", "waiting")


def _recover_text(data: dict[str, Any]) -> None:
    """One row per inflight error instant: what recovery did to it (the lists of
    RecoveryResult.to_dict()), why, and the error when it failed."""
    rows = [{"instant": instant, "action": outcome, "why": data["why"].get(instant, ""),
             "error": data["failed"].get(instant)}
            for outcome in RECOVERY_OUTCOMES for instant in data[outcome]]
    listed = {row["instant"] for row in rows}
    rows += [{"instant": instant, "action": "failed", "why": data["why"].get(instant, ""),
              "error": error} for instant, error in data["failed"].items()
             if instant not in listed]
    emit(sorted(rows, key=lambda row: row["instant"]), False,
         ["instant", "action", "why", "error"])


def register(group: click.Group) -> None:
    """Plug into markerstore's command: ``markerstore errortable ...``."""
    group.add_command(cli, name="errortable")


def main() -> None:
    cli.main(prog_name=PROG)


if __name__ == "__main__":
    main()
