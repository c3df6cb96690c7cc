"""What a PII policy keeps out of an error record, and how.

Under ``payload.drop`` or ``payload.redact`` no part of a protected value may reach the
stored record: not `record`, not `message` (its text or its stack trace), not `context`.
Two lines of defence, neither a pattern that a value could slip past:

1. **Messages are built from parts that hold no record data.** An exception's text may
   quote the record, whatever characters it holds, so under a policy it is never stored:
   the message is the failure's own description (column, target type, check name, error
   class) or, for the few exceptions whose parts are known (:func:`safe_exception_text`),
   text rebuilt from those parts; a stack trace keeps its frames and drops every
   exception's text (:func:`frames_only`).
2. **Every protected value is swept out of the rest** (:func:`sweep`): each occurrence of
   each protected value, as it is and in its escaped spellings, is replaced by
   ``[REDACTED]`` in the message, the record and the context values that copy data, for
   a value copied into another field (values of fewer than `SWEEP_MIN_CHARS` characters
   excepted, which would wipe unrelated text).
"""

from __future__ import annotations

import csv
import json
import re
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from markerstore.values.shapes import ShapeError

REDACTED = "[REDACTED]"
WITHHELD = "message withheld (the record is protected by the PII policy)"
SWEEP_MIN_CHARS = 4


def key_name(key: Any) -> str:
    """A key as a policy names it: without case and surrounding whitespace (``Email``,
    ``EMAIL`` and ``" email "`` are the field ``email``)."""
    return str(key).strip().casefold()


def _parts(paths: Iterable[str]) -> list[list[str]]:
    return [[key_name(part) for part in path.split(".")] for path in paths]


def _walk(record: Any, paths: Iterable[str], on_match: Callable[[Any], Any]) -> Any:
    """Walk `record` (iteratively: any depth) and call ``on_match(value)`` for each value
    that a path names, putting its result in its place; returns the rebuilt copy. A path
    starts at every object of the record, not only its root (a field is protected
    wherever it is); a path walks objects by key (matched as :func:`key_name`), ``*``
    matches every key, and a list on the way applies the rest of the path to each of its
    elements."""
    parts = _parts(paths)
    starts = frozenset((p, 0) for p in range(len(parts)))
    holder: list[Any] = [None]
    stack: list[tuple[Any, frozenset[tuple[int, int]], Any, Any]] = \
        [(record, frozenset(), holder, 0)]
    while stack:
        value, states, parent, slot = stack.pop()
        if isinstance(value, list):
            copy: Any = [None] * len(value)
            stack.extend((item, states, copy, i) for i, item in enumerate(value))
        elif isinstance(value, dict):
            copy = {}
            active = states | starts
            for key, item in value.items():
                name = key_name(key)
                inner = frozenset((p, i + 1) for p, i in active
                                  if parts[p][i] in ("*", name))
                if any(i == len(parts[p]) for p, i in inner):
                    copy[key] = on_match(item)
                else:
                    copy[key] = None
                    stack.append((item, inner, copy, key))
        else:
            copy = value
        parent[slot] = copy
    return holder[0]


def names_field(paths: Iterable[str], field: str) -> bool:
    """Whether one of the dotted `paths` names the field at dotted path `field` or a field
    it lies in (a path matches at any depth: ``id`` names ``user.id``; ``user`` names
    ``user.id`` too), keys compared as :func:`key_name`."""
    names = [key_name(part) for part in field.split(".")]
    for path in _parts(paths):
        for start in range(len(names) - len(path) + 1):
            if all(p in ("*", n) for p, n in zip(path, names[start:])):
                return True
        if path[0] in ("*", names[0]):  # the field holds a protected value
            return True
    return False


def redact(record: Any, paths: Iterable[str]) -> Any:
    """A copy of `record` with the values each dotted path names replaced by [REDACTED]
    (see :func:`_walk`: any depth, keys without case and surrounding whitespace). Null
    values stay null. The input is not modified."""
    paths = list(paths)
    if not paths:
        return record
    return _walk(record, paths, lambda value: None if value is None else REDACTED)


def safe_exception_text(exc: BaseException) -> str | None:
    """An exception's text built only from parts that hold no record data (positions,
    codec names, fixed phrases), for the exceptions whose parts are known: JSON decoding,
    Unicode decoding and encoding, CSV. None for any other exception: its text may quote
    the record, and under a PII policy it is withheld."""
    if isinstance(exc, ShapeError):
        return exc.safe
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg}: line {exc.lineno} column {exc.colno} (char {exc.pos})"
    if isinstance(exc, (UnicodeDecodeError, UnicodeEncodeError)):
        verb = "decode" if isinstance(exc, UnicodeDecodeError) else "encode"
        return (f"{exc.encoding!r} codec can't {verb} position {exc.start}-{exc.end - 1}: "
                f"{exc.reason}")
    if isinstance(exc, csv.Error):  # fixed phrases naming the dialect's characters only
        return " ".join(str(exc).split())
    return None


def frames_only(exc: BaseException) -> str:
    """A stack trace of `exc` (and the exceptions it was raised from) without any
    exception's text: file, line, function and source line of each frame, then the class.
    The source lines come from the program's files, never from the record."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__
                                        else current.__context__)
    parts: list[str] = []
    for item in reversed(chain):
        frames = traceback.extract_tb(item.__traceback__) if item.__traceback__ else []
        if parts:
            parts.append("\nwhile handling it, another exception was raised:\n\n")
        if frames:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_list(frames))
        parts.append(f"{type(item).__name__}: [text withheld]\n")
    return "".join(parts)


def secrets_of(record: Any, paths: Iterable[str] | None) -> list[str]:
    """The protected values of a record, as text: every scalar at the redacted `paths`
    (as :func:`redact` finds them), or with `paths` None (the payload is dropped) every
    scalar of the record."""
    found: list[str] = []
    if record is None:
        return found
    if paths is None or isinstance(record, str):
        _leaves(record, found)
    else:
        _walk(record, paths, lambda value: _leaves(value, found))
    return sorted({v for v in found if len(v) >= SWEEP_MIN_CHARS}, key=len, reverse=True)


def _leaves(value: Any, found: list[str]) -> None:
    """Every scalar under `value` as text, appended to `found` (iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None and not isinstance(item, bool):
            found.append(item if isinstance(item, str) else str(item))


def spellings(secret: str) -> list[str]:
    """The ways a value may be spelled in a message: as it is, JSON-, Python- and
    SQL-escaped, with its whitespace collapsed, and line by line."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             repr(secret)[1:-1], secret.replace("'", "''"), " ".join(secret.split()),
             secret.encode("unicode_escape").decode("ascii")}
    forms.update(line for line in re.split(r"[\r\n\u2028\u2029]+", secret))
    return sorted((f for f in forms if len(f.strip()) >= SWEEP_MIN_CHARS), key=len,
                  reverse=True)


def sweep(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of every protected value, in each of its spellings,
    replaced by [REDACTED]: the second line of defence, for a protected value copied into
    another field (the first is that no message quotes a protected column)."""
    for secret in secrets:
        for form in spellings(secret):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def sweep_value(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return sweep(value, secrets) if value != REDACTED else value
    if isinstance(value, dict):
        return {k: sweep_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [sweep_value(v, secrets) for v in value]
    return value
