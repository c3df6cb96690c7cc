"""Ingest: read JSON lines, CSV or Parquet from any fsspec URL into a markerstore table."""
