"""The PySpark writer: ``markerstore.spark.write(df, path, ...) -> CommitResult``."""

from markerstore.commit.result import CommitResult
from markerstore.spark.writer import write

__all__ = ["CommitResult", "write"]
