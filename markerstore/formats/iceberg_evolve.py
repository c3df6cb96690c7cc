"""Schema evolution of an Iceberg table, as the Iceberg spec defines it.

A commit whose columns differ from the table's evolves the schema in the transaction of
its snapshot (``update_schema().union_by_name()``): new columns added as optional (the
rows before them hold none), a column made optional where the commit's files hold nulls
in it or do not have it, and the type promotions the spec allows (``int`` to ``long``,
``float`` to ``double``, ``decimal(P, S)`` to ``decimal(P', S)`` with P' > P; a narrower
column than the table's is read as the table's type). Any other type change, and a type
Iceberg has no equivalent for, is refused when the write starts (TableFormatError).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import ResolveError, ValidationError
from pyiceberg.schema import Schema, promote
from pyiceberg.table import Transaction
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from markerstore.errors import IcebergPublishError, TableFormatError


@dataclass(frozen=True)
class Evolution:
    """What a commit changes in the table's schema: the schema to union by name (its new
    columns optional), and the table's required columns its files lack."""

    union: pa.Schema
    optional: list[str] = field(default_factory=list)


def _iceberg(schema: pa.Schema) -> Schema:
    return Catalog._convert_schema_if_needed(schema)


def check_types(schema: pa.Schema) -> None:
    """TableFormatError naming the first column Iceberg has no type for."""
    try:
        _iceberg(schema)
        return
    except Exception:  # pyiceberg's own for an unsupported type, TypeError, ValueError
        pass
    for column in schema:
        try:
            _iceberg(pa.schema([column]))
        except Exception as exc:
            reason = " ".join(str(exc).split())[:160]
            raise TableFormatError(f"Iceberg cannot hold column {column.name!r} of type "
                                   f"{column.type}: {reason}") from None


def _compatible(old: IcebergType, new: IcebergType, name: str) -> bool:
    """Whether files of type `new` fit a column of type `old`; True when the table's type
    must widen to `new`. TableFormatError for a change Iceberg does not allow."""
    if old == new:
        return False
    if isinstance(old, StructType) and isinstance(new, StructType):
        ours = {f.name: f for f in old.fields}
        widen = [_compatible(ours[f.name].field_type, f.field_type, f"{name}.{f.name}")
                 for f in new.fields if f.name in ours]
        return any(widen) or any(f.name not in ours for f in new.fields)
    if isinstance(old, ListType) and isinstance(new, ListType):
        return _compatible(old.element_type, new.element_type, f"{name}.element")
    if isinstance(old, MapType) and isinstance(new, MapType):
        return (_compatible(old.key_type, new.key_type, f"{name}.key")
                | _compatible(old.value_type, new.value_type, f"{name}.value"))
    if old.is_primitive and new.is_primitive:
        try:
            promote(old, new)  # the table's type widens to the files'
            return True
        except ResolveError:
            pass
        try:
            promote(new, old)  # narrower files, read as the table's type
            return False
        except ResolveError:
            pass
    raise TableFormatError(
        f"column {name!r} is {new} in this write but {old} in the Iceberg table: Iceberg "
        "allows only int to long, float to double and a decimal's precision to grow")


def plan_schema(current: Schema, schema: pa.Schema, *, has_files: bool = True
                ) -> Evolution | None:
    """How the Iceberg table of schema `current` evolves to take files of `schema` (None
    when it takes them as it is); TableFormatError for a change Iceberg does not allow."""
    check_types(schema)
    theirs = {f.name: f for f in _iceberg(schema).fields}
    ours: dict[str, NestedField] = {f.name: f for f in current.fields}
    changed = any(name not in ours for name in theirs)
    for name, old in ours.items():
        new = theirs.get(name)
        if new is None:
            continue
        changed |= _compatible(old.field_type, new.field_type, name)
        changed |= old.required and new.optional
    optional = [name for name, old in ours.items()
                if has_files and old.required and name not in theirs]
    if not changed and not optional:
        return None
    union = pa.schema([f if f.name in ours else f.with_nullable(True) for f in schema])
    return Evolution(union, optional)


def evolve(tx: Transaction, instant: str, evolved: Evolution) -> None:
    """The table's schema (and its name mapping) evolved for the files of `instant`, in the
    transaction of its snapshot: ``union_by_name`` (new columns, nullability widened,
    Iceberg's type promotions), and the columns its files lack made optional."""
    try:
        with tx.update_schema() as update:
            update.union_by_name(evolved.union)
            for name in evolved.optional:
                update.make_column_optional(name)
    except (ValueError, ValidationError) as exc:
        raise IcebergPublishError(f"instant {instant}: the table's new columns do not fit "
                                  f"the Iceberg table's schema: {exc}") from exc
