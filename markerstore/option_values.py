"""How option values are parsed: the value types behind :mod:`markerstore.config`'s
options (booleans, bounded integers, choices, sizes, folder names, field paths)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Parser = Callable[[Any], Any]


@dataclass(frozen=True)
class Option:
    key: str
    default: Any
    parse: Parser
    doc: str
    aliases: tuple[str, ...] = ()


def parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def json_or_text(value: str) -> Any:
    """A storage option's value as given on a command line or to Spark: JSON when it parses
    as JSON (true, 5, {...}), else the text as is."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def int_min(minimum: int) -> Parser:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"expected an integer, got {value!r}")
        number = int(str(value).strip())
        if number < minimum:
            raise ValueError(f"expected an integer >= {minimum}, got {number}")
        return number

    return parse


def choice(*choices: str, synonyms: Mapping[str, str] | None = None) -> Parser:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        text = (synonyms or {}).get(text, text)
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}, got {value!r}")
        return text

    return parse


def optional_fraction(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise ValueError(f"expected a fraction between 0 and 1, got {value!r}")
    number = float(str(value).strip())
    if not 0.0 <= number <= 1.0:
        raise ValueError(f"expected a fraction between 0 and 1, got {value!r}")
    return number


def optional_int_min(minimum: int) -> Parser:
    parse = int_min(minimum)

    def parse_optional(value: Any) -> int | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        return parse(value)

    return parse_optional


_SIZE = re.compile(r"^\d+(?:\.\d+)?\s*(?:[KMGT]i?B|B)$", re.IGNORECASE)


def memory_size(value: Any) -> str:
    """A memory size as DuckDB takes it: a number and a unit (B, KB, MB, GB, TB, KiB...)."""
    text = str(value).strip()
    if not _SIZE.match(text):
        raise ValueError(f"expected a size such as 512MB or 4GiB, got {text!r}")
    return text


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "": 1}


def duration_seconds(value: Any) -> float:
    """'7d', '12h', '30m', '45s', '2w', or a number of seconds ('0') as seconds."""
    if hasattr(value, "total_seconds"):
        return float(value.total_seconds())
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"expected a duration like 7d, 12h, 30m, 45s or 0, got {value!r}")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def duration(value: Any) -> str:
    """A duration as its text ('7d', '12h', '0'), checked (:func:`duration_seconds`)."""
    duration_seconds(value)
    return str(value).strip()


def text(value: Any) -> str:
    """A string as given (spaces kept: a CSV token may be one); None is empty."""
    return "" if value is None else str(value)


# Spark's escapes for a CSV separator (CSVExprUtils.toChar), as a command line gives them.
_SEPARATOR_ESCAPES = {"\\t": "\t", "\\b": "\b", "\\f": "\f", "\\'": "'", "\\\\": "\\"}


def _csv_char(value: Any, refused: str, expected: str, ascii_only: bool = True) -> str:
    """One character (ASCII unless not `ascii_only`), not in `refused`, given as itself or
    as one of Spark's escapes for it; else a ValueError saying what was `expected`."""
    given = "" if value is None else str(value)
    char = _SEPARATOR_ESCAPES.get(given, given)
    if len(char) != 1 or (ascii_only and not char.isascii()) or char in refused or \
            "\ud800" <= char <= "\udfff":
        raise ValueError(f"expected {expected}, got {given!r}")
    return char


def csv_separator(value: Any) -> str:
    """The field separator of a CSV record: one character other than the quote and a line
    break (any character, as Spark takes it: ``þ``, ``§``), or one of Spark's escapes for
    it (``\\t`` for a tab)."""
    return _csv_char(value, '"\r\n', "one character other than a quote or a line break "
                                      "(\\t for a tab)", ascii_only=False)


def csv_escape(value: Any) -> str:
    """The character that escapes a quote inside a quoted CSV field: the quote itself
    (RFC 4180's ``""``) or one other ASCII character that is no line break (Spark's
    default, a backslash, is ``\\``)."""
    return _csv_char(value, "\r\n", "one ASCII character other than a line break")


# Spark's `encoding` names (and common spellings) -> the name the ingest reads them by
_CHARSETS = {"utf-8": "utf-8", "utf8": "utf-8", "iso-8859-1": "iso-8859-1",
             "iso8859-1": "iso-8859-1", "latin1": "iso-8859-1", "latin-1": "iso-8859-1",
             "windows-1252": "windows-1252", "cp1252": "windows-1252",
             "utf-16": "utf-16", "utf16": "utf-16", "utf-16le": "utf-16le",
             "utf-16be": "utf-16be"}


def charset(value: Any) -> str:
    """A character encoding the ingest reads (Spark's `encoding`/`charset`)."""
    given = "" if value is None else str(value).strip()
    name = _CHARSETS.get(given.lower().replace("_", "-"))
    if name is None:
        raise ValueError(f"expected one of utf-8, iso-8859-1, windows-1252, utf-16, "
                         f"utf-16le, utf-16be, got {given!r}")
    return name


def locale(value: Any) -> str:
    """Spark's `locale` as a BCP 47 language tag CLDR knows (markerstore.values.locales)."""
    from markerstore.values.locales import canonical

    return canonical("" if value is None else str(value))


def optional_str(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


_FOLDER_NAME_RE = re.compile(r"^[A-Za-z0-9_.=-]+$")


def folder_name(value: Any) -> str:
    """One folder name: letters, digits, ``_ . = -``; not ``.`` or ``..``."""
    text = str(value).strip()
    if not text or not _FOLDER_NAME_RE.match(text) or text in (".", ".."):
        raise ValueError(f"expected a folder name (letters, digits, _ . = -), got {value!r}")
    return text


def optional_folder_name(value: Any) -> str | None:
    return None if value is None or not str(value).strip() else folder_name(value)


def optional_path(value: Any) -> str | None:
    """A path or URL without its trailing slashes; empty means not set."""
    if value is None:
        return None
    text = str(value).strip().rstrip("/")
    return text or None


def field_paths(value: Any) -> tuple[str, ...]:
    """A list of field paths: a list, or a comma-separated string ("email, address.street")."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    result = []
    for item in items:
        path = str(item).strip()
        if not path:
            continue
        if any(not part for part in path.split(".")):
            raise ValueError(f"field path {path!r} has an empty segment")
        result.append(path)
    return tuple(result)


TABLE_FORMAT_NAMES = ("delta", "iceberg")


def table_formats(value: Any) -> tuple[str, ...]:
    """The table formats a table publishes: a list, or a comma-separated string ("delta",
    "delta,iceberg"); empty or "none" for none. In a fixed order, each once."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    names = {str(item).strip().lower() for item in items} - {"", "none"}
    unknown = sorted(names - set(TABLE_FORMAT_NAMES))
    if unknown:
        raise ValueError(f"expected table formats among {', '.join(TABLE_FORMAT_NAMES)} "
                         f"(comma separated), got {', '.join(unknown)}")
    return tuple(n for n in TABLE_FORMAT_NAMES if n in names)


def json_object(value: Any) -> dict[str, str]:
    """A JSON object of string values (or a mapping), e.g. storage options of another
    library; empty means none."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"expected a JSON object, got {value!r:.80}: {exc}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object, got {value!r:.80}")
    return {str(k): str(v) for k, v in value.items()}
# --- Spark's reader options for the structure of records (CSV) ------------------------------
READ_MODES = ("PERMISSIVE", "FAILFAST")


def read_mode(value: Any) -> str:
    """Spark's ``mode``, any case: PERMISSIVE (every malformed record is one error record)
    or FAILFAST (none is allowed: the write fails and is rolled back). DROPMALFORMED is
    refused: here a malformed record is never dropped, the error table keeps it."""
    text = "" if value is None else str(value).strip().upper()
    if text == "DROPMALFORMED":
        raise ValueError("DROPMALFORMED would drop malformed records; here none is lost: each "
                         "is one error record in the error table (PERMISSIVE, the default), "
                         "or FAILFAST fails the write")
    if text not in READ_MODES:
        raise ValueError(f"expected PERMISSIVE or FAILFAST, got {value!r}")
    return text


def corrupt_record_column(value: Any) -> None:
    """Spark's ``columnNameOfCorruptRecord``: refused, as no row here holds a malformed
    record's text."""
    if value is None:
        return None
    raise ValueError("a malformed record is never a row here: the error table holds each one "
                     "with its text (column record), its reason and where it was; query it "
                     "instead")


def csv_quote(value: Any) -> str:
    """The character that opens and closes a quoted CSV field: one ASCII character that is
    no line break (Spark's quote; ``"`` by default)."""
    return _csv_char(value, "\r\n", "one ASCII character other than a line break")


def csv_comment(value: Any) -> str:
    """The character that starts a comment line (Spark's comment): one ASCII character
    that is no line break; empty: no comment lines (Spark's default)."""
    if value is None or str(value) in ("", "\x00", "\\u0000"):
        return ""
    return _csv_char(value, "\r\n", "one ASCII character other than a line break, or "
                                    "nothing (no comment lines)")


_LINE_SEPS = {"\\n": "\n", "\\r": "\r", "\\r\\n": "\r\n"}


def csv_line_sep(value: Any) -> str | None:
    """What ends a CSV record (Spark's lineSep): None (the default) for any of LF, CRLF and a
    lone CR; else one character (``\\n``, ``\\r`` or another ASCII character) or ``\\r\\n``."""
    if value is None or str(value) == "":
        return None
    given = str(value)
    sep = _LINE_SEPS.get(given, given)
    if sep == "\r\n" or (len(sep) == 1 and sep.isascii() and sep != '"'):
        return sep
    raise ValueError(f"expected one ASCII character or \\r\\n, got {given!r}")
