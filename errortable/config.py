"""Where the error table lives, and its settings parsed from the options.

The option keys, defaults and parsers are in markerstore.config (with every other key).

RFC-20's rules: the error table is off by default; when on, it is *local* (``<table>`` +
suffix, beside the target table) unless a name or a base path is set, which selects the
*global* table ``<base path>/<name>`` and ignores the suffix. A global table without a
base path lives in the folder that holds the target table (RFC: "same as the base path");
without a name it is called ``hoodie_errors``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markerstore import config as msconfig
from markerstore.config import (
    ERROR_PAYLOAD_DROP,
    ERROR_PAYLOAD_REDACT,
    ERROR_STACKTRACE_MAX_CHARS,
    ERROR_STACKTRACE_MAX_CHARS_DEFAULT,
    ERROR_TABLE_BASE_PATH,
    ERROR_TABLE_ENABLED,
    ERROR_TABLE_FORMAT,
    ERROR_TABLE_FORMAT_DEFAULT,
    ERROR_TABLE_NAME,
    ERROR_TABLE_NAME_DEFAULT,
    ERROR_TABLE_SUFFIX,
    ERROR_TABLE_SUFFIX_DEFAULT,
    Settings,
)
from markerstore.errors import ConfigError

# The option keys and defaults are declared in markerstore.config with every other key.


@dataclass(frozen=True)
class ErrorTableConfig:
    """The parsed error table options: picklable, so executors get them with the task."""

    enabled: bool = False
    suffix: str = ERROR_TABLE_SUFFIX_DEFAULT
    name: str | None = None
    base_path: str | None = None
    format: str = ERROR_TABLE_FORMAT_DEFAULT
    stacktrace_max_chars: int = ERROR_STACKTRACE_MAX_CHARS_DEFAULT
    drop_payload: bool = False
    redact: tuple[str, ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | Settings | None = None
                     ) -> ErrorTableConfig:
        """Parse options (canonical keys or hoodie.* aliases; other markerstore keys are
        allowed and ignored here, unknown keys are a ConfigError)."""
        settings = msconfig.resolve(options)
        return cls(enabled=settings[ERROR_TABLE_ENABLED], suffix=settings[ERROR_TABLE_SUFFIX],
                   name=settings[ERROR_TABLE_NAME], base_path=settings[ERROR_TABLE_BASE_PATH],
                   format=settings[ERROR_TABLE_FORMAT],
                   stacktrace_max_chars=settings[ERROR_STACKTRACE_MAX_CHARS],
                   drop_payload=settings[ERROR_PAYLOAD_DROP],
                   redact=tuple(settings[ERROR_PAYLOAD_REDACT]))

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
        name = cfg.name or ERROR_TABLE_NAME_DEFAULT
        root = _absolute(cfg.base_path) if cfg.base_path else parent
        url = f"{root.rstrip('/')}/{name}"
        if url == target or url.startswith(target + "/") or target.startswith(url + "/"):
            raise ConfigError(f"the global error table {url} would be inside the target table "
                              f"{target} or hold it; choose another base path or name")
        return ErrorTableLocation(url, True, name)
    name = base + cfg.suffix
    return ErrorTableLocation(f"{parent}/{name}", False, name)
