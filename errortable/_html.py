"""HTML tables for notebooks (`_repr_html_` of result objects)."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from typing import Any


def _cell(value: Any, max_chars: int = 200) -> str:
    if value is None:
        return ""
    text = json.dumps(value, default=str) if isinstance(value, (list, dict)) else str(value)
    if len(text) > max_chars:
        text = text[:max_chars] + "…"
    return html.escape(text)


def table_html(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """An HTML table of dict rows (values escaped and cut to 200 characters)."""
    if not rows:
        return "<p><i>(no rows)</i></p>"
    columns = list(columns or rows[0].keys())
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
