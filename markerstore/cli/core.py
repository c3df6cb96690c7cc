"""Core commands: timeline, markers, rollback, sql, options."""

from __future__ import annotations

from typing import Any

import click

from markerstore.cli.main import (
    emit,
    emit_relation,
    json_flag,
    open_table,
    output,
    sandbox_limit_flags,
    sql_limits,
    storage_option_flag,
    unsafe_sql_flag,
)
from markerstore.errors import CorruptTableError
from markerstore.markers import MarkerName, read_markers


@click.command()
@click.argument("table")
@storage_option_flag
@json_flag
def timeline(table: str, storage_options: tuple[str, ...], as_json: bool) -> None:
    """List the instants of TABLE with their states."""
    t = open_table(table, storage_options)
    rows = []
    for info in t.timeline():
        row = info.to_dict()
        if info.state == "completed":
            try:
                counts = t.commit_metadata(info.instant).get("counts") or {}
            except CorruptTableError as exc:  # one row says so; the others are listed
                row.update(state="corrupt", problem=str(exc))
                counts = {}
            row.update(files=counts.get("files"), rows=counts.get("rows"),
                       bytes=counts.get("bytes"))
        rows.append(row)
    problems = ["problem"] if any("problem" in row for row in rows) else []
    output(rows, as_json, columns=["instant", "state", "time", "files", "rows", "bytes",
                                   *problems])


@click.command()
@click.argument("table")
@click.argument("instant")
@storage_option_flag
@json_flag
def markers(table: str, instant: str, storage_options: tuple[str, ...], as_json: bool) -> None:
    """List the markers of INSTANT in TABLE (either mechanism)."""
    import duckdb

    t = open_table(table, storage_options)
    t.state(instant)  # a clear error for an unknown instant
    relation = read_markers(t.storage, instant, duckdb.connect())
    rows: list[dict[str, Any]] = []
    if relation is not None:
        ordered = relation.query("m", "SELECT partition, file, io_type FROM m "
                                      "ORDER BY partition, file")
        assert ordered is not None
        for partition, file_name, io_type in ordered.fetchall():
            rows.append({"marker": MarkerName.build(partition, file_name, io_type).name,
                         "partition": partition, "file": file_name, "io_type": io_type})
    output(rows, as_json, columns=["marker", "io_type"])


@click.command()
@click.argument("table")
@click.argument("instant", required=False)
@click.option("--force", is_flag=True,
              help="Also roll back an inflight instant whose writer looks alive.")
@storage_option_flag
@json_flag
def rollback(table: str, instant: str | None, force: bool, storage_options: tuple[str, ...],
             as_json: bool) -> None:
    """Roll back INSTANT of TABLE from its markers, or every failed instant (whose
    heartbeat expired) when INSTANT is not given. Rolling back twice is a no-op."""
    from errortable import ErrorTables
    from markerstore.commit import recover
    from markerstore.commit import rollback as roll_back

    t = open_table(table, storage_options)
    if instant is None:
        results = recover(t, policy="eager" if force else "lazy", error_tables=ErrorTables())
    else:
        results = [roll_back(t, instant, force=force, error_tables=ErrorTables())]
    output(results, as_json, _rollback_text)


def rollback_status(data: dict[str, Any]) -> str:
    """What a rollback did, in words, from RollbackResult.to_dict()."""
    return ("rolled forward" if data["rolled_forward"] else
            "already rolled back" if data["noop"] else "rolled back")


def _rollback_text(results: list[dict[str, Any]]) -> None:
    emit([{"instant": r["instant"], "status": rollback_status(r),
           "deleted_files": len(r["deleted_files"])} for r in results], False,
         ["instant", "status", "deleted_files"])


@click.command()
@click.argument("table")
@click.argument("query")
@unsafe_sql_flag
@sandbox_limit_flags
@storage_option_flag
@json_flag
def sql(table: str, query: str, unsafe_sql: bool, time_limit: float | None,
        memory_limit: str | None, storage_options: tuple[str, ...], as_json: bool) -> None:
    """Run QUERY with DuckDB over the views of TABLE: commits, files (of completed
    commits), markers, and errors when an error table is attached. QUERY is one read-only
    statement that can read these views and nothing else, unless --unsafe-sql."""
    from errortable import table_connect
    from markerstore.sql import sandbox

    limits = sql_limits(unsafe_sql, time_limit, memory_limit)
    t = open_table(table, storage_options)
    if not unsafe_sql:
        sandbox.check(query)  # refused before the views are built
    con = table_connect(t)
    relation = sandbox.run(con, query, unsafe=unsafe_sql, limits=limits)
    with sandbox.limited(con, limits):
        emit_relation(relation, as_json)


@click.command()
@json_flag
def options(as_json: bool) -> None:
    """List every option key with its default and its Hudi / s3committer aliases."""
    from markerstore import config

    output(config.describe(), as_json, columns=["key", "default", "aliases"])


def register(group: click.Group) -> None:
    for command in (timeline, markers, rollback, sql, options):
        group.add_command(command)
