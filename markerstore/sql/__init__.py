"""DuckDB views over a table: commits, files, markers (and errors, from errortable)."""

from markerstore.sql.views import connect, register_view

__all__ = ["connect", "register_view"]
