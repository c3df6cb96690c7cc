"""Reading a table back the way Delta and Iceberg users do, with nothing of markerstore:
delta-rs's pyarrow reader and its DataFusion ``QueryBuilder``, and pyiceberg loading the
table from its catalog by identifier (for a local table: the embedded SQLite catalog
``.markerstore/iceberg/catalog.db`` whose tables are kept under the catalog name
``markerstore``, identifier ``markerstore.<folder>``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

EMBEDDED_CATALOG = ".markerstore/iceberg/catalog.db"


def delta(url: str, storage_options: Mapping[str, str] | None = None) -> Any:
    from deltalake import DeltaTable

    return DeltaTable(url, storage_options=dict(storage_options or {}))


def delta_arrow(url: str, storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """Every row delta-rs's pyarrow reader returns."""
    return delta(url, storage_options).to_pyarrow_table()


def delta_sql(url: str, sql: str = "SELECT * FROM t",
              storage_options: Mapping[str, str] | None = None) -> pa.Table:
    """`sql` over the table (as ``t``) through delta-rs's DataFusion engine."""
    from deltalake import QueryBuilder

    reader = QueryBuilder().register("t", delta(url, storage_options)).execute(sql)
    return pa.table(reader.read_all())


def iceberg_catalog(url: str, properties: Mapping[str, str] | None = None) -> Any:
    """The Iceberg catalog of a local table: `properties` (pyiceberg's own names), else
    the table's embedded SQLite catalog."""
    from pyiceberg.catalog import load_catalog

    given = dict(properties or {"type": "sql",
                                "uri": f"sqlite:///{os.path.join(url, EMBEDDED_CATALOG)}"})
    return load_catalog("markerstore", **given)  # the name its tables are kept under


def iceberg(url: str, identifier: str | None = None,
            properties: Mapping[str, str] | None = None) -> Any:
    """The Iceberg table of the local table at `url`, loaded by pyiceberg."""
    name = identifier or f"markerstore.{os.path.basename(url.rstrip('/'))}"
    return iceberg_catalog(url, properties).load_table(name)


def iceberg_arrow(url: str, identifier: str | None = None,
                  properties: Mapping[str, str] | None = None) -> pa.Table:
    """Every row pyiceberg's scan returns."""
    return iceberg(url, identifier, properties).scan().to_arrow()


def rows(data: pa.Table, columns: Iterable[str] | None = None) -> list[tuple[Any, ...]]:
    """The rows of `data` as sorted tuples of `columns` (default: every column, sorted by
    name), for comparing what engines read with what was written."""
    names = sorted(data.column_names) if columns is None else list(columns)
    picked = data.select(names).to_pylist()
    return sorted((tuple(r[c] for c in names) for r in picked), key=repr)


def every_reader(url: str, storage_options: Mapping[str, str] | None = None, *,
                 delta_on: bool = True, iceberg_on: bool = True) -> dict[str, pa.Table]:
    """What each engine reads of the table: delta-rs (pyarrow and DataFusion), pyiceberg."""
    found: dict[str, pa.Table] = {}
    if delta_on:
        found["delta-rs pyarrow"] = delta_arrow(url, storage_options)
        found["delta-rs datafusion"] = delta_sql(url, storage_options=storage_options)
    if iceberg_on:
        found["pyiceberg"] = iceberg_arrow(url)
    return found
