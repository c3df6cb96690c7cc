"""HTML for notebooks and the report page: the one renderer behind every result's
``_repr_html_``.

Two shapes: a table of rows (:func:`table_html`) and a two-column table of named values
(:func:`fields_html`). Every name and value is escaped (HTML, and control characters
written visibly as in text output: :func:`markerstore.render.text.visible`), long values
are cut. Imports nothing of the project but :mod:`markerstore.render.text`, so any layer
may use it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from markerstore.render.text import visible

MAX_CHARS = 200
_TH = "<th style='text-align:left'>"
_TD = "<td style='text-align:left'>"


def cell(value: Any, max_chars: int = MAX_CHARS) -> str:
    """One value as escaped HTML text: lists and dicts as JSON, None as nothing, cut to
    `max_chars` characters, control characters visible."""
    if value is None:
        return ""
    text = json.dumps(value, default=str) if isinstance(value, (list, dict)) else str(value)
    if len(text) > max_chars:
        text = text[:max_chars] + "…"
    return html.escape(visible(text))


def text(value: Any) -> str:
    """Any text (a name, a caption) escaped for HTML, control characters visible."""
    return html.escape(visible(value))


def table_html(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """An HTML table of dict rows (values escaped and cut to 200 characters)."""
    if not rows:
        return "<p><i>(no rows)</i></p>"
    columns = list(columns or rows[0].keys())
    head = "".join(f"<th>{text(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fields_html(fields: Mapping[str, Any] | Iterable[tuple[str, Any]],
                caption: str | None = None) -> str:
    """A two-column HTML table: one row per (name, value), names as row headers."""
    pairs = fields.items() if isinstance(fields, Mapping) else fields
    body = "".join(f"<tr>{_TH}{text(k)}</th>{_TD}{cell(v)}</td></tr>" for k, v in pairs)
    head = f"<caption>{text(caption)}</caption>" if caption else ""
    return f"<table>{head}{body}</table>"
