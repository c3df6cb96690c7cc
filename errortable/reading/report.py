"""Summaries of an error table: counts by reason, fingerprint, commit and day; recent rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import duckdb

from errortable.reading.access import connect
from markerstore.render import figures
from markerstore.render.charts import charts_html
from markerstore.render.html import table_html, text


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
          ) -> list[dict[str, Any]]:
    relation = con.execute(sql, params or [])
    columns = [d[0] for d in relation.description or []]
    return [dict(zip(columns, values, strict=True)) for values in relation.fetchall()]


@dataclass
class ErrorStats:
    """Counts of committed error rows; renders as HTML in notebooks."""

    path: str
    total: int = 0
    by_reason: list[dict[str, Any]] = field(default_factory=list)
    by_fingerprint: list[dict[str, Any]] = field(default_factory=list)
    by_commit: list[dict[str, Any]] = field(default_factory=list)
    by_day: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_html_(self) -> str:
        parts = [f"<h4>error table {text(self.path)}: {self.total} committed error row(s)</h4>"]
        for title, rows in (("by reason", self.by_reason),
                            ("by fingerprint", self.by_fingerprint),
                            ("by commit", self.by_commit), ("by day", self.by_day)):
            parts.append(f"<b>{title}</b>" + table_html(rows))
        parts.append(charts_html([
            figures.reason_chart({r["reason"]: r["rows"] for r in self.by_reason}),
            figures.fingerprint_chart(self.by_fingerprint[:10]),
            figures.day_chart(self.by_day)], unique=True))
        return "".join(parts)


def stats(path: str, storage_options: Mapping[str, Any] | None = None, *, top: int = 20,
          strict: bool = False) -> ErrorStats:
    """Counts by reason, by fingerprint (the `top` largest groups, with a sample message),
    by commit (main instant and error instant) and by day."""
    con = connect(path, storage_options, strict=strict)
    result = ErrorStats(path)
    result.total = int(con.sql("SELECT count(*) FROM errors").fetchall()[0][0])
    result.by_reason = _rows(con, "SELECT reason, count(*) AS rows FROM errors "
                                  "GROUP BY reason ORDER BY rows DESC, reason")
    result.by_fingerprint = _rows(con, """
        SELECT fingerprint, any_value(reason) AS reason,
               any_value(coalesce(check_name, column_name, error_class)) AS detail,
               count(*) AS rows, min(created_at) AS first_seen, max(created_at) AS last_seen,
               any_value(error) AS sample
        FROM errors GROUP BY fingerprint ORDER BY rows DESC, fingerprint LIMIT ?""", [top])
    result.by_commit = _rows(con, """
        SELECT source_table, source_instant, error_instant, count(*) AS rows,
               count(replayed_instant) AS replayed
        FROM errors GROUP BY ALL ORDER BY source_instant, source_table""")
    result.by_day = _rows(con, "SELECT CAST(day AS VARCHAR) AS day, count(*) AS rows "
                               "FROM errors GROUP BY day ORDER BY day")
    return result


SHOW_COLUMNS = ["created_at", "source_instant", "reason", "fingerprint", "record_key",
                "partition_path", "error", "record", "uid"]


def show(path: str, storage_options: Mapping[str, Any] | None = None, *,
         commit: str | None = None, limit: int = 20, strict: bool = False
         ) -> list[dict[str, Any]]:
    """The newest committed error rows, optionally of one commit (the main instant, or the
    error instant)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    con = connect(path, storage_options, strict=strict)
    where, params = "", []
    if commit is not None:
        where = "WHERE source_instant = ? OR error_instant = ?"
        params = [commit, commit]
    columns = ", ".join(SHOW_COLUMNS)
    return _rows(con, f"SELECT {columns} FROM errors {where} "
                      f"ORDER BY created_at DESC, uid LIMIT {int(limit)}", params)
