"""DuckDB views over a table: commits, files, markers (errortable adds `errors`:
``errortable.table_connect(table)``)."""

from markerstore.sql.views import ViewProvider, connect, sql

__all__ = ["ViewProvider", "connect", "sql"]
