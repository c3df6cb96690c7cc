"""PySpark: ``df.write.format("markerstore")``, ``df.writeStream.format("markerstore")``,
snapshot reads, and the function ``markerstore.spark.write(df, path, ...)``.

Importing this package registers the ``markerstore`` format with the active Spark
session, if there is one (call :func:`register` for any other session).
"""

from markerstore.commit.result import CommitResult
from markerstore.spark.connect import write
from markerstore.spark.read import read
from markerstore.spark.source import last_commit, register

__all__ = ["CommitResult", "last_commit", "read", "register", "write"]


def _register_active_session() -> None:
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        register(session)


_register_active_session()
