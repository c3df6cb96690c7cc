"""A markerstore streaming sink with a hook after each committed batch, for tests and
benchmarks that need to act between two micro-batches (record timings, kill a process).

The classes are made at run time with a `module` name that no worker can import, so
Spark's cloudpickle ships them by value: a Spark worker needs nothing from the caller's
module, only markerstore.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Committed = Callable[[Any, Any, int], None]


def hooked_stream_source(name: str, committed: Committed, module: str) -> type:
    """The markerstore data source under the name `name`, whose stream writer calls
    ``committed(writer, result, batch_id)`` after each batch commits."""
    from markerstore.spark.source import MarkerStoreDataSource, MarkerStoreStreamWriter

    writer: Any = type("HookedStreamWriter", (MarkerStoreStreamWriter,),
                       {"committed": committed, "__module__": module})

    def stream_writer(self: Any, schema: Any, overwrite: bool) -> Any:
        base = MarkerStoreDataSource.streamWriter(self, schema, overwrite)
        hooked = writer.__new__(writer)
        hooked.__dict__.update(base.__dict__)
        return hooked

    def source_name(cls: type) -> str:
        return name

    return type("HookedSource", (MarkerStoreDataSource,),
                {"streamWriter": stream_writer, "name": classmethod(source_name),
                 "__module__": module})
