"""The ingest's task path without Spark (tests only): read a source file the way a Spark
task of `markerstore ingest` reads it (IngestTask.results: blocks, the vectorized pass, the
reference parser for suspects, the error records), and give its rows and error records."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import errortable
from markerstore import config
from markerstore.commit import TaskSpec
from markerstore.ingest.charsets import UTF16
from markerstore.ingest.header import read_header_at, starts_in, with_skip
from markerstore.ingest.options import read_options, value_formats
from markerstore.ingest.quotestates import quote_states
from markerstore.ingest.schema import ddl_to_arrow
from markerstore.ingest.sources import list_tasks
from markerstore.ingest.task import IngestTask


def run(path: Path, data: bytes, ddl: str, *, options: Mapping[str, Any] | None = None,
        block_bytes: int | None = None, split_bytes: int | None = None,
        extra_columns: str = "error", key: str | None = None,
        counts: dict[str, int] | None = None, driver_header: bool = True,
        driver_states: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows, error records with their context as a dict) of ingesting `data` written to
    `path` (its extension gives the format); rows sorted by :func:`ordered` (a block
    gives the rows of its suspect records after the others). `counts` gets the source
    records and lines the parser read, as the commit does. The CSV header is read once,
    and each range told whether it drops it, as the driver does; with `driver_header`
    false each range learns that itself. Likewise each CSV range is told its quote state
    (the driver's first pass), unless `driver_states` is false."""
    path.write_bytes(data)
    resolved = config.resolve(options)
    documents = resolved[config.INGEST_JSON_MULTILINE]
    whole = resolved[config.INGEST_ENCODING] in UTF16  # as the pipeline lists them
    tasks = list_tasks(str(path), split_bytes=split_bytes, json_documents=documents,
                       whole_files=whole) \
        if split_bytes else list_tasks(str(path), json_documents=documents, whole_files=whole)
    tasks = with_skip(tasks, None, read_options(options), resolved[config.INGEST_CSV_SKIP],
                      split_bytes or resolved[config.INGEST_SPLIT_BYTES])
    if driver_states:
        tasks = quote_states(tasks, None, read_options(options))
    validator = errortable.Validator(ddl_to_arrow(ddl), key, extra_columns=extra_columns,
                                     formats=value_formats(options))
    kwargs: dict[str, Any] = {} if options is None else {"options": options}
    if block_bytes is not None:
        kwargs["block_bytes"] = block_bytes
    task = IngestTask(TaskSpec("file:///unused", "i", "u", "direct"), validator,
                      errortable.CaptureContext, **kwargs)
    rows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    headers = resolved[config.INGEST_CSV_HEADER]
    found_header = (read_header_at(tasks[0], None, read_options(options))
                    if tasks and tasks[0].format == "csv" and headers else None)
    for t in tasks:
        header = None if found_header is None else found_header.text
        drops = starts_in(t, found_header.start) if found_header and driver_header else None
        ctx = errortable.CaptureContext(task_attempt="t", source_file=t.url)
        for good, found in task.results(t, header, ctx, source=counts, drops_header=drops):
            rows += good.to_pylist()
            if found is not None:
                errors += [{**e, "context": dict(e["context"])} for e in found.to_pylist()]
    return ordered(rows), errors


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in a fixed order (by their repr)."""
    return sorted(rows, key=repr)


def reasons(errors: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(reason, source line) of each error record, by line."""
    return sorted(((e["context"]["reason"], e["context"].get("sourceLine", ""))
                   for e in errors), key=lambda r: (int(r[1] or 0), r[0]))
