"""`ingest(source, table, ...)`: JSON lines, CSV or Parquet from any fsspec URL into a table.

Spark schedules Python tasks over the source splits (a file, or a byte range of a big
JSON-lines file), packed by bytes into as few tasks as ``markerstore.ingest.task_bytes``
allows (one per core at least); a task reads its splits through fsspec block by block,
parses and validates them vectorized, and writes good rows and error records itself
(:mod:`markerstore.ingest.task`), so a retried task retries both and no data row crosses
into the JVM. The tasks return only their stats rows; the write commits data and error
rows together (markers, the error table, one atomic completed instant).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from markerstore import config
from markerstore.commit.result import CommitResult
from markerstore.errors import SourceError
from markerstore.ingest.charsets import UTF16
from markerstore.ingest.header import (
    Header,
    encoding_advice,
    encoding_hint,
    starts_in,
    with_skip,
)
from markerstore.ingest.infer import csv_headers, infer_schema, separator_hint
from markerstore.ingest.options import read_options
from markerstore.ingest.plan import IngestPlan, Splits
from markerstore.ingest.schema import load_schema
from markerstore.ingest.session import is_connect, progress_bar, spark_session
from markerstore.ingest.sources import (
    SourceTask,
    implied_separator,
    list_tasks,
    pack,
    recut,
)
from markerstore.render.html import fields_html

__all__ = ["IngestResult", "infer_schema", "ingest", "spark_session"]

MIN_SPLIT_BYTES = 16 * 1024 * 1024  # the smallest range a balanced split cuts


@dataclass
class IngestResult:
    """What an ingest did: the commit, and what was read."""

    commit: CommitResult
    source: str
    source_tasks: int  # source splits: files, and byte ranges of big JSON-lines files
    schema: pa.Schema
    seconds: float = 0.0
    spark_tasks: int = 0  # the splits packed into this many Spark tasks
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def error_records(self) -> dict[str, int]:
        return dict(self.commit.error_records)

    @property
    def rows_read(self) -> int:
        """Rows written + error records (the commit checked that they are the source
        records)."""
        return self.commit.rows_written + sum(self.commit.error_records.values())

    @property
    def source_records(self) -> int:
        """Records the tasks' parsers read: a JSON line that is not blank (with
        multiLine, an element of a document's top-level array), a CSV record
        (which may span lines) after the header, a Parquet row. Each is one row written
        or one error record: the commit checks it, else the write is rolled back."""
        return int(self.commit.source.get("records", 0))

    @property
    def source_lines(self) -> int:
        """Physical lines of the JSON and CSV files read (headers and blank lines too)."""
        return int(self.commit.source.get("lines", 0))

    @property
    def hint(self) -> str | None:
        """What to change when most records are `encoding` errors (the files are in
        another encoding than the one read), in one line; else None."""
        bad = self.commit.error_records.get("encoding", 0)
        if not bad or 2 * bad <= self.source_records:
            return None
        return (f"{bad} of {self.source_records} records are not text in the encoding read: "
                + encoding_advice())

    def summary(self) -> dict[str, Any]:
        c = self.commit
        hint = self.hint
        return {"table": c.path, "instant": c.instant, "source": self.source,
                "source_records": self.source_records, "source_lines": self.source_lines,
                "rows_read": self.rows_read, "rows_written": c.rows_written,
                "error_records": sum(c.error_records.values()),
                "error_records_by_reason": dict(sorted(c.error_records.items())),
                "source_splits": self.source_tasks, "spark_tasks": self.spark_tasks,
                "files_committed": c.num_files, "files_cleaned": c.files_cleaned,
                "duration_s": round(self.seconds, 2),
                "storage_requests": dict(c.requests), **({"hint": hint} if hint else {}),
                **({"published": c.published.removeprefix("published: ")}
                   if c.formats else {})}

    def _repr_html_(self) -> str:
        return fields_html(self.summary())


def ingest(source: str, table: str, *, schema: str | pa.Schema | None = None,
           fmt: str | None = None, checks: Mapping[str, str] | None = None,
           key: str | None = None, partition_by: str | Sequence[str] | None = None,
           markers: str = "batched", mode: str = "append", master: str | None = None,
           conf: Mapping[str, str] | None = None, remote: str | None = None,
           spark: Any = None, storage_options: Mapping[str, Any] | None = None,
           source_storage_options: Mapping[str, Any] | None = None,
           options: Mapping[str, Any] | None = None, error_table: bool = True,
           progress: bool | None = None, _task_hook: Any = None) -> IngestResult:
    """Read `source`, validate, and commit it to `table` with markers and an error table.

    Everything that can be checked before Spark starts is: the source exists and holds
    data files, the schema parses, the key, partition columns and checks are valid.
    Without `spark`, a session on `master` (default: ``spark.master`` from `conf` or
    ``spark-defaults.conf``, else ``local[*]``) with the Spark settings `conf`, or, with
    `remote` (``sc://host:port``), a Spark Connect session; over Spark Connect the write
    runs on Spark's driver through the data source (:mod:`markerstore.ingest.remote`)."""
    import errortable
    from markerstore.config import ERROR_TABLE_ENABLED as ENABLED
    from markerstore.spark.writer import Shape, stats_type, write

    started = time.perf_counter()
    src_options = dict(source_storage_options if source_storage_options is not None
                       else storage_options or {})
    settings = dict(options or {})
    settings.setdefault(config.MARKERS_TYPE, markers)
    settings.setdefault(ENABLED, "true" if error_table else "false")
    resolved = _checked(settings)  # a bad option fails here, before anything is read
    tasks = list_tasks(source, src_options, fmt, resolved[config.INGEST_SPLIT_BYTES],
                       json_documents=resolved[config.INGEST_JSON_MULTILINE],
                       whole_files=resolved[config.INGEST_ENCODING] in UTF16)
    resolved = _implied_separator(settings, resolved, tasks)
    _csv_only(resolved, tasks)
    tasks = with_skip(tasks, src_options, read_options(resolved),
                      resolved[config.INGEST_CSV_SKIP], resolved[config.INGEST_SPLIT_BYTES])
    headers = _headers(tasks, src_options, resolved)
    case_sensitive = _case_sensitive(spark, conf)
    target = _target_schema(schema, tasks, src_options, resolved, case_sensitive)
    columns = [] if partition_by is None else (
        [partition_by] if isinstance(partition_by, str) else list(partition_by))
    # Validate key, partition columns and checks on the driver, before anything is written.
    probe = errortable.Validator(target, key, columns, dict(checks or {}))
    del probe

    session = spark or spark_session(master, conf=conf, remote=remote, options=settings)
    plan = IngestPlan(target, key, columns, dict(checks or {}), src_options,
                      _task_splits(session, tasks, headers, resolved, src_options), settings,
                      case_sensitive)
    splits = plan.splits

    def frame(job: Any) -> Any:
        """The source tasks' stats rows: one row per Spark task (its number)."""
        return session.range(0, len(splits), 1, len(splits)).mapInArrow(plan.task(job),
                                                                        stats_type())

    with progress_bar(session, progress):
        if is_connect(session):
            from markerstore.ingest.remote import write_remote

            result = write_remote(session, plan, table, mode=mode, options=settings,
                                  storage_options=storage_options, task_hook=_task_hook)
        else:
            from pyspark.sql.pandas.types import from_arrow_schema

            shape = Shape(session, from_arrow_schema(target))  # no DataFrame is needed
            result = write(shape, table, partition_by=columns or None, mode=mode,
                           options=settings, storage_options=storage_options,
                           _task_hook=_task_hook, _frame=frame)
    return IngestResult(result, source, sum(len(s) for s in splits), target,
                        seconds=time.perf_counter() - started, spark_tasks=len(splits))


def _checked(settings: Mapping[str, Any]) -> config.Settings:
    """The ingest's options parsed, and checked together (a separator is no escape)."""
    resolved = config.resolve(settings)
    read_options(resolved)
    return resolved


def _csv_only(settings: config.Settings, tasks: Sequence[SourceTask]) -> None:
    """Refuse, in one line, Spark's lineSep for JSON files (their lines end with LF or CRLF
    here) and DuckDB's skip and null_padding for any file but CSV: either would be
    silently ignored."""
    if config.INGEST_CSV_LINE_SEP in settings.given and any(t.format == "json"
                                                            for t in tasks):
        raise SourceError(f"option {config.INGEST_CSV_LINE_SEP}: read for CSV files only; "
                          "JSON lines end with LF (or CRLF) here")
    for key in (config.INGEST_CSV_SKIP, config.INGEST_CSV_NULL_PADDING):
        other = sorted({t.format for t in tasks if t.format != "csv"})
        if key in settings.given and other:
            raise SourceError(f"option {key}: read for CSV files only, and the source holds "
                              f"{' and '.join(other)}")


def _implied_separator(settings: dict[str, Any], resolved: config.Settings,
                       tasks: Sequence[SourceTask]) -> config.Settings:
    """`resolved`, with a tab as the CSV separator where every CSV file is named .tsv or
    .tab and no separator is given (`settings` then holds it too)."""
    implied = None if config.INGEST_CSV_SEP in resolved.given else implied_separator(tasks)
    if implied is None:
        return resolved
    settings[config.INGEST_CSV_SEP] = implied
    return _checked(settings)


def _target_schema(schema: str | pa.Schema | None, tasks: Sequence[SourceTask],
                   src_options: Mapping[str, Any], settings: config.Settings,
                   case_sensitive: bool = False) -> pa.Schema:
    if isinstance(schema, pa.Schema):
        return schema
    if schema:
        return load_schema(schema, dict(src_options))
    return infer_schema(tasks, src_options, settings, case_sensitive=case_sensitive)


CASE_SENSITIVE = "spark.sql.caseSensitive"


def _case_sensitive(spark: Any, conf: Mapping[str, str] | None) -> bool:
    """Spark's ``spark.sql.caseSensitive`` (whether a CSV header's names repeat without
    case): the given session's, else ``--conf``'s, else Spark's default (false)."""
    value = (conf or {}).get(CASE_SENSITIVE)
    settings = getattr(spark, "conf", None)
    if settings is not None:
        value = settings.get(CASE_SENSITIVE, value or "false")
    return str(value or "false").strip().lower() == "true"


def _headers(tasks: Sequence[SourceTask], src_options: Mapping[str, Any],
             settings: config.Settings) -> dict[str, Header]:
    """The header record of each CSV file and where it starts, by URL (none with
    ``header=false``). Where no separator is given, a header that reads as one column
    holding another common separator is refused before anything runs: every record would
    fail, or be one column."""
    if not settings[config.INGEST_CSV_HEADER]:
        return {}
    reading = read_options(settings)
    headers = csv_headers(tasks, src_options, reading)
    for url, header in headers.items():  # a header that is no text: every record would be
        if header.data is not None:  # an error record, or a row of no column
            raise SourceError(encoding_hint(url, header.data, reading))
    if config.INGEST_CSV_SEP not in settings.given:
        for url, header in headers.items():
            hint = separator_hint(url, header.text, reading)
            if hint is not None:
                raise SourceError(hint)
    return headers


def _task_splits(session: Any, tasks: Sequence[SourceTask], headers: Mapping[str, Header],
                 settings: config.Settings, storage_options: Mapping[str, Any] | None = None
                 ) -> Splits:
    """The source splits of each Spark task (packed by bytes, one wave per core at least),
    with the CSV header line of each split's file and whether the split drops it (the
    range its record starts in: no task reads the file's start again to learn it). Each
    CSV byte range carries its quote state (the first pass, on the driver)."""
    from markerstore.ingest.quotestates import quote_states
    from markerstore.ingest.session import default_parallelism

    cores = default_parallelism(session)
    tasks = balanced(tasks, cores, settings)
    tasks = quote_states(tasks, storage_options, read_options(settings))
    packed = pack(tasks, cores, settings[config.INGEST_TASK_BYTES])
    def split(task: SourceTask) -> tuple[SourceTask, str | None, bool]:
        header = headers.get(task.url)
        if header is None:
            return task, None, False
        return task, header.text, starts_in(task, header.start)

    return [[split(tasks[i]) for i in numbers] for numbers in packed]


def balanced(tasks: Sequence[SourceTask], cores: int, settings: config.Settings
             ) -> list[SourceTask]:
    """`tasks`, where no split size is given, with each JSON-lines or CSV file that may be
    read in byte ranges (not compressed, not UTF-16, not a JSON document) cut into ranges
    of equal size, none below MIN_SPLIT_BYTES: two ranges per core for the source as a
    whole, so that one large file keeps every core busy to the end (three ranges of 64
    MiB on two cores would leave one core idle a third of the time), and a file of two
    minimal ranges or more is never read by one task alone (a 36 MB file: two ranges,
    one a core on local[2])."""
    split = settings[config.INGEST_SPLIT_BYTES]
    if config.INGEST_SPLIT_BYTES in settings.given:
        return list(tasks)
    even = -(-sum(t.size for t in tasks) // (2 * max(1, cores)))
    return recut(tasks, max(MIN_SPLIT_BYTES, min(split, even)), least=MIN_SPLIT_BYTES)
