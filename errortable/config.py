"""Error table options (registered in markerstore.config) and where the error table lives.

RFC-20's rules: the error table is off by default; when on, it is *local* (``<table>`` +
suffix, beside the target table) unless a name or a base path is set, which selects the
*global* table ``<base path>/<name>`` and ignores the suffix. A global table without a
base path lives in the folder that holds the target table (RFC: "same as the base path");
without a name it is called ``hoodie_errors``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markerstore import config as msconfig
from markerstore.config import Option, Settings
from markerstore.errors import ConfigError

ENABLED = "markerstore.write.error.table.enabled"
SUFFIX = "markerstore.write.error.table.suffix"
NAME = "markerstore.write.error.table.name"
BASE_PATH = "markerstore.write.error.table.base.path"
FORMAT = "markerstore.write.error.table.format"
STACKTRACE_MAX_CHARS = "markerstore.write.error.table.stacktrace.max_chars"
PAYLOAD_DROP = "markerstore.write.error.table.payload.drop"
PAYLOAD_REDACT = "markerstore.write.error.table.payload.redact"

SUFFIX_DEFAULT = "_errors"
NAME_DEFAULT = "hoodie_errors"
FORMATS = ("avro", "parquet")
FORMAT_DEFAULT = "parquet"
STACKTRACE_MAX_CHARS_DEFAULT = 4000

_NAME_RE = re.compile(r"^[A-Za-z0-9_.=-]+$")


def _name(value: Any) -> str:
    text = str(value).strip()
    if not text or not _NAME_RE.match(text) or text in (".", ".."):
        raise ValueError(f"expected a folder name (letters, digits, _ . = -), got {value!r}")
    return text


def _optional_name(value: Any) -> str | None:
    return None if value is None or not str(value).strip() else _name(value)


def _optional_path(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip().rstrip("/")
    return text or None


def _fields(value: Any) -> tuple[str, ...]:
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


def _format(value: Any) -> str:
    text = str(value).strip().lower()
    if text not in FORMATS:
        raise ValueError(f"expected one of {', '.join(FORMATS)}, got {value!r}")
    return text


for _opt in (
    Option(ENABLED, False, msconfig._bool,
           "Write records that fail parsing, casting, key/partition extraction or a check "
           "to an error table instead of failing the job.",
           ("hoodie.write.error.table.enabled",)),
    Option(SUFFIX, SUFFIX_DEFAULT, _name,
           "Local error table: the folder beside the target table, named table + suffix. "
           "Ignored when a name or a base path is set (global table).",
           ("hoodie.write.error.table.suffix",)),
    Option(NAME, None, _optional_name,
           f"Global error table name (default {NAME_DEFAULT!r}); setting it selects the "
           "global table.",
           ("hoodie.write.error.table.name",)),
    Option(BASE_PATH, None, _optional_path,
           "Global error table base path (default: the folder holding the target table); "
           "setting it selects the global table.",
           ("hoodie.write.error.table.base.path",)),
    Option(FORMAT, FORMAT_DEFAULT, _format,
           "Error file format: parquet (read by DuckDB's own reader; the RFC-20 Avro schema "
           "is kept in each file's key-value metadata) or avro (fastavro container), both "
           "in the ErrorRecord schema."),
    Option(STACKTRACE_MAX_CHARS, STACKTRACE_MAX_CHARS_DEFAULT, msconfig._int_min(0),
           "Characters of stack trace kept in `message` (the innermost frames); 0 keeps none."),
    Option(PAYLOAD_DROP, False, msconfig._bool,
           "PII: store no record payload (`record` is null) and strip quoted values from "
           "messages."),
    Option(PAYLOAD_REDACT, (), _fields,
           "PII: field paths (comma-separated, nested with dots) whose values are replaced "
           "by [REDACTED] in the stored record."),
):
    msconfig.register(_opt)


@dataclass(frozen=True)
class ErrorTableConfig:
    """The parsed error table options: picklable, so executors get them with the task."""

    enabled: bool = False
    suffix: str = SUFFIX_DEFAULT
    name: str | None = None
    base_path: str | None = None
    format: str = FORMAT_DEFAULT
    stacktrace_max_chars: int = STACKTRACE_MAX_CHARS_DEFAULT
    drop_payload: bool = False
    redact: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | Settings | None = None
                     ) -> ErrorTableConfig:
        """Parse options (canonical keys or hoodie.* aliases; other markerstore keys are
        allowed and ignored here, unknown keys are a ConfigError)."""
        settings = msconfig.resolve(options)
        return cls(enabled=settings[ENABLED], suffix=settings[SUFFIX], name=settings[NAME],
                   base_path=settings[BASE_PATH], format=settings[FORMAT],
                   stacktrace_max_chars=settings[STACKTRACE_MAX_CHARS],
                   drop_payload=settings[PAYLOAD_DROP], redact=tuple(settings[PAYLOAD_REDACT]))

    @property
    def is_global(self) -> bool:
        return self.name is not None or self.base_path is not None


@dataclass(frozen=True)
class ErrorTableLocation:
    """Where a target table's error rows go."""

    url: str
    is_global: bool
    name: str

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "is_global": self.is_global, "name": self.name}


def _absolute(url: str) -> str:
    url = url.strip()
    if "://" not in url and not url.startswith("/"):
        return os.path.abspath(url)
    return url


def _split_parent(url: str) -> tuple[str, str]:
    stripped = url.rstrip("/")
    parent, sep, base = stripped.rpartition("/")
    if not sep or not base or parent.endswith(":/") or parent.endswith(":"):
        raise ConfigError(f"table path {url!r} has no parent folder to put an error table in")
    return parent, base


def locate(target_url: str, options: Mapping[str, Any] | Settings | ErrorTableConfig | None
           = None) -> ErrorTableLocation:
    """The error table of `target_url` under `options`: local ``<table><suffix>`` or global
    ``<base path>/<name>``. Does not check `enabled`: the writer decides whether to write."""
    if not isinstance(target_url, str) or not target_url.strip():
        raise ConfigError(f"table path must be a non-empty string, got {target_url!r}")
    cfg = options if isinstance(options, ErrorTableConfig) else \
        ErrorTableConfig.from_options(options)
    target = _absolute(target_url).rstrip("/")
    parent, base = _split_parent(target)
    if cfg.is_global:
        name = cfg.name or NAME_DEFAULT
        root = _absolute(cfg.base_path) if cfg.base_path else parent
        url = f"{root.rstrip('/')}/{name}"
        if url == target or url.startswith(target + "/") or target.startswith(url + "/"):
            raise ConfigError(f"the global error table {url} would be inside the target table "
                              f"{target} or hold it; choose another base path or name")
        return ErrorTableLocation(url, True, name)
    name = base + cfg.suffix
    return ErrorTableLocation(f"{parent}/{name}", False, name)
