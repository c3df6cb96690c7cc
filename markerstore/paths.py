"""Table-relative paths: one set of rules for every path that names something in a table.

The same rules hold for a path a client sends (a marker request, a committed file) and
for a path markerstore reads back from the table's own files (segment rows, direct marker
names, plans, commit metadata, rollback and expire records, error-table metadata). Those
files are untrusted: anyone who can write the table's folder can put any text in them, so
a path read from them is checked here before anything reads or deletes what it names.

A table-relative path is a non-empty string, valid UTF-8, of segments joined by ``/``:
no segment is empty, ``.`` or ``..``; it is not absolute (no leading ``/``, no
``scheme://``); it holds no backslash and no control character; and it does not point
into the table's own ``.markerstore`` folder (data never lives there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from markerstore.errors import CorruptTableError

META_SEGMENT = ".markerstore"
# The folder name Hive and Spark give a null (or empty) partition value.
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# What no name in a table may hold: Unicode's control characters (category Cc: C0, DEL and
# C1), the line and paragraph separators (Zl, Zp), and the bidirectional formatting
# characters (of category Cf: marks, embeddings, overrides, isolates), which make a name
# display unlike what it is. Other Cf characters (a soft hyphen, the zero-width joiner of
# an emoji) change no line and no order, and are allowed.
CONTROL_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x061C, 0x061C), (0x200E, 0x200F),
                  (0x2028, 0x202E), (0x2066, 0x2069))


def control_class(syntax: str = "python") -> str:
    """The inside of a regular-expression character class matching CONTROL_RANGES, for
    Python's `re` or for RE2 (Arrow's and DuckDB's regular expressions)."""
    def char(code: int) -> str:
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if syntax == "python" else f"\\x{{{code:04x}}}"

    return "".join(char(a) if a == b else f"{char(a)}-{char(b)}" for a, b in CONTROL_RANGES)


CONTROL = re.compile(f"[{control_class()}]")
CONTROL_PROBLEM = ("contains a backslash or a control character (a Unicode control, a line "
                   "or paragraph separator, or a bidirectional control)")


def path_problem(path: Any, *, allow_empty: bool = False) -> str | None:
    """Why `path` is not a valid table-relative path, or None if it is one. The reason is
    a phrase to follow the quoted path ("is absolute", ...)."""
    if not isinstance(path, str):
        return f"is a {type(path).__name__}, not a string"
    if path == "":
        return None if allow_empty else "is empty"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (it holds a lone surrogate)"
    if path.startswith("/") or _SCHEME.match(path):
        return "is absolute; it must be relative to the table path"
    if "\\" in path or CONTROL.search(path):
        return CONTROL_PROBLEM
    segments = path.split("/")
    if any(segment in ("", ".", "..") for segment in segments):
        return "has an empty, '.' or '..' segment"
    if segments[0] == META_SEGMENT:
        return f"points into the table's {META_SEGMENT} folder"
    return None


def checked_paths(paths: Iterable[Any], source: str, *, what: str = "path"
                  ) -> list[str]:
    """Every path of `paths`, checked; CorruptTableError naming `source` (the file they
    were read from) and the first bad entry. Check the whole list before deleting any
    of it, so that a bad entry deletes nothing."""
    result = []
    for path in paths:
        problem = path_problem(path)
        if problem is not None:
            raise CorruptTableError(source, f"{what} {path!r} {problem}")
        result.append(path)
    return result
