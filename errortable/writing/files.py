"""Error files: names, streaming writers (Parquet via pyarrow, the default; Avro via
fastavro), readers. A Parquet error file carries the ErrorRecord Avro schema in its
key-value metadata under ``parquet.avro.schema``, as parquet-avro writes it.

A reader failure always names the file, as a CorruptErrorFileError, so a caller can skip
it and go on with the other files.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from typing import IO, Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from fastavro.write import Writer as AvroWriter

from errortable import schema as S
from errortable.writing import avroblock
from markerstore.errors import CorruptErrorFileError
from markerstore.storage import Storage

EXTENSIONS = {"avro": ".avro", "parquet": ".parquet"}
PARQUET_ROW_GROUP = 50_000
AVRO_CODEC = "deflate"
AVRO_LEVEL = 1  # zlib's fastest: error files are written far more often than read
AVRO_BLOCK_ROWS = 20_000
# parquet-avro's key (Hudi's and parquet-mr's readers take the Avro schema from it): the
# RFC-20 ErrorRecord schema stays the logical schema of a Parquet error file.
AVRO_SCHEMA_KEY = "parquet.avro.schema"
_UNSAFE = re.compile(r"[^A-Za-z0-9.=-]+")


def file_name(task_attempt: str, instant: str, fmt: str) -> str:
    """``<uuid>-<task attempt>_<instant>.<ext>``: unique per attempt, so two attempts of one
    task never write the same file, and reconcile can tell them apart."""
    token = _UNSAFE.sub("-", task_attempt).strip("-")[:60] or "task"
    return f"{uuid.uuid4().hex[:16]}-{token}_{instant}{EXTENSIONS[fmt]}"


def format_of(path: str) -> str:
    for fmt, ext in EXTENSIONS.items():
        if path.endswith(ext):
            return fmt
    raise CorruptErrorFileError(f"{path}: not an error file (expected .avro or .parquet)")


class ErrorFileWriter:
    """Streams ErrorRecord dicts into one open file handle in the chosen format."""

    def __init__(self, handle: IO[bytes], fmt: str, metadata: dict[str, str] | None = None
                 ) -> None:
        if fmt not in EXTENSIONS:
            raise ValueError(f"unknown error file format {fmt!r}")
        self.handle = handle
        self.format = fmt
        self.rows = 0
        self._avro: Any = None
        self._parquet: pq.ParquetWriter | None = None
        self._pending: list[dict[str, Any]] = []
        self._sync = os.urandom(16)
        if fmt == "avro":
            self._avro = AvroWriter(handle, S.parsed_schema(), codec=AVRO_CODEC,
                                    compression_level=AVRO_LEVEL, sync_marker=self._sync,
                                    metadata=dict(metadata or {}))
        else:
            meta = {AVRO_SCHEMA_KEY: S.avro_schema_json(), **(metadata or {})}
            schema = S.arrow_schema().with_metadata(
                {k.encode(): v.encode() for k, v in meta.items()})
            # No min/max statistics for the text columns: pyarrow keeps copies of a
            # value for them, several times a 30 MB value's size in memory.
            self._parquet = pq.ParquetWriter(handle, schema, compression="zstd",
                                             write_statistics=["ts"])

    def write(self, records: Iterable[dict[str, Any]]) -> int:
        n = 0
        if self._avro is not None:
            write = self._avro.write
            for record in records:
                write(record)
                n += 1
        else:
            for record in records:
                self._pending.append(record)
                n += 1
            if len(self._pending) >= PARQUET_ROW_GROUP:
                self._flush_parquet()
        self.rows += n
        return n

    def write_arrow(self, table: pa.Table) -> int:
        """Append rows already in the ErrorRecord Arrow schema (Avro: whole blocks encoded
        column by column, see avroblock; Parquet: as they are)."""
        if self._parquet is None:
            self._avro.flush()  # fastavro's pending block first: blocks stay in order
            for start in range(0, table.num_rows, AVRO_BLOCK_ROWS):
                chunk = table.slice(start, AVRO_BLOCK_ROWS)
                try:
                    data = avroblock.block(chunk, AVRO_CODEC, self._sync, AVRO_LEVEL)
                except NotImplementedError:
                    self.write(S.arrow_to_records(chunk))
                    self._avro.flush()
                    continue
                self.handle.write(data)
                self.rows += chunk.num_rows
            return table.num_rows
        self._flush_parquet()
        self._parquet.write_table(table)
        self.rows += table.num_rows
        return table.num_rows

    def _flush_parquet(self) -> None:
        if self._pending and self._parquet is not None:
            self._parquet.write_table(S.records_to_arrow(self._pending))
            self._pending = []

    def close(self) -> None:
        """Finish the file (the handle is closed by the caller)."""
        if self._avro is not None:
            self._avro.flush()
        elif self._parquet is not None:
            self._flush_parquet()
            self._parquet.close()


def read_avro(handle: IO[bytes], where: str) -> pa.Table:
    """An Avro error file as an Arrow table in the ErrorRecord schema (fastavro decodes it:
    DuckDB has no Avro reader here)."""
    try:
        reader = fastavro.reader(handle, reader_schema=S.parsed_schema())
        return S.records_to_arrow(reader)  # type: ignore[arg-type]
    except CorruptErrorFileError:
        raise
    except Exception as exc:
        raise CorruptErrorFileError(f"error file {where} cannot be read as ErrorRecord Avro: "
                                    f"{type(exc).__name__}: {exc}") from exc


def check_parquet(storage: Storage, path: str) -> None:
    """Read a Parquet error file's footer and check its schema (one GET of the footer)."""
    where = storage.url(path)
    try:
        with storage.open_read(path) as handle:
            schema = pq.read_schema(handle)
    except FileNotFoundError:
        raise CorruptErrorFileError(f"error file {where} is missing") from None
    except Exception as exc:
        raise CorruptErrorFileError(f"error file {where} cannot be read as Parquet: "
                                    f"{type(exc).__name__}: {exc}") from exc
    expected = S.arrow_schema()
    if not schema.remove_metadata().equals(expected):
        raise CorruptErrorFileError(f"error file {where} does not hold ErrorRecord rows: its "
                                    f"schema is {schema.remove_metadata()}")


def read_file(storage: Storage, path: str) -> pa.Table:
    """One error file (Avro or Parquet) as an Arrow table; CorruptErrorFileError names it."""
    where = storage.url(path)
    fmt = format_of(path)
    try:
        handle = storage.open_read(path)
    except FileNotFoundError:
        raise CorruptErrorFileError(f"error file {where} is missing") from None
    with handle:
        if fmt == "avro":
            return read_avro(handle, where)
        try:
            table = pq.read_table(handle)
        except Exception as exc:
            raise CorruptErrorFileError(f"error file {where} cannot be read as Parquet: "
                                        f"{type(exc).__name__}: {exc}") from exc
    expected = S.arrow_schema()
    if not table.schema.remove_metadata().equals(expected):
        raise CorruptErrorFileError(f"error file {where} does not hold ErrorRecord rows: its "
                                    f"schema is {table.schema.remove_metadata()}")
    return table.replace_schema_metadata(None)
