"""The `markerstore` command line."""

from markerstore.cli.main import cli, emit, main, parse_storage_options

__all__ = ["cli", "emit", "main", "parse_storage_options"]
