"""Avro data blocks encoded column by column with Arrow compute, for ErrorRecord rows.

fastavro encodes one Python dict at a time; with a ten-entry `context` map that costs
more than everything else on the error path. The ErrorRecord schema only has strings,
nullable strings and a nullable map of strings, whose Avro binary encodings are simple
(zig-zag varint lengths, union branch indexes, map blocks), so a whole block is built with
vectorized string joins instead. The block goes into a container file that fastavro wrote
the header of, with the same sync marker, so the file is ordinary Avro (tests read it back
with fastavro). Anything this encoder does not cover raises NotImplementedError, and the
caller falls back to fastavro.
"""

from __future__ import annotations

import zlib
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from errortable import schema as S

_BYTES = pa.array([bytes([i]) for i in range(256)], pa.binary())
_EMPTY = pa.scalar(b"", pa.binary())


def varint(values: pa.Array) -> pa.Array:
    """Avro's zig-zag varint of non-negative integers below 2**34, as binary values."""
    z = pc.multiply(pc.cast(values, pa.int64()), 2)
    top = pc.max(z).as_py() if len(z) else 0
    if top >= 1 << 35:
        raise NotImplementedError("a length too large for the block encoder")
    if top < 1 << 7:  # the common case: one byte each
        return _BYTES.take(pc.cast(z, pa.int32()))
    width = next(k for k in range(1, 6) if top < 1 << (7 * k))
    pieces = []
    for k in range(width):
        group = pc.bit_wise_and(pc.shift_right(z, 7 * k), 0x7F)
        more = pc.greater_equal(z, 1 << (7 * (k + 1)))
        byte = pc.if_else(more, pc.bit_wise_or(group, 0x80), group)
        piece = _BYTES.take(pc.cast(byte, pa.int32()))
        pieces.append(piece if k == 0 else
                      pc.if_else(pc.greater_equal(z, 1 << (7 * k)), piece, _EMPTY))
    return pc.binary_join_element_wise(*pieces, _EMPTY)


def _string(values: pa.Array) -> pa.Array:
    data = pc.cast(values, pa.binary())
    return pc.binary_join_element_wise(varint(pc.binary_length(data)), data, _EMPTY)


def _nullable(values: pa.Array, encode: Any) -> pa.Array:
    """["null", T]: branch 0 for null, branch 1 (zig-zag 2) then the value."""
    filled = values.fill_null(_fill_value(values.type)) if values.null_count else values
    encoded = pc.binary_join_element_wise(pa.scalar(b"\x02", pa.binary()), encode(filled),
                                          _EMPTY)
    if not values.null_count:
        return encoded
    return pc.if_else(values.is_null(), pa.scalar(b"\x00", pa.binary()), encoded)


def _fill_value(t: pa.DataType) -> Any:
    if pa.types.is_map(t):
        return pa.scalar([], t)
    return pa.scalar("", t)


def _map(values: pa.Array) -> pa.Array:
    """map<string>: one block of all entries (count, then key/value pairs), then 0."""
    if values.items.null_count:
        raise NotImplementedError("a null map value (Avro map values are strings)")
    offsets = values.offsets
    start = offsets[0].as_py()
    end = offsets[len(offsets) - 1].as_py()
    keys = values.keys.slice(start, end - start)
    items = values.items.slice(start, end - start)
    entries = pc.binary_join_element_wise(_string(keys), _string(items), _EMPTY)
    relative = pc.subtract(offsets, start)
    per_row = pc.binary_join(pa.ListArray.from_arrays(relative, entries), _EMPTY)
    counts = pc.subtract(offsets.slice(1), offsets.slice(0, len(values)))
    body = pc.binary_join_element_wise(varint(counts), per_row,
                                       pa.scalar(b"\x00", pa.binary()), _EMPTY)
    return pc.if_else(pc.equal(counts, 0), pa.scalar(b"\x00", pa.binary()), body)


def _encoder(avro_type: Any) -> Any:
    if avro_type == "string":
        return _string
    if isinstance(avro_type, list) and len(avro_type) == 2 and avro_type[0] == "null":
        inner = _encoder(avro_type[1])
        return lambda values: _nullable(values, inner)
    if isinstance(avro_type, dict) and avro_type.get("type") == "map" and \
            avro_type.get("values") == "string":
        return _map
    raise NotImplementedError(f"Avro type {avro_type!r}")


def encode_rows(table: pa.Table) -> bytes:
    """The Avro binary encoding of every row of `table` (ErrorRecord schema), concatenated."""
    table = table.combine_chunks()
    columns = []
    for f in S.avro_schema()["fields"]:
        column = table.column(f["name"])
        values = column.chunk(0) if column.num_chunks else pa.array([], column.type)
        if f["type"] == "string" and values.null_count:
            raise ValueError(f"ErrorRecord field {f['name']!r} is null in "
                             f"{values.null_count} row(s); it is required")
        columns.append(_encoder(f["type"])(values))
    rows = pc.binary_join_element_wise(*columns, _EMPTY)
    offsets, data = rows.buffers()[1], rows.buffers()[2]
    first = int.from_bytes(offsets.to_pybytes()[:4], "little", signed=True)
    last_at = 4 * len(rows)
    last = int.from_bytes(offsets.to_pybytes()[last_at:last_at + 4], "little", signed=True)
    return data.to_pybytes()[first:last] if data is not None else b""


def _varint_bytes(n: int) -> bytes:
    z = n * 2
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def block(table: pa.Table, codec: str, sync_marker: bytes, level: int | None = None) -> bytes:
    """One Avro container data block holding every row of `table`."""
    data = encode_rows(table)
    if codec == "deflate":
        compressor = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, -15)
        data = compressor.compress(data) + compressor.flush()
    elif codec != "null":
        raise NotImplementedError(f"codec {codec!r}")
    return _varint_bytes(table.num_rows) + _varint_bytes(len(data)) + data + sync_marker
