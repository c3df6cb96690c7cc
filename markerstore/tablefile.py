"""The table file ``.markerstore/table.json``: a table's stable id and the table formats it
publishes, written once by the table's first write."""

from __future__ import annotations

import json
import re

from markerstore.errors import CorruptTableError
from markerstore.option_values import table_formats

_TABLE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{7,63}$")


def parse_table_file(raw: bytes, where: str) -> str:
    """The id in a ``table.json``: ``{"table_id": "<8 to 64 letters, digits, '-'>"}``."""
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise CorruptTableError(where, f"the table file is not JSON: {exc}") from None
    table_id = payload.get("table_id") if isinstance(payload, dict) else None
    if not isinstance(table_id, str) or not _TABLE_ID.match(table_id):
        raise CorruptTableError(where, f"'table_id' must be 8 to 64 letters, digits and "
                                       f"'-', got {table_id!r:.80}")
    return table_id


def parse_table_formats(raw: bytes, where: str) -> tuple[str, ...]:
    """The table formats a ``table.json`` records (``"formats": ["delta", ...]``; none when
    absent)."""
    payload = json.loads(raw)  # parse_table_file checked it is a JSON object
    formats = payload.get("formats", [])
    try:
        if not isinstance(formats, list):
            raise ValueError(f"expected a list, got {formats!r:.80}")
        parsed = table_formats(formats)
        if len(parsed) != len(formats):
            raise ValueError(f"a format is named twice or is empty: {formats!r:.80}")
    except ValueError as exc:
        raise CorruptTableError(where, f"'formats' of the table file: {exc}") from None
    return parsed
