"""The table-relative path rules of :mod:`markerstore.paths`, vectorized over Arrow.

:func:`markerstore.paths.path_problem` checks one Python string; a million committed
files checked one by one cost about a second. :func:`bad_paths` applies exactly the same
rules to an Arrow array of strings in one pass (RE2 through pyarrow), and
:func:`check_paths` raises as the one-by-one check does, naming the first bad path with
path_problem's own reason. tests/paths/test_paths_arrow.py checks that the two agree on a
corpus built from every piece the rules look at.

The rules (paths.py): not null; not empty; valid UTF-8 (Arrow strings are, once
validated); not absolute (no leading ``/``, no ``scheme://``); no backslash or control
character; no segment empty, ``.`` or ``..``; not under ``.markerstore/``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from markerstore.paths import META_SEGMENT, control_class, path_problem

# One pattern for every rule that a regular expression can see (RE2 syntax).
_BAD = "|".join([
    r"^/",  # absolute
    r"^[A-Za-z][A-Za-z0-9+.\-]*://",  # scheme://
    r"[\\" + control_class("re2") + "]",  # a backslash or a control character
    r"(^|/)\.{0,2}(/|$)",  # an empty, '.' or '..' segment (and the empty path)
    "^" + META_SEGMENT.replace(".", r"\.") + "(/|$)",  # the table's own folder
])


def bad_paths(paths: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A boolean array: True where path_problem(path) is not None (empty paths are bad)."""
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks()
    paths = paths.cast(pa.string())
    paths.validate(full=True)  # UTF-8: Arrow refuses what path_problem calls a surrogate
    matched = pc.match_substring_regex(paths, _BAD)
    return pc.fill_null(matched, True)  # null: not a string


def check_paths(paths: pa.Array | pa.ChunkedArray, what: str = "path") -> None:
    """ValueError naming the first path path_problem refuses, with its reason."""
    bad = bad_paths(paths)
    if not pc.any(bad).as_py():
        return
    if isinstance(paths, pa.ChunkedArray):
        paths = paths.combine_chunks()
    first = paths.filter(bad)[0].as_py()
    problem = path_problem(first) or "is not a table-relative path"
    raise ValueError(f"{what} {first!r} is not inside the table: it {problem}")
