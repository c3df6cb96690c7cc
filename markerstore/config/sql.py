"""The sandbox that runs SQL a user typed (`markerstore sql`)."""

from __future__ import annotations

from markerstore.option_values import (
    Option,
    int_min,
    memory_size,
)

SQL_TIME_LIMIT_MS = "markerstore.sql.sandbox.time_limit_ms"
SQL_MEMORY_LIMIT = "markerstore.sql.sandbox.memory_limit"

DEFINITIONS: tuple[Option, ...] = (
    Option(SQL_TIME_LIMIT_MS, 5 * 60 * 1000, int_min(0),
           "SQL sandbox: a query running longer than this is interrupted (0: no limit).",
           ()),
    Option(SQL_MEMORY_LIMIT, "2GB", memory_size,
           "SQL sandbox: DuckDB's memory_limit for the query (a size such as 512MB or 4GiB).",
           ()),
)
