"""The `record` of an error row for a JSON line the vectorized pass parsed: the JSON that
errortable's per-record path stores for it, ``to_json(json.loads(line))`` (a CSV record's
is built from the fields Arrow read: ``IngestTask._validate``).

The JSON lines of a block are decoded in one call (they are well-formed objects: the
vectorized pass parsed them), which is about twice as fast as a call per line; a block
Python's json refuses as a whole is decoded line by line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def json_payloads(lines: Sequence[str]) -> list[str]:
    """Python's JSON of the objects on `lines`, as errortable stores a record."""
    from errortable.capture.records import to_json

    values: list[Any] | None = None
    try:
        values = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        values = None
    if values is None or len(values) != len(lines):
        values = [json.loads(line) for line in lines]
    return [to_json(v) for v in values]

