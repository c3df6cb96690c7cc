"""`markerstore ingest SOURCE TABLE`: read, validate and commit with markers and an error
table; prints a summary as a table or JSON."""

from __future__ import annotations

from typing import Any

import click

from markerstore import config
from markerstore.cli.main import (
    duckdb_message,
    emit,
    json_flag,
    open_table,
    output,
    parse_key_values,
    parse_storage_options,
    storage_option_flag,
)


def parse_checks(pairs: tuple[str, ...]) -> dict[str, str]:
    """NAME=SQL_EXPR pairs, each expression parsed as one SQL expression (its columns are
    checked against the schema later, still before Spark starts)."""
    import duckdb

    con = duckdb.connect()
    checks: dict[str, str] = {}
    for name, expr in parse_key_values(pairs, "--check", "NAME=SQL_EXPR", need_value=True,
                                       unique=True).items():
        try:
            statements = con.extract_statements(f"SELECT ({expr}) AS v")
        except duckdb.Error as exc:
            raise click.UsageError(f"--check {name}: {expr.strip()!r} is not a valid SQL "
                                   f"boolean expression: {duckdb_message(exc)}") from None
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            raise click.UsageError(f"--check {name}: {expr.strip()!r} is not one SQL "
                                   "expression")
        checks[name] = expr.strip()
    return checks


def parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`key=value` option pairs; keys are dotted option names, values stay strings exactly
    as given (a tab separator, a one-space nullValue: each option's parser decides what
    white space means). Keys and values are validated (markerstore.config, which holds
    every key): a bad one is a ConfigError before Spark starts."""
    options: dict[str, Any] = dict(parse_key_values(pairs, "--option"))
    from markerstore import config

    config.resolve(options)
    return options


def print_summary(summary: dict[str, Any], as_json: bool) -> None:
    output(summary, as_json, _summary_text)


def _summary_text(summary: dict[str, Any]) -> None:
    shown = {k: v for k, v in summary.items() if k not in ("error_records_by_reason",
                                                           "storage_requests")}
    by_reason = summary.get("error_records_by_reason") or {}
    if by_reason:
        shown["error_records"] = f"{summary['error_records']} (" + ", ".join(
            f"{reason}: {count}" for reason, count in by_reason.items()) + ")"
    requests = summary.get("storage_requests") or {}
    shown["storage_requests"] = ", ".join(f"{k} {v}" for k, v in requests.items()
                                          if v and k != "total") + \
        f" (total {requests.get('total', 0)})"
    if "hint" in shown:  # what to change, last
        shown["hint"] = shown.pop("hint")
    emit(shown, False)


@click.command()
@click.argument("source")
@click.argument("table")
@click.option("--format", "fmt", type=click.Choice(["json", "csv", "parquet"]),
              help="Source format (default: from the file extensions: .json, .jsonl, "
                   ".ndjson; .csv, .tsv and .tab (tab-separated); .parquet, .pq; each may "
                   "end in .gz, .bz2 or .zst).")
@click.option("--schema", help="Target schema: a DDL string ('id BIGINT, name STRING') or an "
                               "Avro schema file (.avsc). Default: inferred from the source.")
@click.option("--check", "checks", multiple=True, metavar="NAME=SQL_EXPR",
              help="A named check, a SQL boolean expression over the record (repeatable); "
                   "failing records go to the error table.")
@click.option("--key", help="Record key column: a null key sends the record to the error "
                            "table.")
@click.option("--partition-by", "partition_by", multiple=True, metavar="COL",
              help="Partition column (repeatable): Hive-style folders.")
@click.option("--markers", type=click.Choice(["direct", "batched"]), default="batched",
              show_default=True, help="Marker mechanism.")
@click.option("--mode", type=click.Choice(["append", "overwrite", "error"]), default="append",
              show_default=True, help="Save mode: overwrite replaces the partitions (or the "
                                      "table) that receive data; error fails if data exists.")
@click.option("--master", default=None,
              help="Spark master (local[N], spark://host:7077, yarn, k8s://...). Default: "
                   "spark.master from --conf or spark-defaults.conf, else local[*].")
@click.option("--conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting (repeatable), over spark-defaults.conf; e.g. "
                   "spark.driver.host=10.0.0.5.")
@click.option("--remote", metavar="sc://HOST:PORT",
              help="Run through a Spark Connect server instead of starting Spark here "
                   "(--master is then the server's; --conf sets session options). The "
                   "server must accept a connection within "
                   f"{config.CONNECT_TIMEOUT_MS} (default "
                   f"{config.OPTIONS[config.CONNECT_TIMEOUT_MS].default} ms); a call it "
                   f"does not answer is retried {config.CONNECT_RETRIES} (default "
                   f"{config.OPTIONS[config.CONNECT_RETRIES].default}) times.")
@click.option("--no-error-table", is_flag=True,
              help="Do not store failed records (they are still counted).")
@click.option("--max-error-fraction", type=click.FloatRange(0.0, 1.0), default=None,
              metavar="F", help="Error budget: roll the write back and fail if more than "
                                "this fraction of the rows are bad (default: no limit).")
@click.option("--max-errors", type=click.IntRange(min=0), default=None, metavar="N",
              help="Error budget: roll the write back and fail if more than N rows are bad "
                   "(0: fail on the first; default: no limit).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A markerstore option (see `markerstore options`; repeatable; the "
                   "value as given, white space too). Parsing "
                   "options keep Spark's names, matched without case: sep, header, escape, "
                   "quote, comment, lineSep, ignoreLeadingWhiteSpace, "
                   "ignoreTrailingWhiteSpace, nullValue, emptyValue (CSV; "
                   "sep='\\t' for a tab, escape='\\' for what Spark writes), DuckDB's skip "
                   "and null_padding (CSV), "
                   "allowNonNumericNumbers, multiLine (JSON), mode=PERMISSIVE|FAILFAST; and "
                   "markerstore.ingest.encoding.errors="
                   "strict|replace, markerstore.ingest.record.max_bytes, "
                   "markerstore.ingest.json.value_as_text."
                   " Values read with Spark's dateFormat, timestampFormat, timestampNTZFormat "
                   "(Spark's pattern letters, such as dateFormat=dd/MM/yyyy), locale (a BCP 47 "
                   "tag CLDR knows: fr-FR, de-DE, ...; en-US by default), "
                   "nanValue, positiveInf, negativeInf (CSV); encoding (alias charset: "
                   "utf-8, iso-8859-1, windows-1252, utf-16, utf-16le, utf-16be).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: when stderr is a terminal).")
@storage_option_flag
@json_flag
def ingest(source: str, table: str, fmt: str | None, schema: str | None,
           checks: tuple[str, ...], key: str | None, partition_by: tuple[str, ...],
           markers: str, mode: str, master: str | None, spark_conf: tuple[str, ...],
           remote: str | None, no_error_table: bool,
           max_error_fraction: float | None, max_errors: int | None,
           options: tuple[str, ...], progress: bool | None,
           storage_options: tuple[str, ...], as_json: bool) -> None:
    """Read SOURCE (JSON lines, CSV or Parquet; a file, folder or glob at any fsspec URL),
    cast it to a schema, apply checks, and commit it to TABLE with markers. Records that
    fail to parse, cast, or pass a check go to the local error table TABLE_errors,
    committed together with the data.

    Spark starts from spark-defaults.conf and --conf (a cluster master gets no address
    pinned: executors reach the driver, and its marker server, at spark.driver.host);
    with --remote, the write runs on the Spark Connect server's driver."""

    # Everything that needs no source or schema is checked before the pipeline (and
    # Spark) is even imported.
    parsed_checks, parsed_options = parse_checks(checks), parse_options(options)
    conf = parse_key_values(spark_conf, "--conf")
    if remote is not None:
        from markerstore.ingest.session import connect_address

        connect_address(remote)  # a bad URL is one line before Spark starts
    if max_error_fraction is not None:
        parsed_options[config.ERROR_MAX_FRACTION] = max_error_fraction
    if max_errors is not None:
        parsed_options[config.ERROR_MAX_RECORDS] = max_errors
    open_table(table, storage_options, parsed_options, must_exist=False)
    from markerstore.ingest.pipeline import ingest as run

    result = run(source, table, fmt=fmt, schema=schema, checks=parsed_checks,
                 key=key, partition_by=list(partition_by) or None, markers=markers,
                 mode=mode, master=master, conf=conf, remote=remote,
                 error_table=not no_error_table, options=parsed_options,
                 storage_options=parse_storage_options(storage_options), progress=progress)
    print_summary(result.summary(), as_json)


def register(group: click.Group) -> None:
    group.add_command(ingest)
