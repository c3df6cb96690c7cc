"""Text for a terminal: stored values made visible, rows as an aligned table.

A stored value (an error message, a record, a file name, a partition) can hold control
characters, and printed raw they act on the terminal: ``\\x1b[2J`` clears it,
``\\x1b]52;c;...`` sets the clipboard (OSC 52), a bidi override reorders the line, a
newline forges a row. Every value printed as text goes through :func:`visible`, which
writes each such character as its Python escape (``\\x1b``, ``\\u202e``). JSON output
needs nothing more: ``json.dumps`` escapes them (it keeps DEL, which a terminal ignores).
Imports nothing of the project, so any layer may use it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

# C0 (tab and newline included), DEL, C1, the line and paragraph separators, and the
# bidirectional controls (marks, embeddings, overrides, isolates).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c"
                     "\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(value: Any) -> str:
    """`value` as text with every control character written as its escape (``\\x1b``)."""
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(_escape, text)


def cell(value: Any) -> str:
    """One value of a text table: None as nothing, lists and dicts as JSON, made visible."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return visible(value)


def table_lines(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None
                ) -> list[str]:
    """Rows as an aligned text table (a header line, then one line per row)."""
    if not rows:
        return ["(no rows)"]
    names = list(columns or rows[0].keys())
    cells = [[cell(row.get(c)) for c in names] for row in rows]
    header = [visible(c) for c in names]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    return ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip()
            for line in [header, *cells]]


def fields_lines(fields: Mapping[str, Any]) -> list[str]:
    """A mapping as aligned `name  value` lines."""
    width = max((len(visible(k)) for k in fields), default=0)
    return [f"{visible(k).ljust(width)}  {cell(v)}" for k, v in fields.items()]
