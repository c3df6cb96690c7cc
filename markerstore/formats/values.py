"""Partition values as each format holds them, and the values a format's readers cannot
read back as written (refused before anything is written).

A markerstore data file's partition values are in its Hive-style folders, escaped once as
Spark escapes them (``%2F`` is ``/``, ``%25`` is ``%``): :func:`unescape` undoes that,
once. Delta keeps a partition value as text (PROTOCOL.md, "Partition Value
Serialization"); for every type but BINARY that is the folder's text. A BINARY value
is the text of its bytes: Spark and Delta's Java kernel write the bytes' UTF-8 text, and
delta-rs reads a binary partition value back as the UTF-8 bytes of its text, so bytes that
are not UTF-8 have no Delta text (delta-io/delta#6480). Iceberg keeps a partition value
typed in the manifest (:mod:`markerstore.formats.iceberg_files`).

Where a reader of a format gets a value wrong, the write that would give it that value is
refused before its first file, in one line naming the reader's bug:

* pyiceberg 0.12's Avro decoder reads every ``double`` as a 32-bit float
  (apache/iceberg-python#3808): a DOUBLE partition value scans back rounded (0.1 as
  0.10000000149011612) and an equality filter finds nothing. A DOUBLE partition column
  of a table that publishes Iceberg is refused while the installed pyiceberg does that.
* delta-rs 1.6's pyarrow reader (``to_pyarrow_table``) turns a negative DECIMAL partition
  value with a fraction into invalid text (``-0.01`` as ``0.-1``) and fails; such a value
  is refused for a table that publishes Delta.
"""

from __future__ import annotations

import decimal
import functools
import re
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from markerstore.errors import ConfigError
from markerstore.paths import HIVE_DEFAULT_PARTITION

_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")
ICEBERG_DOUBLE_ISSUE = "apache/iceberg-python#3808"
DELTA_BINARY_ISSUE = "delta-io/delta#6480"


def unescape(text: str) -> str:
    """A partition folder's text as the value it names: each ``%XX`` is the character
    with that code, as Spark's ``unescapePathName`` reads it (undone once)."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def delta_partition_value(text: str | None, column_type: pa.DataType) -> str | None:
    """The Delta partition value of a folder's (unescaped) text for a column of
    `column_type`: the text itself, None for null, and for BINARY the UTF-8 text of the
    bytes markerstore writes as hex (ValueError where they are not UTF-8)."""
    if text is None or text == HIVE_DEFAULT_PARTITION:
        return None
    if pa.types.is_binary(column_type) or pa.types.is_large_binary(column_type):
        return bytes.fromhex(text).decode("utf-8")
    return text


@functools.lru_cache(maxsize=1)
def pyiceberg_reads_doubles() -> bool:
    """Whether the installed pyiceberg reads an Avro ``double`` at full precision (its
    Cython decoder before apache/iceberg-python#3808 returns a 32-bit float)."""
    try:
        from pyiceberg.avro.decoder import new_decoder
    except ImportError:
        return True  # no pyiceberg here: nothing of it publishes or reads
    value = 0.1
    return bool(new_decoder(struct.pack("<d", value)).read_double() == value)


def partition_type_refusal(formats: Iterable[str], field: pa.Field) -> str | None:
    """Why a partition column of `field`'s type cannot be published to `formats` as
    written, or None."""
    if "iceberg" in formats and pa.types.is_float64(field.type) \
            and not pyiceberg_reads_doubles():
        return (f"DOUBLE partition column {field.name!r}: the installed pyiceberg reads a "
                "DOUBLE partition value back as a 32-bit float (0.1 as 0.10000000149011612; "
                f"{ICEBERG_DOUBLE_ISSUE}, fixed in later pyiceberg releases), so Iceberg "
                "readers would not see the values written; partition by another column, "
                "or cast it to DECIMAL or STRING")
    return None


def partition_value_refusal(formats: Iterable[str], field: pa.Field, value: Any
                            ) -> str | None:
    """Why the partition value `value` of column `field` cannot be published to
    `formats` as written, or None."""
    if "delta" not in formats or value is None:
        return None
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return (f"BINARY partition column {field.name!r}: the value {value[:16]!r} is "
                    "not UTF-8, and Delta keeps a binary partition value as the UTF-8 text "
                    f"of its bytes ({DELTA_BINARY_ISSUE}): no Delta reader could read it "
                    "back; partition by hex(...) of the column instead")
    if isinstance(value, decimal.Decimal) and value < 0 and pa.types.is_decimal(field.type) \
            and field.type.scale > 0:
        return (f"DECIMAL partition column {field.name!r}: the value {value} is negative "
                "with a fraction, which delta-rs's pyarrow reader (to_pyarrow_table) turns "
                "into invalid text and fails on; partition by another column, or cast it "
                "to STRING")
    return None


def check_partition_types(formats: Sequence[str], fields: Sequence[pa.Field]) -> None:
    """ConfigError (one line) for the first partition column whose type `formats` cannot
    hold as written; a task calls it before its first file."""
    for field in fields if formats else ():
        refusal = partition_type_refusal(formats, field)
        if refusal is not None:
            raise ConfigError(f"{refusal}; nothing was written")


def check_partition_values(formats: Sequence[str], fields: Sequence[pa.Field],
                           values: Sequence[Any]) -> None:
    """ConfigError (one line) for a partition value `formats` cannot hold as written; a
    task calls it before the value's folder is named."""
    for field, value in zip(fields, values, strict=True) if formats else ():
        refusal = partition_value_refusal(formats, field, value)
        if refusal is not None:
            raise ConfigError(f"{refusal}; the write fails, and nothing of it is committed")
