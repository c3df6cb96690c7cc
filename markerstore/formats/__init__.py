"""Table formats a markerstore table also publishes (Delta Lake, Apache Iceberg).

Each completed instant becomes exactly one version or snapshot of each format the table
names in ``.markerstore/table.json``, in the instants' order. The commit protocol calls
the small interface of :mod:`markerstore.formats.base`; each format is one module behind
it (``delta``, ``iceberg``), imported lazily, with an install hint where its package is
missing (``pip install 'markerstore[delta]'`` / ``'markerstore[iceberg]'``).
"""
