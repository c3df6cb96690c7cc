"""Data file names and Hive-style partition folders.

A data file is named ``<fileId>_<partitionId>-<stageId>-<attemptId>_<instant>.parquet``:

* ``fileId`` is ``<write UUID>-<n>`` (n counts the files of one task attempt), so every
  file, upload and staged file of a write can be found, and scoped, by its name alone;
* the write token ``<partitionId>-<stageId>-<attemptId>`` (attemptId is Spark's
  taskAttemptId, unique in the application) keeps two attempts of a task apart;
* the instant ties the file to its commit on the timeline.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markerstore.errors import ConfigError
from markerstore.paths import HIVE_DEFAULT_PARTITION
from markerstore.timeline import is_instant

PARQUET = ".parquet"
_UUID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,127}$")
# Characters Spark/Hive escape in partition values (ExternalCatalogUtils.escapePathName),
# and the C1 controls, which no folder name may hold (markerstore.paths.CONTROL_RANGES):
# escaped as %XX, which Spark's unescapePathName reads back. A value holding a line
# separator or a bidirectional control is refused where its folder is named.
_ESCAPE = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)} | \
    {chr(c) for c in range(0x80, 0xA0)}


def check_write_uuid(write_uuid: str) -> str:
    """A write UUID usable in file names: letters, digits and '-', up to 128 chars."""
    if not isinstance(write_uuid, str) or not _UUID_RE.match(write_uuid):
        raise ConfigError(f"write UUID {write_uuid!r} may hold only letters, digits and '-' "
                          "(it is put in every file name)")
    return write_uuid


@dataclass(frozen=True)
class FileName:
    """The parts of a data file name."""

    write_uuid: str
    seq: int
    partition_id: int
    stage_id: int
    attempt_id: int
    instant: str
    extension: str = PARQUET

    @property
    def file_id(self) -> str:
        return f"{self.write_uuid}-{self.seq}"

    @property
    def write_token(self) -> str:
        return f"{self.partition_id}-{self.stage_id}-{self.attempt_id}"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}{self.extension}"

    @classmethod
    def parse(cls, name: str) -> FileName | None:
        """The parts of `name` (a bare file name), or None if it is not a data file name."""
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem:
            return None
        parts = stem.split("_")
        if len(parts) != 3:
            return None
        file_id, token, instant = parts
        write_uuid, _, seq = file_id.rpartition("-")
        numbers = token.split("-")
        if (not write_uuid or not seq.isdigit() or not is_instant(instant)
                or len(numbers) != 3 or not all(n.isdigit() for n in numbers)
                or not _UUID_RE.match(write_uuid)):
            return None
        return cls(write_uuid, int(seq), int(numbers[0]), int(numbers[1]), int(numbers[2]),
                   instant, "." + ext)


def parse_path(path: str) -> FileName | None:
    """The parts of the file name at the end of `path` (any folder prefix)."""
    return FileName.parse(path.rstrip("/").rpartition("/")[2])


def belongs_to(path: str, write_uuid: str, instant: str) -> bool:
    """Whether the file at `path` was written by this write (UUID and instant both match)."""
    parsed = parse_path(path)
    return parsed is not None and parsed.write_uuid == write_uuid and parsed.instant == instant


def escape_value(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in text)


def format_timestamp(value: _dt.datetime) -> str:
    """A timestamp as Spark writes it in a partition folder name: wall-clock time in the
    value's own time zone (Arrow batches from Spark carry the session time zone), no
    offset, the fraction of a second only if any, without trailing zeros:
    ``2024-01-02 03:04:05`` or ``2024-01-02 03:04:05.25``."""
    text = value.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text


def format_value(value: Any) -> str:
    """A partition value as Spark writes it in a folder name."""
    if value is None:
        return HIVE_DEFAULT_PARTITION
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        text = format_timestamp(value)
    elif isinstance(value, bytes):
        text = value.hex()
    else:
        text = str(value)
    if text == "":
        return HIVE_DEFAULT_PARTITION
    return escape_value(text)


def partition_path(columns: Sequence[str], values: Sequence[Any]) -> str:
    """``col=value/col=value`` for the given columns and values ('' if no columns)."""
    pairs = zip(columns, values, strict=True)
    return "/".join(f"{escape_value(c)}={format_value(v)}" for c, v in pairs)


def relative_path(partition: str, file_name: str) -> str:
    return f"{partition}/{file_name}" if partition else file_name


def partition_of(path: str) -> str:
    return path.rpartition("/")[0]


def under(partition: str, scope: str) -> bool:
    """Whether `partition` is `scope` or below it ('' is the whole table)."""
    return scope == "" or partition == scope or partition.startswith(scope + "/")
